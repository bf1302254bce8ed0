"""Every shipped runtime announces only crash points the protocol names.

The harness records whatever point name a runtime sends and would schedule
kills at a misspelt one as readily as at a real one; the checker's rules and
the reports look for the protocol's names. So a runtime that wrote
``"after_efect"`` would pass its own runs while being judged at points no rule
knows. Each runtime here is run for real on the demo, killed once inside c5 (a
VERIFY call, so the recovery reaches its own points too), and the names of
every point it announced are compared with ``protocol.ALL_POINTS``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from killpoint import protocol
from killpoint.harness.config.scenario import load_scenario
from killpoint.scenarios.mutants import zoo
from tests.helpers import DEMO, ROOT

KILL = f"c5:{protocol.AFTER_EFFECT}"
REFERENCE = "{python} -m killpoint.scenarios.reference_runtime"
STANDALONE = f"{{python}} {ROOT / 'scenarios' / 'standalone' / 'runtime.py'}"


def announced_point_names(killpoint, tmp_path, workload: str, scenario: Path = DEMO, kill: str = KILL) -> set[str]:
    """The names (without their call) of every point the golden run and each incarnation announced."""
    report_path = tmp_path / "report.json"
    result = killpoint("run", scenario, "--kill-at", kill, "--workload", workload, "--json", report_path)
    assert report_path.exists(), result.out + result.err
    report = json.loads(report_path.read_text())
    (run,) = report["runs"]
    assert run["incarnations"][0]["killed_at"] == kill, run
    announced = [*report["golden"]["points"], *(point for inc in run["incarnations"] for point in inc["points"])]
    return {point.rsplit(":", 1)[-1] for point in announced}


@pytest.mark.parametrize("workload", [REFERENCE, STANDALONE], ids=["reference", "standalone"])
def test_a_correct_runtime_announces_every_protocol_point_and_no_other(killpoint, tmp_path, workload):
    assert announced_point_names(killpoint, tmp_path, workload) == set(protocol.CALL_POINTS + protocol.RECOVERY_POINTS)


@pytest.mark.parametrize("mutant", zoo(), ids=lambda mutant: mutant.name)
def test_a_mutant_announces_no_point_the_protocol_does_not_name(killpoint, tmp_path, mutant):
    """On its own scenario (a runtime judged from its own store writes no killpoint journal to run the demo
    with), killed inside its last call."""
    scenario = ROOT / "scenarios" / f"{mutant.scenario}.toml"
    kill = KILL if scenario == DEMO else f"{load_scenario(scenario).plan.call_ids[-1]}:{protocol.AFTER_EFFECT}"
    assert announced_point_names(killpoint, tmp_path, mutant.workload, scenario, kill) <= set(protocol.ALL_POINTS)
