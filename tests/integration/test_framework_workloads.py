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
from killpoint.harness.frameworks import reader_for
from killpoint.harness.scenario import load_scenario
from tests.helpers import ROOT

FRAMEWORKS = ROOT / "scenarios" / "frameworks"
EXAMPLES = FRAMEWORKS / "examples"
GUARDED = ["langgraph_graph_guarded", "langgraph_functional_guarded", "dbos_workflow_guarded"]
# One plain scenario per shape and durability: what a kill does to it is the framework's own behaviour.
PLAIN = ["langgraph_graph_sync", "langgraph_graph_async", "langgraph_functional_sync", "dbos_workflow"]


def scenario(name: str) -> Path:
    return FRAMEWORKS / f"{name}.toml"


def findings(out: str, rule: str) -> list[str]:
    """The report's finding lines of ``rule`` (``  [rule] c3 ...``)."""
    return [line.strip() for line in out.splitlines() if line.strip().startswith(f"[{rule}]")]


@pytest.mark.parametrize("name", GUARDED)
def test_a_guarded_workload_passes_every_single_kill(killpoint, name):
    result = killpoint("run", scenario(name), "--exhaustive")
    assert result.exit_code == 0, result.out + result.err
    assert "16 runs: 16 passed, 0 failed" in result.out, result.out


@pytest.mark.parametrize("name", PLAIN)
def test_a_plain_workload_that_redoes_an_append_after_its_effect_is_named(killpoint, name):
    result = killpoint("run", scenario(name), "--kill-at", "c3:after_effect")
    assert result.exit_code == 1, result.out + result.err
    named = findings(result.out, "verify-before-replay")
    assert named and all("c3" in line for line in named), result.out


@pytest.mark.parametrize("name", PLAIN)
def test_a_plain_workload_that_redoes_an_idempotent_write_passes(killpoint, name):
    """The framework re-runs the interrupted write_file: the decision matrix's RETRY, no finding."""
    result = killpoint("run", scenario(name), "--kill-at", "c2:after_effect")
    assert result.exit_code == 0, result.out + result.err


@pytest.mark.parametrize(("name", "point", "recorded"), [
    (shape, point, point == protocol.STEP_RECORDED)
    for shape in ("langgraph_graph_sync", "langgraph_functional_sync", "dbos_workflow")
    for point in (protocol.STEP_RETURNED, protocol.STEP_RECORDED)
])
def test_step_recorded_is_announced_once_the_store_holds_the_step(killpoint, tmp_path, name, point, recorded):
    result = killpoint("run", scenario(name), "--kill-at", f"c2:{point}", "--keep-all", "--runs-dir", tmp_path)
    assert result.exit_code in (0, 1), result.out + result.err
    table = tomllib.loads(scenario(name).read_text())["journal"]
    plan = load_scenario(scenario(name)).plan
    state = reader_for(table).read(tmp_path / "run-00000" / "store-at-kill-0", plan)
    assert state.problems == ()
    assert ("c2" in state.records) is recorded, state
    # The functional API saves a task's writes from a background thread while the next tasks run (even under
    # durability="sync"), so there c1's record and c3's race the kill; a StateGraph or DBOS step's do not.
    if "functional" not in name:
        assert state.records["c1"].status == protocol.SUCCEEDED and "c3" not in state.records, state


@pytest.mark.parametrize("name", ["shop_graph", "shop_functional", "shop_dbos"])
def test_the_users_checkout_charges_once_but_emails_twice(killpoint, tmp_path, name):
    """The user's own tools: the charge's probe keeps it to one charge; the email, unguarded, is sent again."""
    charge = killpoint("run", EXAMPLES / f"{name}.toml", "--kill-at", "c3:after_effect")
    assert charge.exit_code == 0, charge.out + charge.err
    email = killpoint("run", EXAMPLES / f"{name}.toml", "--kill-at", "c4:after_effect", "--keep-all",
                      "--runs-dir", tmp_path)
    assert email.exit_code == 1, email.out + email.err
    assert findings(email.out, "verify-before-replay"), email.out
    outbox = tmp_path / "run-00000" / "world" / "outbox.txt"
    assert outbox.read_text().count("on its way") == 2


def test_each_framework_workload_exits_0_once_its_plan_is_carried_out(killpoint, tmp_path):
    """The golden run of each workload: every planned step ran once, in plan order."""
    for name in ("langgraph_graph_exit", "langgraph_functional_async", "langgraph_functional_exit"):
        runs = tmp_path / name
        result = killpoint("run", scenario(name), "--kill-at", "c1:step_entered", "--runs-dir", runs)
        assert result.exit_code in (0, 1), result.out + result.err
        ledger = [json.loads(line) for line in (runs / "golden" / "ledger.jsonl").read_text().splitlines()]
        invoked = [line["call"] for line in ledger if protocol.LEDGER_INVOKED in line]
        assert invoked == ["c1", "c2", "c3", "c4"], ledger
