"""LangGraph's step_saving under the real harness: the step has returned and its writes are handed to the
checkpointer (``put_writes`` called), not yet saved.

The point is reached by every planned step of both LangGraph shapes, so the exhaustive sweep kills there;
a kill there leaves the store without the step's writes. A guarded workload (every NON_IDEMPOTENT or
UNKNOWN step probes before it redoes an interrupted effect) must pass there whatever the kill: pausing,
non-pausing, a second kill in its recovery. An unguarded one that loses the returned append's writes
re-runs it blindly, and that is named.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from killpoint import protocol
from tests.helpers import ROOT

FRAMEWORKS = ROOT / "scenarios" / "frameworks"
GUARDED = ["langgraph_graph_guarded", "langgraph_functional_guarded"]


def scenario(name: str) -> Path:
    return FRAMEWORKS / f"{name}.toml"


def incarnations(run_dir: Path) -> list[dict[str, object]]:
    return list(json.loads((run_dir / "incarnations.json").read_text()))


def saved_task_paths(copy: Path) -> list[str]:
    """The task paths of the writes rows in a copy of the checkpoints database."""
    connection = sqlite3.connect(f"file:{copy / 'checkpoints.sqlite'}?mode=ro", uri=True)
    try:
        return [row[0] for row in connection.execute("SELECT task_path FROM writes")]
    finally:
        connection.close()


@pytest.mark.parametrize("name", ["langgraph_graph_sync", "langgraph_functional_sync"])
def test_every_step_reaches_step_saving_and_a_kill_there_finds_its_writes_unsaved(killpoint, tmp_path, name):
    result = killpoint("run", scenario(name), "--kill-at", f"c2:{protocol.STEP_SAVING}", "--keep-all",
                       "--runs-dir", tmp_path)
    # c2 is an IDEMPOTENT_WRITE, its redo is right; the kill may land inside c3, already started on the step's
    # own thread while the saver's announced c2's saving: c3's blind redo is then named, and said to be that.
    assert result.exit_code in (0, 1), result.out + result.err
    named = [line.strip() for line in result.out.splitlines() if line.strip().startswith("[")]
    assert all(line.startswith("[verify-before-replay] c3 (kill c2:step_saving)") and
               "the kill at c2:step_saving landed inside the next step, c3: its invoked line" in line
               for line in named if not line.startswith("[world-equals-golden]")), result.out
    assert (result.exit_code == 1) is bool(named), result.out
    golden = incarnations(tmp_path / "golden")[0]["points"]
    assert isinstance(golden, list)
    for call in ("c1", "c2", "c3", "c4"):
        order = [golden.index(f"{call}:{point}") for point in
                 (protocol.STEP_RETURNED, protocol.STEP_SAVING, protocol.STEP_RECORDED)]
        assert order == sorted(order), golden
    killed = incarnations(tmp_path / "run-00000")[0]
    assert killed["killed_at"] == "c2:step_saving"
    c2 = "~__pregel_pull, c2" if "graph" in name else "~__pregel_push, ~__pregel_pull, carry_out_plan, 0000000001"
    paths = saved_task_paths(tmp_path / "run-00000" / "store-at-kill-0")
    assert not [path for path in paths if path.startswith(c2)], paths


@pytest.mark.parametrize("name", GUARDED)
def test_a_guarded_workload_passes_every_single_non_pausing_kill(killpoint, name):
    """Step_saving is in the sweep (five points a step) and, killed with no pause, passes as the rest do."""
    result = killpoint("run", scenario(name), "--exhaustive", "--no-pause", "-j", "1")
    assert result.exit_code == 0, result.out + result.err
    assert "20 runs: 20 passed, 0 failed" in result.out, result.out


@pytest.mark.parametrize("name", GUARDED)
@pytest.mark.parametrize("kill", ["c3:step_saving", "c3:step_saving/now", "c4:step_saving/now"])
def test_a_guarded_workload_passes_a_second_kill_at_step_saving_in_its_recovery(killpoint, name, kill):
    """Depth 2 at the new point: killed with the append's (or the charge's) writes unsaved, then again at the
    redo's step_saving: each recovery probes and finds the effect, none repeats it."""
    result = killpoint("run", scenario(name), "--kill-at", kill, "--kill-at", kill)
    assert result.exit_code == 0, result.out + result.err


def test_a_guarded_workload_refuses_a_torn_tail_it_has_no_journal_for(killpoint):
    """--torn-tail tears killpoint's own journal, which a framework does not write: refused, not passed."""
    result = killpoint("run", scenario("langgraph_graph_guarded"), "--exhaustive", "--torn-tail")
    assert result.exit_code == 2, result.out + result.err


def test_an_unguarded_async_workload_that_loses_a_returned_append_is_caught_at_step_saving(killpoint):
    """Functional API, durability async, killed with no pause as the checkpointer is handed c3's writes: c3 had
    returned (its append is in the world), and nothing else records a task before the entrypoint ends (no
    checkpoint between its task calls), so resume re-runs it blindly, every time."""
    result = killpoint("run", scenario("langgraph_functional_async"), "--kill-at", "c3:step_saving/now")
    assert result.exit_code == 1, result.out + result.err
    named = [line.strip() for line in result.out.splitlines()
             if line.strip().startswith("[verify-before-replay] c3 (kill c3:step_saving/now)")]
    assert named, result.out
    assert named[0].split(": ", 1)[1].startswith(
        "at-least-once: c3 (append, NON_IDEMPOTENT) was re-executed after the kill without a read-only check; the "
        "store the recovery started from (store-at-kill-0) holds no record of c3"), result.out
    assert "1 before the kill and 1 after it" in named[0] and "landed inside" not in named[0], result.out


def test_an_unguarded_async_graph_killed_at_step_saving_fails_exactly_when_the_store_lost_the_append(
        killpoint, tmp_path):
    """StateGraph, durability async: the superstep's checkpoint, saved from another thread, may hold c3's
    result though its writes were not saved (then resume rightly skips c3). The verdict follows the store:
    a finding on c3 when the store at the kill holds no record of it, none when it does."""
    from killpoint.harness.config.scenario import load_scenario
    from killpoint.harness.judge.stores import reader_for

    result = killpoint("run", scenario("langgraph_graph_async"), "--kill-at", "c3:step_saving/now", "--keep-all",
                       "--runs-dir", tmp_path)
    assert result.exit_code in (0, 1), result.out + result.err
    plan = load_scenario(scenario("langgraph_graph_async")).plan
    table = {"format": "langgraph-sqlite", "path": "checkpoints.sqlite", "steps": "name"}
    state = reader_for(table).read(tmp_path / "run-00000" / "store-at-kill-0", plan)
    c3_named = "[verify-before-replay] c3 (kill c3:step_saving/now)" in result.out
    assert c3_named is ("c3" not in state.records), (state, result.out)
