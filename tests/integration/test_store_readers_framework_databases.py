"""The ``langgraph-sqlite`` and ``dbos-sqlite`` formats over hand-built databases with the frameworks' own
tables (SqliteSaver 3.1.2, DBOS 3.4.0): what each row shape means, and stores that are corrupt or hostile.
tests/integration/test_store_readers_frameworks.py reads the databases real runs of the frameworks leave."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from killpoint import protocol as p
from killpoint.harness.judge.stores import _langgraph, _sqlite_copy, framework_versions, journal_problems, reader_for
from tests.test_store_readers import PLAN, states

GRAPH = {"format": "langgraph-sqlite"}
FUNCTIONAL = {"format": "langgraph-sqlite", "steps": "order"}
DBOS = {"format": "dbos-sqlite"}
# SqliteSaver 3.1.2's writes table, as it creates it.
WRITES_TABLE = ("CREATE TABLE writes (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', "
                "checkpoint_id TEXT NOT NULL, task_id TEXT NOT NULL, idx INTEGER NOT NULL, channel TEXT NOT NULL, "
                "type TEXT, value BLOB, task_path TEXT NOT NULL DEFAULT '', "
                "PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx))")
# and its checkpoints table: a write counts only when the checkpoint it is pending on is saved.
CHECKPOINTS_TABLE = ("CREATE TABLE IF NOT EXISTS checkpoints (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL "
                     "DEFAULT '', checkpoint_id TEXT NOT NULL, parent_checkpoint_id TEXT, type TEXT, checkpoint BLOB, "
                     "metadata BLOB, PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id))")


def push(index: int) -> str:
    return f"~__pregel_push, ~__pregel_pull, workflow, {index:010d}, 0000000001"


def langgraph_db(folder: Path, *writes: tuple[str, int, str], thread: str = "task-1", ns: str = "") -> None:
    """A checkpoints.sqlite holding ``writes`` rows (task_path, idx, channel); the value blob is garbage on
    purpose: a reader that decoded it would fail."""
    connection = sqlite3.connect(folder / "checkpoints.sqlite")
    connection.execute(WRITES_TABLE.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
    connection.execute(CHECKPOINTS_TABLE)  # the checkpoint 'cp' the writes are pending on, its blob no checkpoint
    connection.execute("INSERT OR IGNORE INTO checkpoints VALUES (?, ?, 'cp', NULL, 'msgpack', x'c1', '{}')",
                       (thread, ns))
    connection.executemany("INSERT INTO writes VALUES (?, ?, 'cp', ?, ?, ?, 'msgpack', x'c1c1c1', ?)",
                           [(thread, ns, f"{task_path}-{idx}", idx, channel, task_path)
                            for task_path, idx, channel in writes])
    connection.commit()
    connection.close()


def test_a_nodes_writes_are_a_recorded_step_and_its_error_a_failed_one(tmp_path):
    langgraph_db(tmp_path, ("~__pregel_pull, __start__", 0, "branch:to:c1"), ("~__pregel_pull, c1", 0, "config"),
                 ("~__pregel_pull, c1", 1, "branch:to:c2"), ("~__pregel_pull, c2", -1, "__error__"),
                 ("~__pregel_pull, router", 0, "x"))
    state = reader_for(GRAPH).read(tmp_path, PLAN)
    assert states(state) == {"c1": p.SUCCEEDED, "c2": p.FAILED}
    assert not state.records_start and state.completed is None and not state.problems
    assert state.records["c1"].quote == ("checkpoints.sqlite: writes(rowid=2, thread_id='task-1', "
                                         "task_path='~__pregel_pull, c1', idx=0, channel='config')")
    assert reader_for(GRAPH).files(PLAN) == ("checkpoints.sqlite", "checkpoints.sqlite-wal", "checkpoints.sqlite-shm",
                                             "checkpoints.sqlite-journal")


def test_a_node_that_wrote_nothing_is_recorded_and_an_interrupt_or_schedule_is_no_return(tmp_path):
    langgraph_db(tmp_path, ("~__pregel_pull, c1", 0, "__no_writes__"), ("~__pregel_pull, c2", -3, "__interrupt__"),
                 ("~__pregel_pull, c3", -2, "__scheduled__"))
    assert states(reader_for(GRAPH).read(tmp_path, PLAN)) == {"c1": p.SUCCEEDED}


def test_a_step_rerun_after_its_error_is_succeeded_whatever_the_row_order(tmp_path):
    langgraph_db(tmp_path, ("~__pregel_pull, c2", 0, "order"), ("~__pregel_pull, c2", -1, "__error__"))
    assert states(reader_for(GRAPH).read(tmp_path, PLAN)) == {"c2": p.SUCCEEDED}


def test_functional_tasks_are_planned_calls_by_order_and_the_end_completes(tmp_path):
    langgraph_db(tmp_path, (push(0), 0, "__return__"), (push(1), -1, "__error__"), (push(7), 0, "__return__"),
                 ("~__pregel_pull, c3", 0, "__return__"))
    state = reader_for(FUNCTIONAL).read(tmp_path, PLAN)
    assert states(state) == {"c1": p.SUCCEEDED, "c2": p.FAILED} and state.completed is None
    langgraph_db(tmp_path, ("~__pregel_pull, workflow", 0, "__end__"))
    assert reader_for(FUNCTIONAL).read(tmp_path, PLAN).completed is True


def test_subgraph_rows_and_other_threads_are_not_the_plans(tmp_path):
    langgraph_db(tmp_path, ("~__pregel_pull, c1", 0, "x"), ns="c2:abc")
    langgraph_db(tmp_path, ("~__pregel_pull, c2", 0, "x"), thread="task-2")
    assert states(reader_for(GRAPH).read(tmp_path, PLAN)) == {"c2": p.SUCCEEDED}
    assert states(reader_for(dict(GRAPH, thread="{task_id}")).read(tmp_path, PLAN)) == {}


def test_a_saver_that_set_up_nothing_yet_holds_no_record(tmp_path):
    sqlite3.connect(tmp_path / "checkpoints.sqlite").close()
    for table in (GRAPH, DBOS | {"path": "checkpoints.sqlite"}):
        state = reader_for(table).read(tmp_path, PLAN)
        assert state.records == {} and not state.problems


def dbos_db(folder: Path, steps: list[tuple[str, int, str | None, str | None]],
            workflows: list[tuple[str, str, str | None]]) -> None:
    """A dbos.sqlite with operation_outputs (workflow, function_id, function_name, error) and workflow_status
    (workflow, status, parent) rows; output and error are not pickles on purpose."""
    connection = sqlite3.connect(folder / "dbos.sqlite")
    connection.execute("CREATE TABLE operation_outputs (workflow_uuid TEXT, function_id INTEGER, function_name TEXT, "
                       "output TEXT, error TEXT, child_workflow_id TEXT, started_at_epoch_ms BIGINT, "
                       "completed_at_epoch_ms BIGINT, PRIMARY KEY (workflow_uuid, function_id))")
    connection.execute("CREATE TABLE workflow_status (workflow_uuid TEXT PRIMARY KEY, status TEXT, name TEXT, "
                       "output TEXT, error TEXT, parent_workflow_id TEXT)")
    connection.executemany("INSERT INTO operation_outputs VALUES (?, ?, ?, 'not a pickle', ?, NULL, 1, 2)", steps)
    connection.executemany("INSERT INTO workflow_status VALUES (?, ?, 'task', NULL, NULL, ?)", workflows)
    connection.commit()
    connection.close()


def test_dbos_step_rows_by_call_id_and_the_workflow_status(tmp_path):
    dbos_db(tmp_path, [("task-1", 1, "c1", None), ("task-1", 2, "c2", "gASV..."), ("task-1", 3, "DBOS.sleep", None)],
            [("task-1", "PENDING", None)])
    state = reader_for(DBOS).read(tmp_path, PLAN)
    assert states(state) == {"c1": p.SUCCEEDED, "c2": p.FAILED}
    assert not state.records_start and state.completed is False and not state.problems
    assert state.records["c2"].quote == ("dbos.sqlite: operation_outputs(workflow_uuid='task-1', function_id=2, "
                                         "function_name='c2', error IS NOT NULL)")
    assert reader_for(DBOS).files(PLAN) == ("dbos.sqlite", "dbos.sqlite-wal", "dbos.sqlite-shm", "dbos.sqlite-journal")


@pytest.mark.parametrize("workflows, completed", [
    ([("task-1", "SUCCESS", None)], True), ([("task-1", "ERROR", None)], True),
    ([("task-1", "SUCCESS", None), ("child", "PENDING", "task-1")], True),
    ([("task-1", "SUCCESS", None), ("other", "ENQUEUED", None)], False), ([], False),
])
def test_dbos_completed_when_every_top_level_workflow_ended(tmp_path, workflows, completed):
    dbos_db(tmp_path, [], workflows)
    assert reader_for(DBOS).read(tmp_path, PLAN).completed is completed


def test_dbos_workflow_option_reads_one_workflow(tmp_path):
    dbos_db(tmp_path, [("task-1", 1, "c1", None), ("task-2", 1, "c2", None)],
            [("task-1", "SUCCESS", None), ("task-2", "PENDING", None)])
    state = reader_for(dict(DBOS, workflow="{task_id}")).read(tmp_path, PLAN)
    assert states(state) == {"c1": p.SUCCEEDED} and state.completed is True


@pytest.mark.parametrize("table", [GRAPH, DBOS])
def test_corrupt_and_hostile_framework_databases_are_problems(tmp_path, monkeypatch, table):
    monkeypatch.setattr(_sqlite_copy, "QUERY_SECONDS", 1.0)
    db = tmp_path / reader_for(table).files(PLAN)[0]
    db.write_bytes(b"SQLite format 3\0" + b"\x07" * 4000)
    assert reader_for(table).read(tmp_path, PLAN).problems[0].startswith(f"{db.name}: ")
    db.unlink()
    connection = sqlite3.connect(db)  # the table the reader reads is a view that never ends
    endless = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT "
    if table is GRAPH:
        connection.execute(CHECKPOINTS_TABLE)
        connection.execute(f"CREATE VIEW writes AS {endless} 't' AS thread_id, '' AS checkpoint_ns, "
                           "'cp' AS checkpoint_id, '~__pregel_pull, c1' AS task_path, 0 AS idx, 'x' AS channel FROM n WHERE x < 0")
    else:
        connection.execute(f"CREATE VIEW operation_outputs AS {endless} 'task-1' AS workflow_uuid, x AS function_id, "
                           "'c1' AS function_name, NULL AS error FROM n WHERE x < 0")
    connection.close()
    state = reader_for(table).read(tmp_path, PLAN)
    assert state.records == {} and "the query ran past 1 s" in state.problems[0]


def test_a_langgraph_table_of_other_columns_is_a_problem(tmp_path):
    connection = sqlite3.connect(tmp_path / "checkpoints.sqlite")
    connection.execute("CREATE TABLE writes (thread_id TEXT, channel TEXT)")
    connection.execute(CHECKPOINTS_TABLE)
    connection.close()
    assert reader_for(GRAPH).read(tmp_path, PLAN).problems == ("checkpoints.sqlite: no such column: task_path",)


def test_framework_versions_name_the_installed_framework_and_nothing_for_mapped_formats():
    versions = framework_versions(GRAPH["format"])
    assert set(versions) == {"langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite"}
    assert versions["langgraph-checkpoint-sqlite"] == "3.1.2" and framework_versions(DBOS["format"]) == {"dbos": "3.4.0"}
    assert framework_versions("json") == {} and framework_versions("killpoint") == {}


def test_framework_tables_take_their_keys_and_defaults():
    assert journal_problems(dict(FUNCTIONAL, path="state/{task_id}.sqlite", thread="{task_id}"), "s.toml") == []
    assert journal_problems(dict(DBOS, workflow="{task_id}"), "s.toml") == []
    assert journal_problems(dict(DBOS, steps="order"), "s.toml") == [
        "s.toml: journal.steps: unknown key 'steps' for format 'dbos-sqlite'; it takes path, workflow"]


def test_a_harness_without_langgraphs_msgpack_library_says_so_instead_of_crashing(tmp_path, monkeypatch):
    langgraph_db(tmp_path, ("~__pregel_pull, c1", 0, "c1"))
    monkeypatch.setitem(sys.modules, "ormsgpack", None)  # what a harness installed without killpoint[langgraph] has
    monkeypatch.setattr(_sqlite_copy, "_CLEAN_READS", {})  # what earlier tests read
    _langgraph.msgpack_module.cache_clear()
    try:
        state = reader_for(GRAPH).read(tmp_path, PLAN)
    finally:
        _langgraph.msgpack_module.cache_clear()
    assert state.records == {} and "pip install 'killpoint[langgraph]'" in state.problems[0]
