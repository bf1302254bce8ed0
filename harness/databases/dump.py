"""A database store's copy: the rows its reader asks for, dumped at a kill once the workload is confirmed dead.

The database was written by the process under test, so the dump trusts none of
it. First the killed workload's own sessions are let end (``Sessions``): a
backend finishes the statement it was running when its client died, so a
commit can land after the kill; the dump waits for them (``SESSIONS_S``), then
ends those still there, so it reads what the next incarnation will find and
nothing of the workload's moves under it. Then it connects as the harness's
reader (no superuser: it can read and nothing else, so whatever the workload
defined that a read might run can do no harm; past any row policy), in a
read-only transaction, with ``search_path`` set to ``pg_catalog`` (no function
or operator the workload defined is picked by name), a statement and a lock
timeout; it locks each table it reads (nothing alters it until the dump ends)
and reads it only after the catalogue says it is a plain table (a view, a
foreign table, anything that runs what the workload defined when read, is
refused) whose columns are all of built-in types (a type of the workload's
could bring an implicit cast of its own); each query is cut at ``ROW_LIMIT``
rows and ``BYTE_LIMIT`` bytes, counted as a server-side cursor hands them over
(past either, the store is unreadable, never judged on a part); the readers'
queries cut each text value themselves. And it
runs in a thread the harness waits on for ``ANSWER_S`` at most: a server the
workload stopped cannot hang the harness.

The rows go to ``DUMP_NAME`` in the copy folder: ``{"tables": {NAME: {"columns":
[...], "rows": [[...], ...]} or null}}`` (null: a table the framework had not
made yet, so nothing durable). The file is the evidence a finding quotes, and
the reader reads it, never the live database.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from killpoint.harness.judge.stores._database_dump import DUMP_NAME
from killpoint.harness.model import DumpQuery

ROW_LIMIT = 10_000
BYTE_LIMIT = 64 * 1024 * 1024  # of the rows' text, counted as they arrive
FETCH_ROWS = 500
CONNECT_S = 10
STATEMENT_MS = 5_000
ANSWER_S = 60.0
SESSIONS_S = 10.0
PLAIN_TABLES = ("r", "p")  # pg_class.relkind: an ordinary table, a partitioned one
FIRST_NORMAL_OID = 16384  # objects below it are PostgreSQL's own (built-in types)
INSTALL_HINT = "pip install 'killpoint[postgres]' (psycopg)"
# Set at every login, over whatever the workload could set for its database or role: no function of its picked by
# name, bounded statements and locks, and no timeout of its that would end the harness's own session.
_OPTIONS = (f"-c search_path=pg_catalog -c statement_timeout={STATEMENT_MS} -c lock_timeout={STATEMENT_MS} "
            "-c idle_session_timeout=0 -c idle_in_transaction_session_timeout=0 -c role=none")


@dataclass(frozen=True)
class Sessions:
    """The killed workload's sessions on the server, ended before a dump: its ``role``'s, seen and ended through
    the harness's superuser at ``admin_url``."""

    admin_url: str
    role: str


def dump_store(url: str, queries: tuple[DumpQuery, ...], copy: Path, *, sessions: Sessions | None = None) -> list[str]:
    """Dump ``queries``' rows from the database at ``url`` into ``copy``/DUMP_NAME, once ``sessions`` are over; the
    problems met (then no dump is written: a part of a store is never judged)."""
    answer: list[dict[str, Any] | list[str]] = []
    worker = threading.Thread(target=lambda: answer.append(_ended(sessions) or _ask(url, queries)), daemon=True,
                              name="killpoint-database-dump")
    worker.start()
    worker.join(ANSWER_S)
    if not answer:
        return [f"the database did not answer the store's dump within {ANSWER_S:.0f} s (a server stopped or "
                "starved); the store was not read"]
    tables = answer[0]
    if isinstance(tables, list):
        return tables
    (copy / DUMP_NAME).write_text(_shown(tables))
    return []


def _shown(tables: dict[str, Any]) -> str:
    """The dump as JSON a person reads: a table's columns on one line, then one line per row."""
    parts = []
    for name, table in tables.items():
        if table is None:
            parts.append(f" {json.dumps(name)}: null")
            continue
        rows = ",\n".join(f"   {json.dumps(row)}" for row in table["rows"])
        parts.append(f' {json.dumps(name)}: {{"columns": {json.dumps(table["columns"])}, "rows": [\n{rows}\n  ]}}')
    return '{"tables": {\n' + ",\n".join(parts) + "\n}}\n"


