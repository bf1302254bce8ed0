"""The framework readers over databases that real LangGraph and DBOS runs leave, killed for real.

Each test runs a small workflow of three steps named by the plan's call ids in
a subprocess; a step may end its own process with SIGKILL as it starts (the
non-pausing kill: no other thread gets extra time) or raise. The store is
copied as the harness copies it (``reader.files(plan)``, byte for byte), read,
and the states must be what ran: every step that returned before the kill is
recorded, the killed one and those after it are not.
"""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from killpoint import protocol as p
from killpoint.harness.judge.stores import DurableState, StoreReader, reader_for
from tests.test_store_readers import PLAN, states

pytest.importorskip("langgraph.checkpoint.sqlite")
pytest.importorskip("dbos")

DEADLINE_S = 120.0
# What every workflow shares: each step logs that it ran, and a step named by argv[2] kills its own process
# group with SIGKILL as it begins (argv[3] = "kill"), or raises (argv[3] = "raise").
STEP = '''
import os, signal, sys
def step_body(call):
    if sys.argv[2] == call and sys.argv[3] == "kill":
        os.killpg(os.getpgrp(), signal.SIGKILL)
    with open("ran.log", "a") as log:
        log.write(call + "\\n")
    if sys.argv[2] == call and sys.argv[3] == "raise":
        raise RuntimeError("card declined")
    return call
'''
STATE_GRAPH = STEP + '''
import sqlite3
from typing import TypedDict
from langgraph.graph import StateGraph, START, END
from langgraph.checkpoint.sqlite import SqliteSaver

class State(TypedDict, total=False):
    done: list

graph = StateGraph(State)
for call in ("c1", "c2", "c3"):
    graph.add_node(call, lambda state, call=call: {"done": state.get("done", []) + [step_body(call)]})
graph.add_edge(START, "c1"); graph.add_edge("c1", "c2"); graph.add_edge("c2", "c3"); graph.add_edge("c3", END)
app = graph.compile(checkpointer=SqliteSaver(sqlite3.connect("checkpoints.sqlite", check_same_thread=False)))
config = {"configurable": {"thread_id": sys.argv[1]}}
app.invoke(None if app.get_state(config).metadata is not None else {}, config, durability="sync")  # resume if saved
'''
FUNCTIONAL = STEP + '''
import sqlite3
from langgraph.func import entrypoint, task
from langgraph.checkpoint.sqlite import SqliteSaver

@task
def read_config(): return step_body("c1")
@task
def charge_card(v): return step_body("c2")
@task
def send_email(v): return step_body("c3")

@entrypoint(checkpointer=SqliteSaver(sqlite3.connect("checkpoints.sqlite", check_same_thread=False)))
def workflow(inputs):
    v = read_config().result()
    charge_card(v).result()
    return send_email(v).result()

config = {"configurable": {"thread_id": sys.argv[1]}}
workflow.invoke(None if workflow.get_state(config).metadata is not None else {"go": 1}, config, durability="sync")
'''
DBOS_WORKFLOW = STEP + '''
from dbos import DBOS, SetWorkflowID
DBOS(config={"name": "readers", "system_database_url": "sqlite:///dbos.sqlite", "run_admin_server": False})
steps = {call: DBOS.step(name=call)(lambda call=call: step_body(call)) for call in ("c1", "c2", "c3")}

@DBOS.workflow()
def task():
    return [steps[call]() for call in ("c1", "c2", "c3")]

DBOS.launch()
try:
    if DBOS.get_workflow_status(sys.argv[1]) is None:
        with SetWorkflowID(sys.argv[1]):
            task()
    else:  # DBOS.launch() recovers the PENDING workflow; wait for it
        DBOS.retrieve_workflow(sys.argv[1]).get_result()
finally:
    DBOS.destroy()
'''


def run(folder: Path, script: str, at: str = "-", fault: str = "-") -> int:
    """Run the workflow in ``folder`` in a process group of its own until it exits (bounded); its return code."""
    (folder / "workflow.py").write_text(script)
    done = subprocess.run([sys.executable, "workflow.py", PLAN.task_id, at, fault], cwd=folder, timeout=DEADLINE_S, check=False,
                          start_new_session=True, capture_output=True, text=True)
    assert done.returncode in (0, 1, -signal.SIGKILL), done.stderr[-2000:]
    return done.returncode


def read_copy(folder: Path, reader: StoreReader, copy: Path) -> DurableState:
    """Copy the store as the harness does at a kill (the files that exist, byte for byte) and read the copy."""
    copy.mkdir()
    for name in reader.files(PLAN):
        if (folder / name).exists():
            shutil.copyfile(folder / name, copy / name)
    return reader.read(copy, PLAN)


def ran(folder: Path) -> list[str]:
    return (folder / "ran.log").read_text().split()


