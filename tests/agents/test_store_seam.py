"""The crash point inside an agent's own store (``store_result``), by the real harness on the real reference agent.

The reference agent journals each tool result, then asks the model: its store
first holds a call's result after the call's tool reply and before the next
model request, and a kill there finds the result kept but not yet shown to the
model. A correct agent passes it in every mode (test_agent_sessions.py runs
them, the store's point among the rest); these pin where the point lands, what
a kill there leaves, that a mutant is caught there, and that a store the agent
makes hostile is never read through and never hangs the run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from killpoint import protocol
from tests.agents.test_agent_sessions import AGENTS, REFERENCE, findings

pytestmark = pytest.mark.integration


def only_run(runs: Path) -> Path:
    return runs / "run-00000"


def incarnations(run: Path) -> list[dict]:
    return json.loads((run / "incarnations.json").read_text())


def test_the_store_point_comes_after_a_calls_reply_and_before_the_request_that_shows_its_result(killpoint, tmp_path):
    result = killpoint("run", REFERENCE, "--kill-at", "c3:store_result", "--keep-all", "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 0, result.out + result.err
    points = incarnations(only_run(tmp_path / "runs"))[0]["points"]
    for call in ("c1", "c2", "c3"):
        assert points.index(f"{call}:tool_reply") < points.index(f"{call}:store_result"), points
    # The agent saves c1's result before it asks the model again: the point is read before that request.
    assert points.index("c1:store_result") < points.index("c2:model_request"), points
    assert points[-1] == "c3:store_result", points  # killed there: nothing after it


def test_a_kill_at_the_store_point_leaves_the_result_kept_but_unseen_by_the_model(killpoint, tmp_path):
    result = killpoint("run", REFERENCE, "--kill-at", "c3:store_result", "--keep-all", "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 0 and "1 runs: 1 passed" in result.out, result.out + result.err
    run = only_run(tmp_path / "runs")
    kept = [json.loads(line)["message"] for line in (run / "store-at-kill-0/agent-journal.jsonl").read_text().splitlines()]
    assert any(message.get("role") == "tool" and message.get("tool_call_id") == "call_kp_c3" for message in kept)
    requests = [json.loads(line) for line in (run / "store-at-kill-0/agent-seams.jsonl").read_text().splitlines()
                if "model_request" in line]
    assert requests and all("c3" not in request["done"] for request in requests), requests
    effects = [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines()]
    assert sum(1 for effect in effects if effect.get("call") == "c3" and "effect" in effect) == 1, effects


def test_a_mutant_that_runs_again_a_call_its_journal_kept_is_caught_at_the_store_point(killpoint):
    """retries-done calls the last turn again at a restart: c3's result was kept, never shown to the model, and
    the append runs a second time with no read-only check."""
    result = killpoint("run", AGENTS / "agent-retries-done.toml", "--kill-at", "c3:store_result")
    assert result.exit_code == 1, result.out + result.err
    assert any(line.startswith("[verify-before-replay] c3 (kill c3:store_result)")
               for line in findings(result.out, "verify-before-replay")), result.out


def test_an_agent_that_names_no_store_reaches_no_store_point(killpoint, tmp_path):
    scenario = tmp_path / "no-store.toml"
    scenario.write_text(REFERENCE.read_text().replace('store = "agent-journal.jsonl"', ""))
    result = killpoint("run", scenario, "--kill-at", "c1:tool_effect", "--keep-all", "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 0, result.out + result.err
    reached = [point for incarnation in incarnations(only_run(tmp_path / "runs")) for point in incarnation["points"]]
    assert reached and not any(point.endswith(f":{protocol.STORE_RESULT}") for point in reached), reached


def test_a_fifo_planted_among_the_store_files_is_never_read_and_never_hangs_the_run(killpoint, tmp_path):
    """A FIFO at the journal's side file: opening it to read would block the harness for good. The store is
    refused at every look (no store point is announced), the crash-free run ends, and the store it left, which
    no reader can read, is bad input naming the FIFO."""
    agent = tmp_path / "fifo_agent.py"
    agent.write_text(
        "import os, runpy\n"
        "fifo = os.path.join(os.environ['KILLPOINT_RUN_DIR'], 'agent-journal.jsonl-journal')\n"
        "if not os.path.exists(fifo):\n"
        "    os.mkfifo(fifo)\n"
        "runpy.run_module('killpoint.scenarios.agents.reference_agent', run_name='__main__')\n")
    scenario = tmp_path / "fifo.toml"
    scenario.write_text(REFERENCE.read_text().replace(
        'workload = ["{python}", "-m", "killpoint.scenarios.agents.reference_agent"]',
        f'workload = ["{{python}}", "{agent}"]'))
    result = killpoint("run", scenario, "--kill-at", "c3:tool_effect", "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 2, result.out + result.err
    assert "agent-journal.jsonl-journal is a FIFO; it was not read" in result.err, result.err
    (golden,) = incarnations(tmp_path / "runs" / "golden")
    assert golden["exit_code"] == 0 and "c3:tool_reply" in golden["points"], golden
    assert not any(point.endswith(":store_result") for point in golden["points"]), golden["points"]