def _ended(sessions: Sessions | None) -> list[str]:
    """Wait up to SESSIONS_S for the workload's sessions to end on their own, then end the rest; the problems."""
    if sessions is None:
        return []
    try:
        import psycopg
    except ImportError:
        return [f"the store is in PostgreSQL, and reading it needs psycopg: {INSTALL_HINT}"]
    alive = ("SELECT pid FROM pg_catalog.pg_stat_activity WHERE usename = %(role)s AND pid <> "
             "pg_catalog.pg_backend_pid()")
    try:
        with psycopg.connect(sessions.admin_url, autocommit=True, connect_timeout=CONNECT_S,
                             options=_OPTIONS) as connection:
            deadline = time.monotonic() + SESSIONS_S
            while connection.execute(alive, {"role": sessions.role}).fetchall() and time.monotonic() < deadline:
                time.sleep(0.02)
            connection.execute(f"SELECT pg_catalog.pg_terminate_backend(pid, {STATEMENT_MS}) "
                               f"FROM ({alive}) AS workload_sessions", {"role": sessions.role})
    except psycopg.Error as error:
        return [f"the workload's sessions could not be ended before the dump: {str(error).strip()[:500]}"]
    return []


def _ask(url: str, queries: tuple[DumpQuery, ...]) -> dict[str, Any] | list[str]:
    """Every query's rows ({name: {"columns", "rows"} or None}), or the problems that left the dump incomplete."""
    try:
        import psycopg
    except ImportError:
        return [f"the store is in PostgreSQL, and reading it needs psycopg: {INSTALL_HINT}"]
    tables: dict[str, Any] = {}
    try:
        with psycopg.connect(url, connect_timeout=CONNECT_S,
                             options=f"{_OPTIONS} -c default_transaction_read_only=on") as connection:
            connection.read_only = True
            for query in queries:
                kinds = {table: kind for table in query.tables if (kind := _locked_kind(connection, table))}
                if len(kinds) < len(query.tables):
                    tables[query.name] = None  # the framework had not made its tables: nothing durable yet
                    continue
                wrong = [problem for table, kind in kinds.items() for problem in _refusals(connection, table, kind)]
                if wrong:
                    return wrong
                rows, columns, past = _rows(connection, query)
                if past is not None:
                    return [f"{query.name}: over {past}; no honest run of a plan records that much, so the store "
                            "was not read"]
                tables[query.name] = {"columns": columns, "rows": [list(row) for row in rows]}
    except psycopg.Error as error:
        return [f"the database could not be read: {str(error).strip()[:500]}"]
    return tables


def _rows(connection: Any, query: DumpQuery) -> tuple[list[list[Any]], list[str], str | None]:
    """The query's rows and columns, fetched from a server-side cursor a batch at a time (libpq would otherwise hold
    the whole result in memory before the first row is seen), and the bound they went past (None: within both)."""
    cursor = connection.cursor(name=f"killpoint_dump_{query.name}")
    cursor.execute(f"{query.sql} LIMIT {ROW_LIMIT + 1}", dict(query.params))
    rows: list[list[Any]] = []
    size = 0
    while batch := cursor.fetchmany(FETCH_ROWS):
        rows += (list(row) for row in batch)
        size += sum(len(repr(row)) for row in batch)
        if len(rows) > ROW_LIMIT:
            return rows, [], f"{ROW_LIMIT} rows"
        if size > BYTE_LIMIT:
            return rows, [], f"{BYTE_LIMIT} bytes"
    columns = [column.name for column in cursor.description or ()]
    cursor.close()
    return rows, columns, None


def _locked_kind(connection: Any, table: str) -> str | None:
    """``table``'s pg_class.relkind, a plain table's locked against change until the transaction ends (and asked
    again once locked); None when there is no such relation. (``table`` is a reader's schema-qualified name, its
    schema checked when the scenario loaded.)"""
    kind = _kind(connection, table)
    if kind not in PLAIN_TABLES:
        return kind
    connection.execute(f"LOCK TABLE {table} IN ACCESS SHARE MODE")
    return _kind(connection, table)


def _kind(connection: Any, table: str) -> str | None:
    row = connection.execute("SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = "
                             "pg_catalog.to_regclass(%(table)s)", {"table": table}).fetchone()
    return None if row is None else str(row[0])


def _refusals(connection: Any, table: str, kind: str) -> list[str]:
    """Why ``table`` is not read: not a plain table, or a column of a type the workload defined."""
    if kind not in PLAIN_TABLES:
        return [f"{table} is not a plain table (pg_class.relkind {kind!r}); it was not read, as reading it could "
                "run what the workload defined"]
    own_types = connection.execute(
        "SELECT a.attname, a.atttypid::pg_catalog.regtype::pg_catalog.text FROM pg_catalog.pg_attribute a WHERE "
        "a.attrelid = pg_catalog.to_regclass(%(table)s) AND a.attnum > 0 AND NOT a.attisdropped AND a.atttypid >= "
        f"{FIRST_NORMAL_OID}", {"table": table}).fetchall()
    return [f"{table}: column {name[:100]} is of a type the workload defined ({kind_name[:100]}); the table was not "
            "read, as reading it could run a cast of the workload's" for name, kind_name in own_types]
