"""Querying a SQLite store's copy without trusting it: a private copy, read in a confined child, bounded.

The copy the harness took at a kill is never opened itself: opening a
database writes to it (a WAL is checkpointed into the main file and deleted, a
hot rollback journal is played back), which would destroy the evidence. So
the database and its ``-wal`` and ``-journal`` are copied (bounded, never
through a symlink) into a private folder and opened there, by a child that
owns that folder and nothing else (``_sandbox``: nobody, a deadline kept from
outside, memory bounded); its ``-shm`` is left behind, as SQLite rebuilds the
index from the WAL. The private copy is opened read-write because a hot
journal can only be rolled back by a writer (measured: ``mode=ro`` refuses
with "attempt to write a readonly database"), and the report says when one
was. A journal whose trailer names a super-journal is never handed to SQLite:
playing it back opens, reads and deletes the file named there, a name the
workload wrote (``/etc/passwd``, a FIFO that blocks forever).

Queries can write nothing: ``PRAGMA query_only``, an authorizer allowing reads
only (no ATTACH, no PRAGMA), an untrusted schema. Each is bounded as its rows
arrive, not after: at most ``ROW_LIMIT`` rows, ``VALUE_LIMIT_BYTES`` of text
and blobs in all (a single value too), ``QUERY_SECONDS`` of time, and SQLite's
sorts and temporary tables stay in its ``HEAP_LIMIT_BYTES`` of memory; past a
limit the store is unreadable, and the problem names the limit.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from killpoint.errors import InternalError
from killpoint.harness.judge.stores import _store_file
from killpoint.harness.judge.stores._sandbox import private_folder, read_in_child
from killpoint.harness.judge.stores._store_file import StoreUnreadable, read_store, store_path
from killpoint.harness.model import DurableState, Plan

QUERY_SECONDS = 5.0
# The files beside a SQLite database that hold what its reader must see: the WAL and its index, and a hot
# rollback journal a kill left mid-commit (the private copy plays it back). Every SQLite store copies them.
SIDE_FILES = ("-wal", "-shm", "-journal")
ROW_LIMIT = 100_000
VALUE_LIMIT_BYTES = 16 * 1024 * 1024
# What SQLite may allocate in the reader (its sorts and temporary tables are kept in memory, never in files).
HEAP_LIMIT_BYTES = 512 * 1024 * 1024
COPIED_SIDE_FILES = ("-wal", "-journal")
PRIVATE_NAME = "store.sqlite"
# What a query may do: read. Everything else (ATTACH, PRAGMA, writes, DDL) is denied.
_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
_PROGRESS_EVERY = 1_000  # virtual machine instructions between two looks at the clock
# Clean reads, by all that decides them: the reader, the plan, the limits and the copied bytes. A session reads
# the crash-free run's final store once a run, and many copies are alike; the child's fork is most of a read's cost.
_CLEAN_READS: dict[str, DurableState] = {}
_CLEAN_READS_KEPT = 256
# A rollback journal's magic: its header starts with it, and so ends a super-journal record (pager.c).
JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")


def read_database(folder: Path, template: str, plan: Plan, absent: DurableState,
                  read: Callable[[sqlite3.Connection, str, Plan], DurableState]) -> DurableState:
    """``read(connection, path, plan)`` on a guarded private copy of the store, in a confined child; ``absent``
    when it was not copied (nothing durable yet), the problems when it cannot be read. Never raises."""
    try:
        path = store_path(template, plan)
        main = read_store(folder, path)
        if main is None:
            return absent
        sides = {suffix: read_store(folder, path + suffix) for suffix in COPIED_SIDE_FILES}
        if len(main) + sum(len(side or b"") for side in sides.values()) > _store_file.STORE_LIMIT_BYTES:
            raise StoreUnreadable(f"{path} and its side files hold over {_store_file.STORE_LIMIT_BYTES} "
                                  "bytes; they were not read")
        journal = sides["-journal"]
        if journal is not None and (name := super_journal_name(journal)) is not None:
            raise StoreUnreadable(
                f"{path}-journal ends with a super-journal record naming {name[:120]!r}: playing it back would "
                "make SQLite open, read and delete that file, a name the workload wrote, so it was not played "
                "back, and whether its transaction committed (told by that file) is not known")
        key = _read_key(read, path, plan, main, sides)
        if (known := _CLEAN_READS.get(key)) is not None:
            return replace(known, records=dict(known.records))
        with private_folder() as private:
            copy = private / PRIVATE_NAME
            try:
                copy.write_bytes(main)
                for suffix, side in sides.items():
                    if side is not None:
                        Path(f"{copy}{suffix}").write_bytes(side)
            except OSError as error:
                raise StoreUnreadable(f"{path}: its private copy could not be written ({error})") from None
            hot = journal is not None and journal.startswith(JOURNAL_MAGIC)
            state = read_in_child(private, lambda: _read_copy(copy, path, plan, absent, read, hot=hot),
                                  absent.records_start)
    except StoreUnreadable as problem:
        return DurableState.unreadable(absent.records_start, *problem.args)
    if not state.problems:  # a read stopped at a limit may pass on a quieter machine: only clean ones are kept
        if len(_CLEAN_READS) >= _CLEAN_READS_KEPT:
            del _CLEAN_READS[next(iter(_CLEAN_READS))]  # the oldest
        _CLEAN_READS[key] = replace(state, records=dict(state.records))
    return state


def _read_key(read: Callable[..., DurableState], path: str, plan: Plan, main: bytes,
              sides: dict[str, bytes | None]) -> str:
    """What decides a read's result, hashed: the reader (its settings), the plan, the limits, the bytes."""
    digest = hashlib.sha256(repr((getattr(read, "__self__", read), read.__name__, path, plan.digest, QUERY_SECONDS,
                                  ROW_LIMIT, VALUE_LIMIT_BYTES, HEAP_LIMIT_BYTES)).encode())
    for data in (main, *sides.values()):
        digest.update(b"-" if data is None else len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def super_journal_name(journal: bytes) -> bytes | None:
    """The file a rollback journal's super-journal record names, or None when it ends with none.

    The record follows the journal's pages (sqlite's pager.c, writeSuperJournal):
    ``[name][4-byte big-endian length][4-byte checksum][JOURNAL_MAGIC]``. Any
    journal ending with the magic counts, whatever its length and checksum
    say: the bytes are the workload's, and refusing a malformed one is safe.
    """
    if len(journal) < 16 or journal[-8:] != JOURNAL_MAGIC:
        return None
    length = int.from_bytes(journal[-16:-12], "big")
    return journal[-16 - length:-16] if 0 < length <= len(journal) - 16 else b""


def _read_copy(copy: Path, path: str, plan: Plan, absent: DurableState,
               read: Callable[[sqlite3.Connection, str, Plan], DurableState], *, hot: bool) -> DurableState:
    """``read`` on the private ``copy`` (in the child); a ``hot`` journal SQLite rolled back is noted."""
    try:
        connection = sqlite3.connect(f"file:{copy}?mode=rw", uri=True, isolation_level=None)
    except sqlite3.Error as error:
        return DurableState.unreadable(absent.records_start, f"{path}: not a SQLite database SQLite can open ({error})")
    try:
        _guard(connection)
        state = read(connection, path, plan)
    except sqlite3.Error as error:
        return DurableState.unreadable(absent.records_start, f"{path}: {error}")
    except MemoryError:  # SQLite's heap limit (sqlite3 raises SQLITE_NOMEM as MemoryError)
        return DurableState.unreadable(absent.records_start, f"{path}: reading it took over the "
                                       f"{HEAP_LIMIT_BYTES >> 20} MiB of memory SQLite may use, and was stopped")
    except StoreUnreadable as problem:
        return DurableState.unreadable(absent.records_start, *problem.args)
    finally:
        connection.close()
    if hot and not Path(f"{copy}-journal").exists():
        state = replace(state, notes=state.notes + (
            f"{path}-journal was a hot rollback journal (a transaction the kill cut short): SQLite rolled it back "
            "in a private copy, so the store was read as it was before that transaction",))
    return state


class QueryStopped(InternalError, sqlite3.OperationalError):
    """A query stopped at one of the reader's limits; the message names the limit."""


def _guard(connection: sqlite3.Connection) -> None:
    connection.execute("PRAGMA trusted_schema = OFF")
    connection.execute("PRAGMA cell_size_check = ON")
    connection.execute("PRAGMA query_only = ON")
    connection.execute("PRAGMA temp_store = MEMORY")
    connection.execute(f"PRAGMA hard_heap_limit = {HEAP_LIMIT_BYTES}")
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, VALUE_LIMIT_BYTES)
    connection.set_authorizer(lambda action, *_: sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY)


