"""End to end on real processes: the reference runtime passes every single-kill
schedule of the demo; each mutant is caught with its property named, and its
printed repro command reproduces the same finding."""

from __future__ import annotations

import importlib
import json

import pytest

from killpoint.harness.reporting.report import killpoint_command
from tests.helpers import DEMO, MUTANTS, mutant_workload


def test_reference_runtime_passes_exhaustive_demo(killpoint, tmp_path):
    result = killpoint("run", DEMO, "--exhaustive", "--json", tmp_path / "report.json")
    assert result.exit_code == 0, result.out + result.err
    assert "30 runs: 30 passed, 0 failed" in result.out
    report = json.loads((tmp_path / "report.json").read_text())
    assert all(run["valid"] and not run["unreached"] for run in report["runs"])
    # Every run really was killed where its schedule said, and then recovered.
    for run in report["runs"]:
        first, *rest = run["incarnations"]
        assert first["killed_at"] == run["schedule"][0] and first["exit_code"] is None
        assert rest and rest[-1]["exit_code"] == 0


@pytest.mark.parametrize(("workload", "exit_code"), [("killpoint.scenarios.reference_runtime", 0),
                                                     ("killpoint.scenarios.mutants.retry_unknown", 1)])
def test_the_unlisted_tool_default_is_testable(killpoint, tmp_path, workload, exit_code):
    """A plan may call a tool no catalogue lists and no fake tool is (said in one line): the rules class it
    UNKNOWN, so an interrupted call is VERIFIED; the reference does, and the mutant that retries UNKNOWN is caught."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"task_id": "t", "calls": [{"call_id": "c1", "tool": "notify_ops", "args": {}}]}))
    result = killpoint("run", "--workload", f"{{python}} -m {workload}", "--plan", plan, "--exhaustive",
                       "--runs-dir", tmp_path / "runs")
    assert result.exit_code == exit_code, result.out + result.err
    assert "note: 'notify_ops' is in neither the catalogue nor the fake tools" in result.out, result.out
    if exit_code:
        assert "its tool notify_ops is UNKNOWN" in result.out and "the rules say VERIFY" in result.out, result.out


@pytest.mark.parametrize("mutant", MUTANTS)
def test_mutant_is_caught_and_its_repro_reproduces(killpoint, mutant):
    expected = importlib.import_module(f"killpoint.scenarios.mutants.{mutant}").CAUGHT_BY
    result = killpoint("run", DEMO, "--exhaustive", "--workload", mutant_workload(mutant))
    assert result.exit_code == 1, result.out + result.err
    first_failure = result.out.split("FAIL run ", 1)[1]
    assert f"[{expected}]" in first_failure.split("reproduce:")[0]
    command = result.out.strip().splitlines()[-1]
    assert command.startswith(f"first failure reproduces with: {killpoint_command()} repro kp1.")
    token = command.rsplit(" ", 1)[1]

    repro = killpoint("repro", token)
    assert repro.exit_code == 1, repro.out + repro.err
    assert f"[{expected}]" in repro.out
    assert "KILLED at" in repro.out and "decisions:" in repro.out


def test_random_mode_is_deterministic_per_seed(killpoint, tmp_path):
    reports = []
    for attempt in range(2):
        path = tmp_path / f"random-{attempt}.json"
        assert killpoint("run", DEMO, "--random", "6", "--seed", "7", "--json", path).exit_code == 0
        reports.append([(run["schedule"], run["seed"], run["valid"]) for run in json.loads(path.read_text())["runs"]])
    assert reports[0] == reports[1]
    assert len({tuple(schedule) for schedule, _, _ in reports[0]}) > 1
