"""Store readers over hand-built files: killpoint's journal, a JSON document, JSON lines.

Each format: a well-formed store read to the states it holds, a torn or
corrupt one turned into problems (never an exception), a hostile one refused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from killpoint import protocol as p
from killpoint.harness.judge.stores import DurableState, _store_file, journal_problems, reader_for
from killpoint.harness.model import Plan, PlannedCall

PLAN = Plan("task-1", (PlannedCall("c1", "read_config"), PlannedCall("c2", "charge_card"),
                       PlannedCall("c3", "send_email")))
# The reference agent's store, mapped exactly (docs/journal-mapping.md).
REFERENCE = {"format": "json", "path": "tasks/{task_id}.json", "records": "operations",
             "fields": {"op": "operationId", "call": "llmCallId", "status": "status", "class": "idempotency"},
             "status": {"RUNNING": ["RUNNING"], "SUCCEEDED": ["SUCCEEDED"], "FAILED": ["FAILED"]}}


def lines(*records: dict) -> bytes:
    return b"".join(json.dumps(record).encode() + b"\n" for record in records)


def states(state: DurableState) -> dict[str, str]:
    return {call: record.status for call, record in state.records.items()}


def operation(op: str, call: str, status: str, tool_class: str = "NON_IDEMPOTENT") -> dict:
    return {"operationId": op, "llmCallId": call, "toolName": "t", "status": status, "idempotency": tool_class}


def write_reference(folder: Path, *operations: dict) -> Path:
    path = folder / "tasks" / "task-1.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"taskId": "task-1", "operations": list(operations)}))
    return path


# --- format killpoint -------------------------------------------------------------------------------

KILLPOINT = {"format": "killpoint"}
STARTED = [{"kind": "started", "op": f"op{n}", "call": f"c{n}", "tool": "t", "class": "READ_ONLY"} for n in (1, 2, 3)]


def test_killpoint_journal_folds_started_and_finished_and_ignores_decisions(tmp_path):
    (tmp_path / "journal.jsonl").write_bytes(lines(
        STARTED[0], {"kind": "finished", "op": "op1", "status": "SUCCEEDED"}, STARTED[1],
        {"kind": "decision", "call": "c2", "op": "op2", "found": "UNKNOWN", "action": "RETRY"},
        {"kind": "finished", "op": "op2", "status": "FAILED"}, STARTED[2]))
    state = reader_for(KILLPOINT).read(tmp_path, PLAN)
    assert states(state) == {"c1": p.SUCCEEDED, "c2": p.FAILED, "c3": p.RUNNING}
    assert state.records_start and state.completed is False and not state.problems
    assert state.records["c2"].quote == 'journal.jsonl:5: {"kind": "finished", "op": "op2", "status": "FAILED"}'
    assert state.records["c3"].quote.startswith("journal.jsonl:6: ")


def test_killpoint_journal_completed_by_the_task_record_and_a_restart_is_running_again(tmp_path):
    (tmp_path / "journal.jsonl").write_bytes(lines(
        STARTED[0], {"kind": "finished", "op": "op1", "status": "SUCCEEDED"}, STARTED[1],
        {"kind": "finished", "op": "op2", "status": "FAILED"}, STARTED[1], {"kind": "task", "status": "COMPLETED"}))
    state = reader_for(KILLPOINT).read(tmp_path, PLAN)
    assert states(state) == {"c1": p.SUCCEEDED, "c2": p.RUNNING}
    assert state.records["c2"].quote.startswith("journal.jsonl:5: ")
    assert state.completed is True


def test_killpoint_journal_torn_tail_is_not_trusted_and_a_corrupt_line_is_a_problem(tmp_path):
    journal = tmp_path / "journal.jsonl"
    journal.write_bytes(lines(STARTED[0]) + b'{"kind": "finished", "op": "op1", "sta')
    state = reader_for(KILLPOINT).read(tmp_path, PLAN)
    assert states(state) == {"c1": p.RUNNING} and not state.problems
    journal.write_bytes(lines(STARTED[0]) + b"not json\n" + lines({"kind": "started", "op": ["x"], "call": "c2"}))
    state = reader_for(KILLPOINT).read(tmp_path, PLAN)
    assert state.records == {} and state.completed is None
    assert [problem.split(":")[:2] for problem in state.problems] == [["journal.jsonl", "2"], ["journal.jsonl", "3"]]


def test_a_missing_store_holds_no_record_and_is_no_problem(tmp_path):
    for table in (KILLPOINT, REFERENCE):
        state = reader_for(table).read(tmp_path, PLAN)
        assert state.records == {} and not state.problems


# --- format json: the reference agent's store -------------------------------------------------------

def test_reference_agents_store_read_exactly(tmp_path):
    write_reference(tmp_path, operation("o1", "c1", "SUCCEEDED", "READ_ONLY"), operation("o2", "c2", "FAILED"),
                    operation("o3", "c3", "RUNNING"))
    reader = reader_for(REFERENCE)
    assert reader.files(PLAN) == ("tasks/task-1.json",)
    state = reader.read(tmp_path, PLAN)
    assert states(state) == {"c1": p.SUCCEEDED, "c2": p.FAILED, "c3": p.RUNNING}
    assert state.records_start and state.completed is None and not state.problems
    assert state.records["c2"].quote == ("tasks/task-1.json: operations[1] {operationId='o2', llmCallId='c2', "
                                         "status='FAILED', idempotency='NON_IDEMPOTENT'}")


def test_a_call_with_several_ops_takes_its_last_ops_state(tmp_path):
    write_reference(tmp_path, operation("o1", "c1", "SUCCEEDED"), operation("o2a", "c2", "FAILED"),
                    operation("o2b", "c2", "RUNNING"), operation("o9", "c9", "SUCCEEDED"))
    state = reader_for(REFERENCE).read(tmp_path, PLAN)
    assert states(state) == {"c1": p.SUCCEEDED, "c2": p.RUNNING}  # c9 is no planned call
    assert "o2b" in state.records["c2"].quote


def test_records_start_only_when_running_is_mapped(tmp_path):
    table = dict(REFERENCE, status={"SUCCEEDED": ["done"], "FAILED": ["error"]})
    write_reference(tmp_path, operation("o1", "c1", "done"))
    state = reader_for(table).read(tmp_path, PLAN)
    assert states(state) == {"c1": p.SUCCEEDED} and state.records_start is False


def test_a_status_the_table_does_not_map_is_a_problem_naming_the_record(tmp_path):
    write_reference(tmp_path, operation("o1", "c1", "SUCCEEDED"), operation("o2", "c2", "PAUSED"))
    state = reader_for(REFERENCE).read(tmp_path, PLAN)
    assert state.records == {}
    assert state.problems == (("tasks/task-1.json: operations[1]: status 'PAUSED' is not in the journal.status "
                              "table ('RUNNING', 'SUCCEEDED', 'FAILED'); map it, or fix the record"),)


@pytest.mark.parametrize("content, problem", [
    (b'{"operations": [', "tasks/task-1.json: not a JSON document"),
    (b"\xff\xfe", "tasks/task-1.json: not a JSON document"),
    (b'{"operations": {"o1": 1}}', "tasks/task-1.json: operations is dict, not an array"),
    (b'{"operations": [1]}', "tasks/task-1.json: operations[0] is int, not a record"),
    (b'{"operations": [{"llmCallId": ["c1"], "status": "RUNNING", "operationId": "o"}]}',
     "tasks/task-1.json: operations[0]: llmCallId is ['c1'], not a call id"),
    (b'[' * 100_000, "tasks/task-1.json: not a JSON document"),
])
def test_a_corrupt_document_is_a_problem_never_an_exception(tmp_path, content, problem):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "task-1.json").write_bytes(content)
    state = reader_for(REFERENCE).read(tmp_path, PLAN)
    assert state.records == {} and len(state.problems) == 1 and state.problems[0].startswith(problem)


def test_nested_records_and_fields_by_dotted_key(tmp_path):
    table = dict(REFERENCE, path="state.json", records="task.ops",
                 fields={"call": "meta.call", "status": "state"})
    (tmp_path / "state.json").write_text(json.dumps({"task": {"ops": [
        {"meta": {"call": "c1"}, "state": "SUCCEEDED"}, {"meta": {"call": "c2"}, "state": "RUNNING"}]}}))
    assert states(reader_for(table).read(tmp_path, PLAN)) == {"c1": p.SUCCEEDED, "c2": p.RUNNING}


def test_hostile_stores_are_refused(tmp_path, monkeypatch):
    (tmp_path / "tasks").mkdir()
    target = tmp_path / "tasks" / "task-1.json"
    target.symlink_to("/etc/passwd")
    assert "is a symlink" in reader_for(REFERENCE).read(tmp_path, PLAN).problems[0]
    target.unlink()
    os.mkfifo(target)
    assert "FIFO" in reader_for(REFERENCE).read(tmp_path, PLAN).problems[0]
    target.unlink()
    with open(target, "wb") as huge:  # sparse: a terabyte claimed, nothing written
        huge.truncate(1 << 40)
    assert "over the" in reader_for(REFERENCE).read(tmp_path, PLAN).problems[0]


def test_a_task_id_that_leaves_the_folder_names_no_file(tmp_path):
    plan = Plan("../../etc/passwd", PLAN.calls)
    reader = reader_for(REFERENCE)
    assert reader.files(plan) == ()
    assert "names no file inside the workload folder" in reader.read(tmp_path, plan).problems[0]


# --- format jsonl ----------------------------------------------------------------------------------

JSONL = {"format": "jsonl", "path": "ops.jsonl", "fields": {"op": "id", "call": "call", "status": "st"},
         "status": {"RUNNING": ["begin"], "SUCCEEDED": ["ok"], "FAILED": ["err"]}}


def test_jsonl_later_lines_update_their_op_and_a_torn_tail_is_not_trusted(tmp_path):
    (tmp_path / "ops.jsonl").write_bytes(lines(
        {"id": 1, "call": "c1", "st": "begin"}, {"id": 1, "call": "c1", "st": "ok"},
        {"id": 2, "call": "c2", "st": "begin"}) + b'{"id": 2, "call": "c2", "st": "o')
    state = reader_for(JSONL).read(tmp_path, PLAN)
    assert states(state) == {"c1": p.SUCCEEDED, "c2": p.RUNNING} and not state.problems
    assert state.records["c1"].quote == "ops.jsonl:2 {id=1, call='c1', st='ok'}"


def test_jsonl_without_op_field_keys_ops_by_call(tmp_path):
    table = dict(JSONL, fields={"call": "call", "status": "st"})
    (tmp_path / "ops.jsonl").write_bytes(lines({"call": "c2", "st": "begin"}, {"call": "c2", "st": "err"}))
    assert states(reader_for(table).read(tmp_path, PLAN)) == {"c2": p.FAILED}


def test_jsonl_corrupt_lines_are_all_problems(tmp_path):
    (tmp_path / "ops.jsonl").write_bytes(b"[1]\n" + lines({"id": 1, "call": "c1", "st": "ok"}) + b"\xff\n")
    state = reader_for(JSONL).read(tmp_path, PLAN)
    assert state.records == {}
    assert [problem.split(": ")[:2] for problem in state.problems] == [["ops.jsonl:1", "not a JSON object"],
                                                                       ["ops.jsonl:3", "not UTF-8"]]


def test_store_limit_bounds_what_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(_store_file, "STORE_LIMIT_BYTES", 100)
    (tmp_path / "ops.jsonl").write_bytes(lines(*({"id": n, "call": "c1", "st": "ok"} for n in range(10))))
    assert "over the 100-byte limit" in reader_for(JSONL).read(tmp_path, PLAN).problems[0]


# --- the [journal] table ---------------------------------------------------------------------------

def test_the_reference_table_and_the_killpoint_table_have_no_problem():
    assert journal_problems(REFERENCE, "s.toml") == [] and journal_problems(KILLPOINT, "s.toml") == []
    assert journal_problems({"format": "sqlite", "path": "j.db", "query": "  with x as (select 1) select * from x",
                             "fields": {"call": "c", "status": "s"}, "status": {"SUCCEEDED": ["ok"]}}, "s.toml") == []


FORMATS = "killpoint, json, jsonl, sqlite, langgraph-sqlite, dbos-sqlite, langgraph-postgres, dbos-postgres"


@pytest.mark.parametrize("table, problems", [
    ("killpoint", ["s.toml: journal: must be a table (format = ..., path = ...), not str"]),
    ({"format": "langgraph"}, [("s.toml: journal.format: unknown format 'langgraph' (did you mean 'langgraph-sqlite'?); "
                               f"give one of {FORMATS}")]),
    ({}, [f"s.toml: journal.format: no format given; give one of {FORMATS}"]),
    ({"format": "killpoint", "path": "/var/journal.jsonl"},
     ["s.toml: journal.path: '/var/journal.jsonl' is absolute; give a path relative to the workload folder, inside it"]),
    ({"format": "killpoint", "path": "a/../../j"},
     ["s.toml: journal.path: 'a/../../j' climbs out with '..'; give a path relative to the workload folder, inside it"]),
    ({"format": "killpoint", "path": "{run}/j", "stepz": "order"},
     ["s.toml: journal.stepz: unknown key 'stepz' for format 'killpoint'; it takes path",
      "s.toml: journal.path: {run} is not a placeholder; only {task_id} (the plan's task_id) is"]),
    ({"format": "langgraph-sqlite", "steps": "index"}, ["s.toml: journal.steps: 'index' is not one of 'name', 'order'"]),
    ({"format": "dbos-sqlite", "workflow": "{plan}-1"},
     ["s.toml: journal.workflow: {plan} is not a placeholder; only {task_id} (the plan's task_id) is"]),
    ({"format": "sqlite", "path": "j.db", "query": "DELETE FROM ops", "fields": {"op": "id"},
      "status": {"DONE": ["x"], "SUCCEEDED": ["x"]}},
     ["s.toml: journal.fields: missing 'call'; name the record's key (or column) holding the call",
      "s.toml: journal.fields: missing 'status'; name the record's key (or column) holding the status",
      "s.toml: journal.status: 'DONE' is not a status killpoint reads; the keys are RUNNING, SUCCEEDED, FAILED",
      "s.toml: journal.status: 'x' is mapped to both DONE and SUCCEEDED; map it to one",
      "s.toml: journal.query: 'DELETE FROM ops' is not a SELECT; the store is only ever read: give one SELECT statement"]),
    ({"format": "jsonl", "path": "j", "fields": {"call": "c", "status": "s", "klass": "k"}, "status": {"FAILED": []}},
     ["s.toml: journal.fields: unknown field 'klass'; the fields are op, call, status, class",
      "s.toml: journal.status: missing SUCCEEDED; name the runtime's value(s) for a step that completed",
      "s.toml: journal.status: FAILED: must be a non-empty list of the runtime's status strings, not []"]),
    ({"format": "json", "path": "j.json", "query": "SELECT 1"},
     ["s.toml: journal.query: unknown key 'query' for format 'json'; it takes path, fields, status, records",
      "s.toml: journal.fields: missing; format 'json' needs it (see docs/journal-mapping.md)",
      "s.toml: journal.status: missing; format 'json' needs it (see docs/journal-mapping.md)"]),
])
def test_journal_problems_names_every_problem_with_its_key_and_fix(table, problems):
    assert journal_problems(table, "s.toml") == problems


def test_a_path_spelt_with_a_leading_dot_names_the_same_file():
    # The harness finds killpoint's own journal among a store's files by its name (to keep its torn copy).
    assert reader_for({"format": "killpoint", "path": "./journal.jsonl"}).files(PLAN) == ("journal.jsonl",)
