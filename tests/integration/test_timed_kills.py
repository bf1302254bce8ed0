"""Timed kills on real processes: each counts from its incarnation's own start of work (its first crash point,
or journal or ledger write), not from its launch, so it lands while the incarnation works however long its
start-up takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import DEMO, ROOT, workload_command


def announced_a_point(run: dict, run_dir: Path) -> bool:
    return bool(run["incarnations"][0]["points"])


def journaled_a_record(run: dict, run_dir: Path) -> bool:
    return bool((run_dir / "journal-at-kill-0.jsonl").read_text().strip())


@pytest.mark.parametrize(("runtime", "worked"), [
    pytest.param("killpoint.scenarios.reference_runtime", announced_a_point, id="crash-points"),
    # Hidden from the rendezvous, it announces no point: its first journal write is its first sign of work.
    pytest.param("killpoint.scenarios.silent killpoint.scenarios.reference_runtime", journaled_a_record,
                 id="journal-writes"),
])
def test_a_timed_kill_counts_from_the_start_of_work_not_the_launch(killpoint, tmp_path, runtime, worked):
    """Half a second of start-up: 5 ms after the launch is before any work, where a kill tests no recovery.

    The append takes 0.4 s, as real tools are slow: a runtime hidden from the
    rendezvous waits for no reply, and would otherwise finish its work in less
    than the 5 ms.
    """
    scenario = tmp_path / "slow-demo.toml"
    scenario.write_text(DEMO.read_text() + "\n[world.state.latency]\nappend = 0.4\n")
    runs = tmp_path / "runs"
    result = killpoint("run", scenario, "--workload", f"{workload_command('starts_slowly.py')} {runtime}",
                       "--kill-at", "@0.005", "--runs-dir", runs, "--keep-all", "--json", tmp_path / "r.json")
    assert result.exit_code == 0, result.out + result.err
    (run,) = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert run["outcome"] == "passed" and run["incarnations"][0]["killed_at"] == "@0.0050", run
    assert worked(run, runs / "run-00000"), run


def test_a_timed_kill_counted_from_a_crash_point_lands_in_the_stretch_after_it(killpoint, tmp_path):
    """c4's append takes 0.4 s: 0.2 s after c4:after_started, however long the work before it took, is inside it."""
    scenario = tmp_path / "slow-demo.toml"
    scenario.write_text(DEMO.read_text() + "\n[world.state.latency]\nappend = 0.4\n")
    result = killpoint("run", scenario, "--kill-at", "c4:after_started@0.2", "--json", tmp_path / "r.json")
    assert result.exit_code == 0, result.out + result.err
    (run,) = json.loads((tmp_path / "r.json").read_text())["runs"]
    first = run["incarnations"][0]
    assert run["outcome"] == "passed" and first["killed_at"] == "c4:after_started@0.2000", run
    assert first["points"][-1] == "c4:after_started", run


def test_the_reference_runtime_passes_every_timed_kill_drawn_between_crash_points(killpoint, tmp_path):
    """No false alarm: each kill counted from a crash point of the crash-free run; how many land is timing's
    (docs/cli.md has the figures), but none that lands breaks a rule of a correct runtime."""
    result = killpoint("run", DEMO, "--timed", "--runs", "20", "--seed", "5", "--json", tmp_path / "r.json")
    assert result.exit_code == 0, result.out + result.err
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert len(runs) == 20 and {run["outcome"] for run in runs} <= {"passed", "untested"}, runs
    golden_points = set(json.loads((tmp_path / "r.json").read_text())["golden"]["points"])
    for run in runs:
        (kill,) = run["schedule"]
        point, _, seconds = kill.rpartition("@")
        assert point in golden_points and float(seconds) >= 0, kill
        landed = run["incarnations"][0]["killed_at"]
        assert landed in (None, kill) and (run["outcome"] == "passed") == (landed is not None), run


def test_a_timed_kill_in_a_tool_services_latency_leaves_no_effect_and_the_recovery_redoes_it(killpoint, tmp_path):
    """The standalone runtime calls the harness's tool service, which outlives the kill: a call still waiting out
    its tool's latency when the kill comes acts on nothing, as a tool's own process killed there would not, so
    the append is verified absent and done once, in the recovery."""
    scenario = tmp_path / "slow-demo.toml"
    scenario.write_text(DEMO.read_text() + "\n[world.state.latency]\nappend = 0.4\n")
    runs = tmp_path / "runs"
    result = killpoint("run", scenario, "--workload", f"{{python}} {ROOT / 'scenarios' / 'standalone' / 'runtime.py'}",
                       "--kill-at", "c4:after_started@0.2", "--runs-dir", runs, "--keep-all",
                       "--json", tmp_path / "r.json")
    assert result.exit_code == 0, result.out + result.err
    (run,) = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert run["outcome"] == "passed" and run["incarnations"][0]["killed_at"] == "c4:after_started@0.2000", run
    ledger = [json.loads(line) for line in (runs / "run-00000" / "ledger.jsonl").read_text().splitlines()]
    c4 = [(line.get("invoked") or line.get("effect") or line.get("probe") or "killed", line.get("incarnation"))
          for line in ledger if line.get("call") == "c4" or "killed" in line]
    assert c4 == [("append", 0), ("killed", None), ("effect_present", 1), ("append", 1), ("file_appended", 1)], c4
