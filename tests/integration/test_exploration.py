"""Exploration on real processes: depth-k, exact random replay, timed and event kills,
torn tails, catalogue drift, and hunting with shrinking. Each new mutant is caught
only by the new means."""

from __future__ import annotations

import importlib
import json

import pytest

from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.repro.token import ReproToken
from tests.helpers import DEMO, mutant_workload


def report(path) -> dict:
    return json.loads(path.read_text())


def test_depth_two_grows_from_reached_points_and_the_reference_passes(killpoint, tmp_path):
    result = killpoint("run", DEMO, "--exhaustive", "--depth", "2", "-j", "2", "--json", tmp_path / "r.json")
    assert result.exit_code == 0, result.out[-2000:]
    runs = report(tmp_path / "r.json")["runs"]
    depth_two = [run for run in runs if len(run["schedule"]) == 2]
    assert len(runs) == 30 + len(depth_two) and len(depth_two) > 400
    # Every second kill is at a point its first incarnation really reached, and really landed.
    assert all(run["incarnations"][1]["killed_at"] == run["schedule"][1] for run in depth_two)
    assert "coverage, incarnation 1" in result.out and "a_decisions" in result.out


def test_second_crash_bug_needs_depth_two(killpoint):
    workload = mutant_workload("second_crash_skips")
    assert killpoint("run", DEMO, "--exhaustive", "--workload", workload).exit_code == 0
    caught = killpoint("run", DEMO, "--workload", workload, "--kill-at", "c4:after_effect", "--kill-at", "c4:after_verify")
    assert caught.exit_code == 1 and "[interrupted-action] c4" in caught.out


def test_torn_tail_bug_needs_torn_tails(killpoint):
    workload = mutant_workload("strict_journal_reader")
    assert killpoint("run", DEMO, "--exhaustive", "--workload", workload).exit_code == 0
    caught = killpoint("run", DEMO, "--exhaustive", "--torn-tail", "--workload", workload)
    assert caught.exit_code == 1 and "[liveness]" in caught.out and "JSONDecodeError" in caught.out


def test_torn_tail_keeps_both_journals_and_the_reference_tolerates_it(killpoint, tmp_path):
    result = killpoint("run", DEMO, "--kill-at", "c3:after_finished/torn:400", "--runs-dir", tmp_path / "runs",
                       "--keep-all")
    assert result.exit_code == 0, result.out
    run = tmp_path / "runs" / "run-00000"
    original = (run / "journal-at-kill-0.jsonl").read_bytes()
    torn = (run / "journal-at-kill-0.torn.jsonl").read_bytes()
    assert original.endswith(b"\n") and not torn.endswith(b"\n") and original.startswith(torn)
    assert original.splitlines()[-1] == b'{"kind":"finished","op":"demo-op3","status":"SUCCEEDED"}'


def test_catalogue_drift_bug_needs_drift(killpoint):
    workload = mutant_workload("current_catalogue")
    assert killpoint("run", DEMO, "--exhaustive", "--workload", workload).exit_code == 0
    assert killpoint("run", DEMO, "--exhaustive", "--drift", "append=READ_ONLY").exit_code == 0
    caught = killpoint("run", DEMO, "--exhaustive", "--drift", "append=READ_ONLY", "--workload", workload)
    assert caught.exit_code == 1
    assert "append is NON_IDEMPOTENT (the class its started record snapshots, from the catalogue given to incarnation 0)" in caught.out


SILENT_MUTANT = "{python} -m killpoint.scenarios.silent killpoint.scenarios.mutants.retry_non_idempotent"


@pytest.fixture
def slow_demo(tmp_path):
    """The demo with slow append and ui_tap calls (0.4 s each), as real tools are slow.

    An uninstrumented runtime is killed from outside, some milliseconds after
    the event; the in-process fakes finish faster than that, so without the
    delay the kill lands after the call it was aimed at.
    """
    path = tmp_path / "slow-demo.toml"
    path.write_text(DEMO.read_text() + "\n[world.state.latency]\nappend = 0.4\nui_tap = 0.4\n")
    return path


