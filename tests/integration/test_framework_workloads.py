"""The framework workloads under the real harness: LangGraph (StateGraph, functional API) and DBOS judged
black-box from their own store, with real SIGKILLs and real restarts.

The guarded workloads (each NON_IDEMPOTENT or UNKNOWN step probes before it redoes an interrupted effect)
are the correct runtimes: they must pass every single kill, a false alarm there being the worst defect.
The plain ones re-run an interrupted step blindly, as both frameworks do: a kill after the effect of a
NON_IDEMPOTENT step must fail naming that step, and one in an IDEMPOTENT_WRITE step must not. The
instrumentation's step_recorded must agree with the store: a kill there finds the step in the store's
copy, a kill at step_returned does not.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from killpoint import protocol
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.judge.stores import reader_for
from tests.helpers import ROOT

FRAMEWORKS = ROOT / "scenarios" / "frameworks"
EXAMPLES = FRAMEWORKS / "examples"
# One plain scenario per shape and durability: what a kill does to it is the framework's own behaviour.
PLAIN = ["langgraph_graph_sync", "langgraph_graph_async", "langgraph_functional_sync", "dbos_workflow"]


def scenario(name: str) -> Path:
    return FRAMEWORKS / f"{name}.toml"


def findings(out: str, rule: str) -> list[str]:
    """The report's finding lines of ``rule`` (``  [rule] c3 ...``)."""
    return [line.strip() for line in out.splitlines() if line.strip().startswith(f"[{rule}]")]


@pytest.mark.parametrize(("name", "jobs", "runs"), [
    # Five points a step: LangGraph's checkpointer announces step_saving too.
    ("langgraph_graph_guarded", "1", 20),
    ("langgraph_functional_guarded", "1", 20),
    # Four points a step: DBOS has no step_saving.
    ("dbos_workflow_guarded", "2", 16),
])
def test_a_guarded_workload_passes_every_single_kill(killpoint, name, jobs, runs):
    result = killpoint("run", scenario(name), "--exhaustive", "-j", jobs)
    assert result.exit_code == 0, result.out + result.err
    assert f"{runs} runs: {runs} passed, 0 failed" in result.out, result.out


@pytest.mark.parametrize("name", PLAIN)
def test_a_plain_workload_that_redoes_an_append_after_its_effect_is_named(killpoint, name):
    result = killpoint("run", scenario(name), "--kill-at", "c3:after_effect")
    assert result.exit_code == 1, result.out + result.err
    named = findings(result.out, "verify-before-replay")
    assert named and all("c3" in line for line in named), result.out


def test_a_plain_step_killed_before_its_effect_is_named_with_the_stores_missing_record(killpoint):
    """Killed at c3's step_entered: LangGraph holds no record of c3 (it records a step once it returned), and the
    redo made the only effect. The finding says both, and does not read as if the effect ran before the kill."""
    result = killpoint("run", scenario("langgraph_graph_sync"), "--kill-at", f"c3:{protocol.STEP_ENTERED}")
    assert result.exit_code == 1, result.out + result.err
    assert ("[verify-before-replay] c3 (kill c3:step_entered): at-least-once: c3 (append, NON_IDEMPOTENT) was "
            "re-executed after the kill without a read-only check; the store the recovery started from "
            "(store-at-kill-0) holds no record of c3: only the ledger's invoked line says it was under way; its effect "
            "is in the ledger 1 time(s), 0 before the kill and 1 after it (the crash-free run: 1); the kill came at "
            "step_entered, before the incarnation it killed could make the effect; no read-only probe of it was run"
            ) in result.out, result.out
    assert "store-at-kill-0: no record of c3 (it holds 2 record(s): c1 SUCCEEDED, c2 SUCCEEDED)" in result.out


@pytest.mark.parametrize("name", PLAIN)
def test_a_plain_workload_that_redoes_an_idempotent_write_passes(killpoint, name):
    """The framework re-runs the interrupted write_file: the decision matrix's RETRY, no finding."""
    result = killpoint("run", scenario(name), "--kill-at", "c2:after_effect")
    assert result.exit_code == 0, result.out + result.err


