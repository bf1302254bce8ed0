"""Format ``dbos-sqlite``: the DBOS 3.4.0 system database on SQLite.

DBOS inserts one ``operation_outputs`` row when a step returns (or raises),
never before it runs: a row whose ``function_name`` is a planned call id (the
instrumentation registers each step as ``DBOS.step(name=call_id)``) means
SUCCEEDED when ``error IS NULL``, else FAILED; nothing is ever RUNNING, so
``records_start`` is False. ``completed``: every top-level workflow read has
``workflow_status`` SUCCESS or ERROR. The ``output``, ``error`` and ``inputs``
columns are pickles and are never decoded: only ``error IS NULL`` is asked.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from killpoint import protocol
from killpoint.harness.judge.stores._sqlite_copy import SIDE_FILES, has_table, read_database, run_query
from killpoint.harness.judge.stores._state import quote_columns
from killpoint.harness.judge.stores._store_file import store_files
from killpoint.harness.judge.stores._table import TASK_ID
from killpoint.harness.model import DurableState, Plan, StepRecord

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
        workflow = self.workflow.replace(TASK_ID, plan.task_id) if self.workflow else None
        steps = run_query(connection, _STEPS, (workflow, workflow))[1]
        statuses = [status for _, status in run_query(connection, _WORKFLOWS, (workflow, workflow))[1]]
        records = {}
        for workflow_uuid, function_id, function_name, succeeded in steps:
            if isinstance(function_name, str) and plan.call(function_name) is not None:
                shown = quote_columns({"workflow_uuid": workflow_uuid, "function_id": function_id,
                                       "function_name": function_name})
                status, error = (protocol.SUCCEEDED, "NULL") if succeeded else (protocol.FAILED, "NOT NULL")
                records[function_name] = StepRecord(function_name, status,
                                                    f"{path}: operation_outputs({shown}, error IS {error})")
        return DurableState(records, False, bool(statuses) and all(status in _ENDED for status in statuses))