def test_uninstrumented_runtime_is_refused_crash_points_but_caught_by_event_kills(killpoint, slow_demo):
    assert killpoint("run", slow_demo, "--exhaustive", "--workload", SILENT_MUTANT).exit_code == 2
    caught = killpoint("run", slow_demo, "--kill-on", "journal:started:c4", "--workload", SILENT_MUTANT)
    assert caught.exit_code == 1, caught.out[-1500:]
    assert "[interrupted-action] c4" in caught.out


def test_uninstrumented_runtime_caught_by_event_kill_with_latency(killpoint, tmp_path, slow_demo):
    caught = killpoint("run", slow_demo, "--kill-on", "journal:started:c5", "--workload", SILENT_MUTANT,
                       "--json", tmp_path / "r.json")
    assert caught.exit_code == 1 and "[interrupted-action] c5" in caught.out
    assert "event-to-kill latency median" in caught.out
    first = report(tmp_path / "r.json")["runs"][0]["incarnations"][0]
    assert first["killed_at"] == "journal:started:c5" and 0 < first["kill_latency_s"] < 0.4


def test_uninstrumented_runtime_caught_by_timed_kills(killpoint, slow_demo):
    """Most of the slow demo's time is spent inside c4 and c5, so seeded delays land there."""
    caught = killpoint("run", slow_demo, "--timed", "--runs", "6", "--seed", "3", "--workload", SILENT_MUTANT)
    assert caught.exit_code == 1, caught.out[-1500:]
    assert "[interrupted-action] c" in caught.out


def test_scenario_latency_must_be_seconds_per_tool(killpoint, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(DEMO.read_text() + '\n[world.state.latency]\nappend = "slow"\n')
    result = killpoint("run", path)
    assert result.exit_code == 2 and "world.state.latency.append" in result.err


def test_reference_passes_random_runs_with_torn_tails_and_timed_kills(killpoint):
    result = killpoint("run", DEMO, "--random", "120", "--seed", "42", "--torn-tail", "--timed", "-j", "2")
    assert result.exit_code == 0, result.out[-3000:]


def test_same_token_twenty_times_gives_the_same_run(killpoint, tmp_path):
    killpoint("run", DEMO, "--random", "1", "--seed", "1234", "--torn-tail", "--json", tmp_path / "r.json")
    run = report(tmp_path / "r.json")["runs"][0]
    assert run["seed"] is not None
    token = ReproToken.decode(run["token"])
    sequences, verdicts = set(), set()
    for attempt in range(20):
        runs_dir = tmp_path / f"repro-{attempt}"
        result = killpoint("repro", run["token"], "--runs-dir", runs_dir)
        ledger = (runs_dir / "run-00000" / "ledger.jsonl").read_text().splitlines()
        sequences.add(tuple(json.dumps({k: v for k, v in json.loads(line).items() if k != "pid"}) for line in ledger))
        verdicts.add((result.exit_code, "verdict: PASS" in result.out))
    assert len(sequences) == 1 and len(verdicts) == 1
    assert f"kill at {' then '.join(token.schedule)}" in result.out


HUNTED = ["replays_succeeded", "retry_non_idempotent", "finished_before_tool", "second_crash_skips",
          "strict_journal_reader", "current_catalogue"]


@pytest.mark.parametrize("mutant", HUNTED)
def test_hunt_shrinks_each_mutant_to_at_most_three_calls(killpoint, tmp_path, mutant):
    result = killpoint("hunt", DEMO, "--workload", mutant_workload(mutant), "--examples", "300",
                       "--out", tmp_path, "--seed", "1")
    assert result.exit_code == 1, result.out
    scenario = load_scenario(tmp_path / "hunt-found.toml")
    assert 1 <= len(scenario.plan.calls) <= 3
    expected = importlib.import_module(f"killpoint.scenarios.mutants.{mutant}").CAUGHT_BY
    assert f"[{expected}]" in result.out
    token = result.out.strip().splitlines()[-1].split()[-1]
    repro = killpoint("repro", token)
    assert repro.exit_code == 1 and f"[{expected}]" in repro.out