@pytest.mark.parametrize("name", ["langgraph_graph_sync", "langgraph_functional_sync", "dbos_workflow"])
def test_step_recorded_is_announced_once_the_store_holds_the_step(killpoint, tmp_path, name):
    """Killed at c2's step_returned, then at its step_recorded in the redo: the store holds c2 at the second only."""
    kills = (f"c2:{protocol.STEP_RETURNED}", f"c2:{protocol.STEP_RECORDED}")
    result = killpoint("run", scenario(name), *(argument for kill in kills for argument in ("--kill-at", kill)),
                       "--keep-all", "--runs-dir", tmp_path)
    assert result.exit_code in (0, 1), result.out + result.err
    table = tomllib.loads(scenario(name).read_text())["journal"]
    plan = load_scenario(scenario(name)).plan
    for number, (kill, recorded) in enumerate(zip(kills, (False, True))):
        state = reader_for(table).read(tmp_path / "run-00000" / f"store-at-kill-{number}", plan)
        assert state.problems == ()
        assert ("c2" in state.records) is recorded, (kill, state)
        # The functional API saves a task's writes from a background thread while the next tasks run (even under
        # durability="sync"), so there c1's record and c3's race the kill; a StateGraph or DBOS step's do not.
        if "functional" not in name:
            assert state.records["c1"].status == protocol.SUCCEEDED and "c3" not in state.records, (kill, state)


@pytest.mark.parametrize("name", ["shop_graph", "shop_functional", "shop_dbos"])
def test_the_users_checkout_charges_once_but_emails_twice(killpoint, tmp_path, name):
    """The user's own tools, killed after the charge and then after the email in its recovery: the charge's
    probe keeps it to one charge, named by no finding; the email, unguarded, is sent again and named."""
    result = killpoint("run", EXAMPLES / f"{name}.toml", "--kill-at", "c3:after_effect", "--kill-at",
                       "c4:after_effect", "--keep-all", "--runs-dir", tmp_path)
    assert result.exit_code == 1, result.out + result.err
    named = findings(result.out, "verify-before-replay")
    assert named and all(line.split()[1] == "c4" for line in named), result.out
    assert not [line for line in result.out.splitlines() if line.strip().startswith("[") and " c3 " in line], result.out
    world = tmp_path / "run-00000" / "world"
    assert (world / "charges.txt").read_text().count("charged") == 1
    assert (world / "outbox.txt").read_text().count("on its way") == 2


def test_an_unlisted_tool_of_the_users_own_is_judged_unknown_so_its_replay_is_named(killpoint, tmp_path):
    """The rules' default, testable: the shop's catalogue without send_email leaves it unlisted, so UNKNOWN and
    VERIFY; the graph re-sends it blindly after a kill past its effect, and that is named, not refused as a typo."""
    catalogue = (EXAMPLES / "catalogue.toml").read_text()
    (tmp_path / "catalogue.toml").write_text("\n".join(line for line in catalogue.splitlines()
                                                        if not line.startswith("send_email")))
    (tmp_path / "shop.toml").write_text((EXAMPLES / "shop_graph.toml").read_text())
    result = killpoint("run", tmp_path / "shop.toml", "--kill-at", "c4:after_effect", "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 1, result.out + result.err
    assert "note: 'send_email' is in neither the catalogue nor the fake tools: the rules class it UNKNOWN" in result.out
    named = findings(result.out, "verify-before-replay")
    assert named and all(line.split()[1] == "c4" for line in named), result.out
    assert "UNKNOWN" in result.out, result.out


def test_each_framework_workload_exits_0_once_its_plan_is_carried_out(killpoint, tmp_path):
    """The golden run of each workload: every planned step ran once, in plan order."""
    for name in ("langgraph_graph_exit", "langgraph_functional_async", "langgraph_functional_exit"):
        runs = tmp_path / name
        result = killpoint("run", scenario(name), "--kill-at", "c1:step_entered", "--runs-dir", runs)
        assert result.exit_code in (0, 1), result.out + result.err
        ledger = [json.loads(line) for line in (runs / "golden" / "ledger.jsonl").read_text().splitlines()]
        invoked = [line["call"] for line in ledger if protocol.LEDGER_INVOKED in line]
        assert invoked == ["c1", "c2", "c3", "c4"], ledger
