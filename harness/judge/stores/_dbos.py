"""Formats ``dbos-sqlite`` and ``dbos-postgres``: the DBOS 3.4.0 system database on SQLite or PostgreSQL.

DBOS inserts one ``operation_outputs`` row when a step returns (or raises),
never before it runs: a row whose ``function_name`` is a planned call id (the
instrumentation registers each step as ``DBOS.step(name=call_id)``) means
SUCCEEDED when ``error IS NULL``, else FAILED; nothing is ever RUNNING, so
``records_start`` is False. ``completed``: every top-level workflow read has
``workflow_status`` SUCCESS or ERROR. The ``output``, ``error`` and ``inputs``
columns are pickles and are never decoded: only ``error IS NULL`` is asked.
On PostgreSQL the same tables are in the ``dbos`` schema, dumped at each kill
(``harness/databases/dump.py``) and read from the dump.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from killpoint import protocol
from killpoint.harness.judge.stores._sqlite_copy import SIDE_FILES, has_table, read_database, run_query
from killpoint.harness.judge.stores._database_dump import VALUE_CHARS, dumped_tables
from killpoint.harness.judge.stores._state import quote_columns
from killpoint.harness.judge.stores._store_file import StoreUnreadable, store_files
from killpoint.harness.judge.stores._table import with_task_id
from killpoint.harness.model import DumpQuery, DurableState, Plan, StepRecord

_ENDED = ("SUCCESS", "ERROR")
_STEPS = ("SELECT workflow_uuid, function_id, function_name, error IS NULL FROM operation_outputs "
          "WHERE (? IS NULL OR workflow_uuid = ?) ORDER BY workflow_uuid, function_id")
_WORKFLOWS = ("SELECT workflow_uuid, status FROM workflow_status WHERE (? IS NULL AND parent_workflow_id IS NULL) "
              "OR workflow_uuid = ?")


@dataclass(frozen=True)
class DbosSqlite:
    path: str = "dbos.sqlite"
    workflow: str | None = None  # the workflow id to read ({task_id} allowed); None: every workflow
    name: str = "dbos-sqlite"

    def files(self, plan: Plan) -> tuple[str, ...]:
        return store_files(self.path, plan, SIDE_FILES)

    def read(self, folder: Path, plan: Plan) -> DurableState:
        return read_database(folder, self.path, plan, DurableState({}, False, False), self._read)

    def _read(self, connection: sqlite3.Connection, path: str, plan: Plan) -> DurableState:
        if not has_table(connection, "operation_outputs"):
            return DurableState({}, False, False)  # DBOS had not set up its tables: nothing durable
        workflow = with_task_id(self.workflow, plan)
        return _state(run_query(connection, _STEPS, (workflow, workflow))[1],
                      run_query(connection, _WORKFLOWS, (workflow, workflow))[1], f"{path}: ", plan)


@dataclass(frozen=True)
class DbosPostgres:
    """The same system database on PostgreSQL (``schema``, ``dbos`` by default), read from its dump at a kill."""

    workflow: str | None = None
    schema: str = "dbos"
    name: str = "dbos-postgres"

    def files(self, plan: Plan) -> tuple[str, ...]:
        return ()  # nothing in the workload folder: the store is the database's, dumped

    def dump_queries(self, plan: Plan) -> tuple[DumpQuery, ...]:
        outputs, statuses = f"{self.schema}.operation_outputs", f"{self.schema}.workflow_status"
        workflow = {"workflow": with_task_id(self.workflow, plan)}
        return (
            DumpQuery("operation_outputs", (outputs,), (
                f"SELECT left(workflow_uuid, {VALUE_CHARS}) AS workflow_uuid, function_id, "
                f"left(function_name, {VALUE_CHARS}) AS function_name, error IS NULL AS succeeded FROM {outputs} "
                "WHERE (%(workflow)s::text IS NULL OR workflow_uuid = %(workflow)s) "
                "ORDER BY workflow_uuid, function_id"), workflow),
            DumpQuery("workflow_status", (statuses,), (
                f"SELECT left(workflow_uuid, {VALUE_CHARS}) AS workflow_uuid, left(status, {VALUE_CHARS}) AS status "
                f"FROM {statuses} WHERE "
                "(%(workflow)s::text IS NULL AND parent_workflow_id IS NULL) OR workflow_uuid = %(workflow)s "
                "ORDER BY workflow_uuid"), workflow))

    def read(self, folder: Path, plan: Plan) -> DurableState:
        try:
            dumped = dumped_tables(folder, {"operation_outputs": 4, "workflow_status": 2})
        except StoreUnreadable as problem:
            return DurableState.unreadable(False, *problem.args)
        if dumped is None:
            return DurableState({}, False, False)  # DBOS had not set up its tables: nothing durable
        steps, statuses = dumped
        return _state(steps, statuses, f"postgres {self.schema}.", plan)


def _state(steps: list[tuple[object, ...]], workflows: list[tuple[object, ...]], where: str,
           plan: Plan) -> DurableState:
    """The durable state of the rows of ``operation_outputs`` and ``workflow_status`` read (``where`` prefixes the
    table's name in each quote)."""
    records = {}
    for workflow_uuid, function_id, function_name, succeeded in steps:
        if isinstance(function_name, str) and plan.call(function_name) is not None:
            shown = quote_columns({"workflow_uuid": workflow_uuid, "function_id": function_id,
                                   "function_name": function_name})
            status, error = (protocol.SUCCEEDED, "NULL") if succeeded else (protocol.FAILED, "NOT NULL")
            records[function_name] = StepRecord(function_name, status,
                                                f"{where}operation_outputs({shown}, error IS {error})")
    statuses = [status for _, status in workflows]
    return DurableState(records, False, bool(statuses) and all(status in _ENDED for status in statuses))
