"""Format ``sqlite``: a runtime's own journal in a SQLite table, read by the scenario's SELECT.

The query's result columns are named by ``journal.fields``; each row is one
record, in the order the query returns them (give an ORDER BY: a later row
updates its op). It runs on a guarded private copy (``_sqlite_copy``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from killpoint.harness.judge.stores._mapping import FieldMapping, MappedRecord, fold_mapped
from killpoint.harness.judge.stores._sqlite_copy import SIDE_FILES, read_database, run_query
from killpoint.harness.judge.stores._store_file import StoreUnreadable, store_files
from killpoint.harness.model import DurableState, Plan


@dataclass(frozen=True)
class SqliteQuery:
    path: str
    mapping: FieldMapping
    query: str
    name: str = "sqlite"

    def files(self, plan: Plan) -> tuple[str, ...]:
        return store_files(self.path, plan, SIDE_FILES)

    def read(self, folder: Path, plan: Plan) -> DurableState:
        return read_database(folder, self.path, plan, DurableState({}, self.mapping.records_start, None), self._read)

    def _read(self, connection: sqlite3.Connection, path: str, plan: Plan) -> DurableState:
        records = self._records(connection, path)
        if records is None:  # the runtime had not created its table yet: nothing durable
            return DurableState({}, self.mapping.records_start, None)
        return fold_mapped(records, self.mapping, plan)

    def _records(self, connection: sqlite3.Connection, path: str) -> list[MappedRecord] | None:
        try:
            columns, rows = run_query(connection, self.query)
        except sqlite3.Error as error:
            if "no such table" in str(error) and not run_query(connection, "SELECT 1 FROM sqlite_master")[1]:
                return None
            raise StoreUnreadable(f"{path}: journal.query failed: {error}") from None
        missing = [name for name in self.mapping.shown() if name not in columns]
        if missing:
            raise StoreUnreadable(f"{path}: journal.query returns no column {', '.join(map(repr, missing))} "
                                  f"that journal.fields names (it returns {', '.join(columns)}); "
                                  "name the columns with AS in the query, or fix journal.fields")
        return [MappedRecord(f"{path}: row {number}", {name: row[columns.index(name)] for name in self.mapping.shown()})
                for number, row in enumerate(rows, start=1)]
