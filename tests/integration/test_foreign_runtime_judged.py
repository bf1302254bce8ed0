"""killpoint judges the Node.js agent of scenarios/foreign/ black-box, from its own task store.

The agent writes no killpoint journal: each scenario's ``[journal]`` table maps
its JSON store (tasks/<task_id>.json, an ``operations`` array), and the verdict
rests on the copies of that store taken at every kill, the ledger and the world.
The correct agent must pass every single kill, a second kill inside its
recovery, a torn tail and the non-pausing kills (a false alarm here would be the
worst defect); each mutant must fail with the property that names its bug,
naming the call.
"""

from __future__ import annotations

import shutil

import pytest

from tests.helpers import ROOT

FOREIGN = ROOT / "scenarios" / "foreign"
ORDER, SHORT = FOREIGN / "order.toml", FOREIGN / "short.toml"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="the foreign agent runs on Node.js")


def mutant(bug: str) -> str:
    # The scenario's workload runs in scenarios/foreign/, so agent.js is found beside the scenario.
    return f"node agent.js --python {{python}} --bug {bug}"


def findings(out: str, rule: str) -> list[str]:
    """The report's finding lines of ``rule`` (``  [rule] c5 ...``)."""
    return [line.strip() for line in out.splitlines() if line.strip().startswith(f"[{rule}]")]


def test_the_agent_passes_every_single_kill(killpoint):
    result = killpoint("run", ORDER, "--exhaustive")
    assert result.exit_code == 0, result.out + result.err
    assert "30 runs: 30 passed, 0 failed" in result.out, result.out


@pytest.mark.parametrize("kills", [
    pytest.param(["c5:after_effect", "c5:after_verify"], id="killed-again-after-the-probe-found-the-tap"),
    pytest.param(["c6:after_started", "c6:after_effect"], id="killed-again-in-the-redo-after-an-empty-probe"),
    pytest.param(["c2:after_effect", "c2:after_effect"], id="question-interrupted-twice"),
])
def test_the_agent_passes_a_second_kill_inside_its_recovery(killpoint, kills):
    # The pairs of `--exhaustive --depth 2` where the second kill lands in the recovery itself; the whole
    # depth-2 set of short.toml (136 runs) takes minutes and is run by hand (see the scenario's header).
    result = killpoint("run", ORDER, *(argument for kill in kills for argument in ("--kill-at", kill)))
    assert result.exit_code == 0, result.out + result.err
    assert "1 runs: 1 passed" in result.out, result.out


@pytest.mark.parametrize("kill", [
    pytest.param("c2:after_started/torn:500", id="torn-tail"),  # nothing to tear: the store is renamed whole
    pytest.param("c3:after_started/now", id="the-agent-kills-itself-at-its-own-point"),
    pytest.param("c5:after_effect/now", id="the-fake-tool-kills-the-group"),
])
def test_the_agent_passes_torn_and_non_pausing_kills(killpoint, kill):
    result = killpoint("run", ORDER, "--kill-at", kill)
    assert result.exit_code == 0, result.out + result.err


@pytest.mark.parametrize(("bug", "kill", "rule", "call"), [
    pytest.param("blind-retry", "c5:after_effect", "verify-before-replay", "c5", id="blind-retry-tap"),
    pytest.param("blind-retry", "c6:after_effect", "verify-before-replay", "c6", id="blind-retry-unknown"),
    pytest.param("started-after-tool", "c4:after_effect", "write-ahead", "c4", id="started-after-tool"),
])
def test_each_mutant_fails_with_the_property_of_its_bug(killpoint, bug, kill, rule, call):
    result = killpoint("run", ORDER, "--kill-at", kill, "--workload", mutant(bug))
    assert result.exit_code == 1, result.out + result.err
    named = findings(result.out, rule)
    assert named and all(call in line for line in named), result.out