def run_query(connection: sqlite3.Connection, sql: str, parameters: tuple[Any, ...] = ()) -> tuple[
        tuple[str, ...], list[tuple[Any, ...]]]:
    """The query's column names and rows; sqlite3.Error when it fails, or is stopped at a limit (named)."""
    deadline = time.monotonic() + QUERY_SECONDS
    connection.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_EVERY)
    rows: list[tuple[Any, ...]] = []
    size = 0
    try:
        cursor = connection.execute(sql, parameters)
        for row in cursor:  # one row at a time: a limit holds at the row that crosses it
            size += sum(len(value) for value in row if isinstance(value, str | bytes))
            if size > VALUE_LIMIT_BYTES:
                raise QueryStopped(f"the query returned over {VALUE_LIMIT_BYTES} bytes of text and "
                                               "blobs and was stopped; no honest plan records that much")
            if len(rows) == ROW_LIMIT:
                raise QueryStopped(f"the query returned over {ROW_LIMIT} rows and was stopped; "
                                               "no honest plan records that many")
            if time.monotonic() > deadline:
                raise QueryStopped(f"the query ran past {QUERY_SECONDS:g} s and was stopped")
            rows.append(row)
    except QueryStopped:
        raise
    except sqlite3.OperationalError:
        if time.monotonic() > deadline:  # the progress handler interrupted it
            raise QueryStopped(f"the query ran past {QUERY_SECONDS:g} s and was stopped") from None
        raise
    finally:
        connection.set_progress_handler(None, 0)
    return tuple(column[0] for column in cursor.description or ()), rows


def has_table(connection: sqlite3.Connection, name: str) -> bool:
    """Whether the schema holds a table or view ``name`` (a store whose writer never set up has none)."""
    return bool(run_query(connection, "SELECT 1 FROM sqlite_master WHERE name = ? AND type IN ('table', 'view')",
                          (name,))[1])
