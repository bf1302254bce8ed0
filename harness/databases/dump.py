"""A database store's copy: the rows its reader asks for, dumped at a kill once the workload is confirmed dead.

The database was written by the process under test, so the dump trusts none of
it. It connects as the harness's own role (a superuser, so no row-level policy
of the workload's applies), in a read-only transaction, with ``search_path``
set to ``pg_catalog`` (no function or operator the workload defined is picked
by name), a statement timeout and a lock timeout; it reads a table only after
the catalogue says it is a plain table (a view, a foreign table, anything that
could run what the workload defined when read, is refused); each query is cut
at ``ROW_LIMIT`` rows (one more means the store is past the bound, and it is
unreadable, never judged on a part); the readers' queries cut each text value
themselves. And it runs in a thread the harness waits on for ``ANSWER_S`` at
most: a server the workload stopped cannot hang the harness.

The rows go to ``DUMP_NAME`` in the copy folder: ``{"tables": {NAME: {"columns":
[...], "rows": [[...], ...]} or null}}`` (null: a table the framework had not
made yet, so nothing durable). The file is the evidence a finding quotes, and
the reader reads it, never the live database.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from killpoint.harness.judge.stores._database_dump import DUMP_NAME
from killpoint.harness.model import DumpQuery

ROW_LIMIT = 10_000
CONNECT_S = 10
STATEMENT_MS = 5_000
ANSWER_S = 60.0
PLAIN_TABLES = ("r", "p")  # pg_class.relkind: an ordinary table, a partitioned one
INSTALL_HINT = "pip install 'killpoint[postgres]' (psycopg)"


def dump_store(url: str, queries: tuple[DumpQuery, ...], copy: Path) -> list[str]:
    """Dump ``queries``' rows from the database at ``url`` into ``copy``/DUMP_NAME; the problems met (then no
    dump is written: a part of a store is never judged)."""
    answer: list[dict[str, Any] | list[str]] = []
    worker = threading.Thread(target=lambda: answer.append(_ask(url, queries)), daemon=True,
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


def _ask(url: str, queries: tuple[DumpQuery, ...]) -> dict[str, Any] | list[str]:
    """Every query's rows ({name: {"columns", "rows"} or None}), or the problems that left the dump incomplete."""
    try:
        import psycopg
    except ImportError:
        return [f"the store is in PostgreSQL, and reading it needs psycopg: {INSTALL_HINT}"]
    tables: dict[str, Any] = {}
    try:
        with psycopg.connect(url, connect_timeout=CONNECT_S, options=(
                f"-c search_path=pg_catalog -c statement_timeout={STATEMENT_MS} -c lock_timeout={STATEMENT_MS} "
                "-c default_transaction_read_only=on")) as connection:
            connection.read_only = True
            for query in queries:
                kinds = [_kind(connection, table) for table in query.tables]
                if None in kinds:
                    tables[query.name] = None  # the framework had not made its tables: nothing durable yet
                    continue
                wrong = [f"{table} is not a plain table (pg_class.relkind {kind!r}); it was not read, as reading "
                         "it could run what the workload defined" for table, kind in zip(query.tables, kinds)
                         if kind not in PLAIN_TABLES]
                if wrong:
                    return wrong
                cursor = connection.execute(f"{query.sql} LIMIT {ROW_LIMIT + 1}", dict(query.params))
                rows = cursor.fetchall()
                if len(rows) > ROW_LIMIT:
                    return [f"{query.name}: over {ROW_LIMIT} rows; no honest run of a plan records that many, so "
                            "the store was not read"]
                columns = [column.name for column in cursor.description or ()]
                tables[query.name] = {"columns": columns, "rows": [list(row) for row in rows]}
    except psycopg.Error as error:
        return [f"the database could not be read: {str(error).strip()[:500]}"]
    return tables


def _kind(connection: Any, table: str) -> str | None:
    """``table``'s pg_class.relkind, or None when there is no such relation."""
    row = connection.execute("SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = "
                             "pg_catalog.to_regclass(%(table)s)", {"table": table}).fetchone()
    return None if row is None else str(row[0])
