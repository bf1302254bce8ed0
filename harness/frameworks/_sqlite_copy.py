"""Querying a SQLite store's copy without trusting it: a private copy, bounded in size, time and rows.

The copy the harness took at a kill is never opened itself: opening a
database writes to it (a WAL is checkpointed into the main file and deleted, a
hot rollback journal is played back), which would destroy the evidence. So
the database and its ``-wal`` and ``-journal`` are copied (bounded, never
through a symlink) into a private temporary folder and opened there; its
``-shm`` is left behind, as SQLite rebuilds the index from the WAL. The
private copy is opened read-write because a hot journal can only be rolled
back by a writer (measured: ``mode=ro`` refuses with "attempt to write a
readonly database"); queries can still write nothing: ``PRAGMA query_only``,
an authorizer allowing reads only (no ATTACH, no PRAGMA), an untrusted
schema, a progress handler ending a query after ``QUERY_SECONDS``, values cut
at ``VALUE_LIMIT_BYTES`` and at most ``ROW_LIMIT`` rows.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from killpoint.harness.frameworks import _store_file
from killpoint.harness.frameworks._store_file import StoreUnreadable, read_store, store_path
from killpoint.harness.model import DurableState, Plan

QUERY_SECONDS = 5.0
# The files beside a SQLite database that hold what its reader must see: the WAL and its index, and a hot
# rollback journal a kill left mid-commit (the private copy plays it back). Every SQLite store copies them.
SIDE_FILES = ("-wal", "-shm", "-journal")
ROW_LIMIT = 100_000
VALUE_LIMIT_BYTES = 16 * 1024 * 1024
COPIED_SIDE_FILES = ("-wal", "-journal")
# What a query may do: read. Everything else (ATTACH, PRAGMA, writes, DDL) is denied.
_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
_PROGRESS_EVERY = 10_000  # virtual machine instructions between two looks at the clock


def read_database(folder: Path, template: str, plan: Plan, absent: DurableState,
                  read: Callable[[sqlite3.Connection, str, Plan], DurableState]) -> DurableState:
    """``read(connection, path, plan)`` on a guarded private copy of the store; ``absent`` when it was not copied
    (nothing durable yet), the problems when it cannot be read. Never raises."""
    try:
        path = store_path(template, plan)
        with opened_copy(folder, path) as connection:
            return absent if connection is None else read(connection, path, plan)
    except StoreUnreadable as problem:
        return DurableState.unreadable(absent.records_start, *problem.args)


@contextlib.contextmanager
def opened_copy(folder: Path, path: str) -> Iterator[sqlite3.Connection | None]:
    """A guarded connection to a private copy of ``folder/path``; None when the database was not copied."""
    main = read_store(folder, path)
    if main is None:
        yield None
        return
    try:
        private_folder = tempfile.TemporaryDirectory(prefix="killpoint-store-")
    except OSError as error:
        raise StoreUnreadable(f"{path}: no private folder to copy it into ({error})") from None
    with private_folder as private:
        copy = Path(private) / "store.sqlite"
        sides = {suffix: read_store(folder, path + suffix) for suffix in COPIED_SIDE_FILES}
        if len(main) + sum(len(side or b"") for side in sides.values()) > _store_file.STORE_LIMIT_BYTES:
            raise StoreUnreadable(f"{path} and its side files hold over {_store_file.STORE_LIMIT_BYTES} "
                                  "bytes; they were not read")
        try:
            copy.write_bytes(main)
            for suffix, side in sides.items():
                if side is not None:
                    Path(f"{copy}{suffix}").write_bytes(side)
        except OSError as error:
            raise StoreUnreadable(f"{path}: its private copy could not be written ({error})") from None
        try:
            connection = sqlite3.connect(f"file:{copy}?mode=rw", uri=True, isolation_level=None)
        except sqlite3.Error as error:
            raise StoreUnreadable(f"{path}: not a SQLite database SQLite can open ({error})") from None
        try:
            _guard(connection)
            yield connection
        except sqlite3.Error as error:
            raise StoreUnreadable(f"{path}: {error}") from None
        finally:
            connection.close()


def _guard(connection: sqlite3.Connection) -> None:
    connection.execute("PRAGMA trusted_schema = OFF")
    connection.execute("PRAGMA cell_size_check = ON")
    connection.execute("PRAGMA query_only = ON")
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, VALUE_LIMIT_BYTES)
    connection.set_authorizer(lambda action, *_: sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY)


def run_query(connection: sqlite3.Connection, sql: str, parameters: tuple[Any, ...] = ()) -> tuple[
        tuple[str, ...], list[tuple[Any, ...]]]:
    """The query's column names and rows; sqlite3.Error when it fails, is cut off, or returns too much."""
    deadline = time.monotonic() + QUERY_SECONDS
    connection.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_EVERY)
    rows: list[tuple[Any, ...]] = []
    size = 0
    try:
        cursor = connection.execute(sql, parameters)
        while batch := cursor.fetchmany(1000):
            rows += batch
            size += sum(len(value) for row in batch for value in row if isinstance(value, str | bytes))
            if len(rows) > ROW_LIMIT or size > VALUE_LIMIT_BYTES:
                raise sqlite3.OperationalError(f"the query returned over {ROW_LIMIT} rows or "
                                               f"{VALUE_LIMIT_BYTES} bytes; no honest plan records that much")
    except sqlite3.OperationalError:
        if time.monotonic() > deadline:
            raise sqlite3.OperationalError(f"the query ran past {QUERY_SECONDS:g} s and was stopped") from None
        raise
    finally:
        connection.set_progress_handler(None, 0)
    return tuple(column[0] for column in cursor.description or ()), rows


def has_table(connection: sqlite3.Connection, name: str) -> bool:
    """Whether the schema holds a table or view ``name`` (a store whose writer never set up has none)."""
    return bool(run_query(connection, "SELECT 1 FROM sqlite_master WHERE name = ? AND type IN ('table', 'view')",
                          (name,))[1])