@pytest.mark.parametrize("script, table", [
    (STATE_GRAPH, {"format": "langgraph-sqlite", "thread": "{task_id}"}),
    (FUNCTIONAL, {"format": "langgraph-sqlite", "steps": "order"}),
    (DBOS_WORKFLOW, {"format": "dbos-sqlite", "workflow": "{task_id}"}),
], ids=["stategraph", "functional", "dbos"])
def test_the_store_at_a_kill_holds_the_steps_that_returned_and_after_recovery_all(tmp_path, script, table):
    workload, reader = tmp_path / "workload", reader_for(table)
    workload.mkdir()
    assert run(workload, script, "c3", "kill") == -signal.SIGKILL
    assert ran(workload) == ["c1", "c2"]
    at_kill = read_copy(workload, reader, tmp_path / "store-at-kill-0")
    saved = ["c1", "c2"]
    if script is FUNCTIONAL:
        # The functional API saves a task's writes from a background thread while the next task runs, so at c3's
        # start c2's may not be saved yet (it happened under load), nor c1's: each save is a task of LangGraph's
        # thread pool, in no fixed order. A StateGraph's or DBOS step's are saved, in order, before the next step.
        saved = [call for call in saved if call in at_kill.records]
    assert states(at_kill) == dict.fromkeys(saved, p.SUCCEEDED) and not at_kill.problems
    assert at_kill.records_start is False and at_kill.completed is not True
    assert all(call in at_kill.records[call].quote for call in saved)
    assert run(workload, script) == 0
    # The recorded steps were skipped, the others redone: the reader said which.
    assert ran(workload) == ["c1", "c2", *(call for call in ("c1", "c2") if call not in saved), "c3"]
    final = read_copy(workload, reader, tmp_path / "store-final")
    assert states(final) == {"c1": p.SUCCEEDED, "c2": p.SUCCEEDED, "c3": p.SUCCEEDED} and not final.problems
    assert final.completed is (None if script is STATE_GRAPH else True)


@pytest.mark.parametrize("script, table", [
    (STATE_GRAPH, {"format": "langgraph-sqlite"}),
    (FUNCTIONAL, {"format": "langgraph-sqlite", "steps": "order"}),
    (DBOS_WORKFLOW, {"format": "dbos-sqlite"}),
], ids=["stategraph", "functional", "dbos"])
def test_a_step_that_raised_is_failed(tmp_path, script, table):
    assert run(tmp_path, script, "c2", "raise") == 1
    assert ran(tmp_path) == ["c1", "c2"]
    state = read_copy(tmp_path, reader_for(table), tmp_path / "copy")
    assert states(state) == {"c1": p.SUCCEEDED, "c2": p.FAILED} and not state.problems
    assert state.completed is (True if script is DBOS_WORKFLOW else None)  # DBOS ends the workflow ERROR


def test_a_kill_in_the_first_step_leaves_nothing_recorded(tmp_path):
    reader = reader_for({"format": "dbos-sqlite"})
    assert run(tmp_path, DBOS_WORKFLOW, "c1", "kill") == -signal.SIGKILL
    state = read_copy(tmp_path, reader, tmp_path / "copy")
    assert state.records == {} and state.completed is False and not state.problems


def saved_copy_of_a_finished_graph(tmp_path: Path, drop: str, script: str = STATE_GRAPH) -> Path:
    """A graph run to its end, its database copied and ``drop`` run on the copy (rows a crash did not save)."""
    finished, copy = tmp_path / "finished", tmp_path / "copy"
    finished.mkdir()
    assert run(finished, script) == 0
    shutil.copytree(finished, copy)
    (copy / "ran.log").unlink()
    with sqlite3.connect(copy / "checkpoints.sqlite") as database:
        database.execute(drop)
    return copy


def test_writes_pending_on_a_checkpoint_that_was_never_saved_do_not_record_their_step(tmp_path):
    # durability="async" saves writes and checkpoints from background threads: a kill can leave a step's writes
    # saved for a checkpoint that is not. LangGraph resumes from the latest saved checkpoint and runs that step again.
    copy = saved_copy_of_a_finished_graph(
        tmp_path, "DELETE FROM checkpoints WHERE json_extract(metadata, '$.step') >= 1")
    reader = reader_for({"format": "langgraph-sqlite"})
    assert states(read_copy(copy, reader, tmp_path / "store")) == {"c1": p.SUCCEEDED}
    assert run(copy, STATE_GRAPH) == 0
    assert ran(copy) == ["c2", "c3"]  # what the reader called unrecorded is what LangGraph ran again


def test_a_node_a_saved_checkpoint_has_seen_is_recorded_though_its_writes_were_not_saved(tmp_path):
    # The checkpoint made after c3's superstep was saved, c3's own writes were not: resume does not run c3 again.
    copy = saved_copy_of_a_finished_graph(tmp_path, "DELETE FROM writes WHERE task_path = '~__pregel_pull, c3'")
    state = read_copy(copy, reader_for({"format": "langgraph-sqlite"}), tmp_path / "store")
    assert states(state) == dict.fromkeys(("c1", "c2", "c3"), p.SUCCEEDED)
    assert "versions_seen names c3" in state.records["c3"].quote
    assert run(copy, STATE_GRAPH) == 0
    assert not (copy / "ran.log").exists()  # nothing ran again


def test_a_task_of_an_entrypoint_whose_return_was_saved_is_recorded_though_its_writes_were_not(tmp_path):
    copy = saved_copy_of_a_finished_graph(
        tmp_path, "DELETE FROM writes WHERE task_path LIKE '~__pregel_push, ~__pregel_pull, workflow, 0000000002%'",
        FUNCTIONAL)
    state = read_copy(copy, reader_for({"format": "langgraph-sqlite", "steps": "order"}), tmp_path / "store")
    assert states(state) == dict.fromkeys(("c1", "c2", "c3"), p.SUCCEEDED) and state.completed is True
    assert "entrypoint's return" in state.records["c3"].quote
    assert run(copy, FUNCTIONAL) == 0
    assert not (copy / "ran.log").exists()  # nothing ran again
