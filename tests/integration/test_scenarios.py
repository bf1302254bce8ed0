"""Every scenario in scenarios/ is a realistic task the reference runtime recovers from at every crash point.

Together the scenarios call all 96 tools of the reference catalogue, each plan
mixes the four classes, and each seeded world lets the crash-free run succeed
(at most one call per plan fails, on purpose), so a finding on them is the
runtime's, never the scenario's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from killpoint import protocol
from killpoint.catalogue import REFERENCE_CATALOGUE, load_catalogue
from killpoint.fake_tools.base import REGISTRY, invoke, lookup
from killpoint.fake_tools.ledger import Ledger
from killpoint.fake_tools.world import seed_world
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.model import Scenario
from tests.helpers import ROOT

SCENARIO_FILES = sorted((ROOT / "scenarios").glob("*.toml"))
REFERENCE_WORKLOAD = "killpoint.scenarios.reference_runtime"


def scenario_id(path: Path) -> str:
    return path.stem


def crash_free_failures(scenario: Scenario, tmp_path: Path) -> list[str]:
    """Run the plan in-process on its seeded world, no kill, no runtime; the calls that FAILED, with why."""
    world = seed_world(tmp_path / "world", scenario.world_files, scenario.world_state)
    ledger = Ledger(tmp_path / "ledger.jsonl", 0)
    try:
        results = [(call, invoke(call.tool, call.call_id, call.args, world=world, ledger=ledger))
                   for call in scenario.plan.calls]
    finally:
        ledger.close()
    return [f"{call.call_id} {call.tool}: {result.error}" for call, result in results if not result.ok]


def test_there_are_realistic_scenarios_besides_the_demo():
    assert len(SCENARIO_FILES) >= 8, [path.name for path in SCENARIO_FILES]


def test_scenarios_together_call_every_tool_of_the_reference_catalogue():
    lookup("read_file")  # registers every fake tool
    catalogue_tools = set(load_catalogue(REFERENCE_CATALOGUE).tools)
    called = {call.tool for path in SCENARIO_FILES for call in load_scenario(path).plan.calls}
    assert len(catalogue_tools) == 96 and set(REGISTRY) == catalogue_tools
    assert sorted(catalogue_tools - called) == []
    assert sorted(called - catalogue_tools) == []


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=scenario_id)
def test_plan_has_a_tool_of_every_class_and_a_real_non_idempotent_one(path):
    scenario = load_scenario(path)
    catalogue = scenario.catalogue
    classes = {catalogue.class_of(call.tool) for call in scenario.plan.calls}
    assert classes == set(protocol.CLASSES), f"{path.name} lacks {set(protocol.CLASSES) - classes}"
    # A question is NON_IDEMPOTENT but RETRIED; each plan also has one that recovery must VERIFY.
    assert any(catalogue.class_of(call.tool) == protocol.NON_IDEMPOTENT and not catalogue.is_interactive(call.tool)
               for call in scenario.plan.calls)


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=scenario_id)
def test_seeded_world_lets_the_crash_free_run_succeed(path, tmp_path):
    scenario = load_scenario(path)
    assert scenario.workload[-1] == REFERENCE_WORKLOAD and scenario.origin["scenario"].endswith(path.name)
    failures = crash_free_failures(scenario, tmp_path)
    assert len(failures) <= 1, failures


@pytest.mark.integration
@pytest.mark.parametrize("path", SCENARIO_FILES, ids=scenario_id)
def test_reference_runtime_passes_every_single_kill(killpoint, tmp_path, path):
    calls = len(load_scenario(path).plan.calls)
    report_path = tmp_path / "report.json"
    result = killpoint("run", path, "--exhaustive", "-q", "--json", report_path)
    assert result.exit_code == 0, result.out + result.err
    report = json.loads(report_path.read_text())
    assert report["summary"]["runs"] == len(protocol.CALL_POINTS) * calls
    assert report["summary"]["failed"] == report["summary"]["unknown"] == 0
    assert all(run["valid"] and not run["unreached"] for run in report["runs"])
