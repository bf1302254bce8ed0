"""killpoint judges the Node.js agent of scenarios/foreign/ black-box, from its own task store.

The agent writes no killpoint journal: each scenario's ``[journal]`` table maps
its JSON store (tasks/<task_id>.json, an ``operations`` array), and the verdict
rests on the copies of that store taken at every kill, the ledger and the world.
The correct agent must pass every single kill, second kills inside its recovery
and the non-pausing kills (a false alarm here would be the worst defect); each
mutant must fail with the property that names its bug, naming the call.

The agent calls the fake tools at the tool service the harness runs beside
every run (``KILLPOINT_TOOLS_URL``), one HTTP request per call, so the order
task's whole sweep runs here, pausing and not; the command line
(``--python {python}``, a Python start per call) is judged over short.toml.
Short.toml's depth-2 set (136 runs) is run by hand and by bench/every_mode.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import ROOT

FOREIGN = ROOT / "scenarios" / "foreign"
ORDER, SHORT = FOREIGN / "order.toml", FOREIGN / "short.toml"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="the foreign agent runs on Node.js")

# One kill per call of the order task at the point where its recovery decides, and the pairs of
# `--exhaustive --depth 2` whose second kill lands in the recovery itself: c2 asked again and
# interrupted again, c5 killed again after the probe found the tap, c6 killed again in the redo
# that follows an empty probe.
EVERY_CLASS_AND_ITS_RECOVERY = (
    "c1:after_effect",  # READ_ONLY: retried
    "c2:after_effect", "c2:after_effect",  # interactive: asked again, twice
    "c3:after_effect",  # IDEMPOTENT_WRITE: retried
    "c4:before_finished",  # NON_IDEMPOTENT append, its effect done: verified, not redone
    "c5:after_effect", "c5:after_verify",
    "c6:after_started", "c6:after_effect",  # UNKNOWN: verified, then redone
)


def mutant(bug: str) -> str:
    # The scenario's workload runs in scenarios/foreign/, so agent.js is found beside the scenario.
    return f"node agent.js --bug {bug}"


def kill_args(kills: tuple[str, ...]) -> list[str]:
    return [argument for kill in kills for argument in ("--kill-at", kill)]


def findings(out: str, rule: str) -> list[str]:
    """The report's finding lines of ``rule`` (``  [rule] c5 ...``)."""
    return [line.strip() for line in out.splitlines() if line.strip().startswith(f"[{rule}]")]


def killed_at(report: Path) -> list[str | None]:
    """Where each incarnation of the report's one run was killed (None: it ran to its end)."""
    (run,) = json.loads(report.read_text())["runs"]
    return [incarnation["killed_at"] for incarnation in run["incarnations"]]


@pytest.mark.parametrize("pausing", [True, False], ids=["pausing", "no-pause"])
def test_the_agent_calling_the_tool_service_passes_every_single_kill_of_the_order_task(killpoint, pausing):
    result = killpoint("run", ORDER, "--exhaustive", *(() if pausing else ("--no-pause",)))
    assert result.exit_code == 0, result.out + result.err
    assert "30 runs: 30 passed, 0 failed" in result.out, result.out


def test_the_agent_calling_the_tools_command_line_passes_every_single_kill_of_the_short_task(killpoint):
    result = killpoint("run", SHORT, "--exhaustive", "--workload", "node agent.js --python {python}")
    assert result.exit_code == 0, result.out + result.err
    assert "15 runs: 15 passed, 0 failed" in result.out, result.out


def test_the_agent_passes_a_kill_in_each_class_and_second_kills_in_its_recovery(killpoint, tmp_path):
    report = tmp_path / "report.json"
    result = killpoint("run", ORDER, *kill_args(EVERY_CLASS_AND_ITS_RECOVERY), "--json", report)
    assert result.exit_code == 0, result.out + result.err
    assert "1 runs: 1 passed" in result.out, result.out
    assert killed_at(report) == [*EVERY_CLASS_AND_ITS_RECOVERY, None]  # every kill landed


def test_the_agent_passes_non_pausing_kills(killpoint, tmp_path):
    # No torn tail: killpoint tears only its own journal.jsonl, and asking it to tear this store is bad input.
    kills = ("c3:after_started/now",  # the agent kills itself at its own point
             "c5:after_effect/now")  # the tool service announces it, the harness kills the group
    report = tmp_path / "report.json"
    result = killpoint("run", ORDER, *kill_args(kills), "--json", report)
    assert result.exit_code == 0, result.out + result.err
    assert killed_at(report) == [*kills, None]


def test_a_torn_tail_asked_of_the_agent_store_is_bad_input(killpoint):
    """killpoint tears only its own journal.jsonl: a tear here would be a plain kill passed off as torn."""
    result = killpoint("run", ORDER, "--kill-at", "c2:after_started/torn:500")
    assert result.exit_code == 2, result.out + result.err
    assert "journal.format = 'json'" in result.err and "drop the tear" in result.err, result.err


@pytest.mark.parametrize(("bug", "kills", "rule", "calls"), [
    pytest.param("blind-retry", ("c5:after_effect", "c6:after_effect"), "verify-before-replay", {"c5", "c6"},
                 id="blind-retry-tap-and-unknown"),
    pytest.param("started-after-tool", ("c4:after_effect",), "write-ahead", {"c4"}, id="started-after-tool"),
])
def test_each_mutant_fails_with_the_property_of_its_bug(killpoint, bug, kills, rule, calls):
    result = killpoint("run", ORDER, *kill_args(kills), "--workload", mutant(bug))
    assert result.exit_code == 1, result.out + result.err
    named = findings(result.out, rule)  # "[rule] c5 (kill c5:after_effect): ..."
    assert named and {line.split()[1] for line in named} == calls, result.out
