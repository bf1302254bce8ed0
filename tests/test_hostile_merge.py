"""Forged shard reports: ``killpoint merge`` judges the runs a report holds, so a report that contradicts itself
is refused (exit 2, the file, the run and the field, and the fix: rerun the shard), never merged into a pass.

A failing run turned "passed" (its verdict edited, its findings left), a run repeated thousands of times, a
negative or astronomic index, duration or shard count, a summary its runs do not add up to, and a run index
two reports of one drawn session both claim: each once merged (exit 0 over printed findings, thousands of runs,
a loop over 10**12 shards).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from killpoint.harness.schedules.explore import shard_of
from tests.test_hostile_inputs import refused
from tests.test_merge import POINTS, SHARDS, edited, run, session, shard_reports, spec_fields, write

pytestmark = pytest.mark.hostile

FAILING = "c4:after_effect"
REPEATS = 2_000  # the audit repeated a run 20,000 times; 2,000 is the same attack in a tenth of the time
READING_REPEATS_S = 60  # each repeat is read and checked: a second, or many on a busy machine
REFUSED = "changed since killpoint wrote it, so its runs cannot be trusted; rerun the shard"


def failing_shard(folder: Path) -> tuple[list[Path], Path, int]:
    """The reports of the three shards, the one holding the failing run, and where that run is in it."""
    reports = shard_reports(folder, session(failing=FAILING))
    for report in reports:
        runs = json.loads(report.read_text())["runs"]
        for position, entry in enumerate(runs):
            if entry["outcome"] == "failed":
                return reports, report, position
    raise AssertionError("no failing run")


def forged(change: Any) -> Any:
    """``change`` applied to the failing run of a report's JSON."""
    def apply(report: dict[str, Any]) -> None:
        change(next(entry for entry in report["runs"] if entry["findings"]))
    return apply


def turned_passed(entry: dict[str, Any]) -> None:
    entry.update(valid=True, outcome="passed")


def turned_passed_without_findings(entry: dict[str, Any]) -> None:
    entry.update(valid=True, outcome="passed", findings=[])


def test_a_failing_run_edited_to_pass_with_its_findings_left_is_refused(tmp_path):
    reports, report, position = failing_shard(tmp_path)
    edited(report, forged(turned_passed))
    err = refused("merge", *reports)
    assert f"{report}: {REFUSED}" in err
    assert f"runs[{position}] (run 17): valid: true, but it has 1 finding(s): a run fails exactly when it has " \
           f"findings" in err


def test_a_failing_run_edited_to_pass_whose_rules_still_say_it_failed_is_refused(tmp_path):
    reports, report, position = failing_shard(tmp_path)

    def with_rules(entry: dict[str, Any]) -> None:
        turned_passed_without_findings(entry)
        entry["rules"] = {"interrupted-action": {"status": "failed", "reason": None},
                          "liveness": {"status": "passed", "reason": None}}

    edited(report, forged(with_rules))
    err = refused("merge", *reports)
    assert (f"runs[{position}] (run 17): valid: true, but its rules (interrupted-action failed, liveness passed) make it "
            f"false") in err


def test_a_run_repeated_thousands_of_times_is_refused_once_not_merged_as_thousands_of_runs(tmp_path):
    reports = shard_reports(tmp_path, session())
    edited(reports[0], lambda data: data["runs"].extend([data["runs"][0]] * REPEATS))
    err = refused("merge", *reports, seconds=READING_REPEATS_S)
    assert f"run 7: {REPEATS + 1} runs have this index (runs[0], runs[9], runs[10], ...); a session numbers each " \
           f"of its runs once" in err
    assert len(err.splitlines()) == 2  # said once, not once a repeat


@pytest.mark.parametrize(("change", "said"), [
    (lambda data: data["runs"][0].update(index=-1), "runs[0] (run -1): index: -1 is not a whole number from 0 to"),
    (lambda data: data["runs"][0].update(index=10**15), "index: 1000000000000000 is not a whole number from 0 to"),
    (lambda data: data["runs"][0].update(seconds=-0.5), "runs[0] (run 7): seconds: -0.5 is not a number of seconds"),
    (lambda data: data["runs"][0].update(seconds=1e300), "seconds: 1e+300 is not a number of seconds from 0 to"),
    (lambda data: data["runs"][0]["incarnations"][1].update(seconds=-3),
     "runs[0] (run 7): incarnations[1].seconds: -3 is not a number of seconds"),
    (lambda data: data["runs"][0]["incarnations"][0].update(kill_latency_s=-1.0),
     "incarnations[0].kill_latency_s: -1.0 is not a number of seconds"),
    (lambda data: data["golden"].update(seconds=-1), "golden.seconds: -1 is not a number of seconds"),
    (lambda data: data["summary"].update(seconds=-1), "summary.seconds: -1 is not a number of seconds"),
    (lambda data: data["summary"].update(runs=5), "summary.runs: says 5, but its runs make it 9"),
    (lambda data: data["summary"].update(failed=1, passed=8), "summary.passed: says 8, but its runs make it 9"),
    (lambda data: data["summary"].pop("kills"), "summary.kills: missing, but its runs make it 10"),
])
def test_a_negative_astronomic_or_missing_figure_is_refused_naming_its_field(tmp_path, change, said):
    reports = shard_reports(tmp_path, session())  # shard 1: 9 runs, all passed, 10 kills
    edited(reports[0], change)
    err = refused("merge", *reports)
    assert str(reports[0]) in err and said in err


def test_a_shard_of_a_trillion_shards_is_refused_not_counted_to(tmp_path):
    # The shards missing are counted one by one: a trillion of them was a hang.
    report = edited(write(tmp_path / "empty.json", [], spec_fields(f"1/{SHARDS}")),
                    lambda data: data.update(shard=[1, 10**12]))
    err = refused("merge", report)
    assert f"{report}: not a killpoint report" in err
    assert "shard: [1, 1000000000000] is not [K, N] with 1 <= K <= N <= 10000, as --shard K/N writes it" in err


def test_a_run_index_two_reports_of_one_drawn_session_both_claim_is_refused(tmp_path):
    # A random session numbers its runs 0..N-1 across all its shards: a run of one shard's number in another
    # shard's report is a run that never ran there.
    outcomes = [run(index, point) for index, point in enumerate(POINTS)]
    shards = [[outcome for outcome in outcomes if shard_of(outcome.job, SHARDS) == shard] for shard in (1, 2, 3)]
    taken = shards[0][0].job.index
    shards[1][0] = run(taken, str(shards[1][0].job.schedule[0]))
    reports = [write(tmp_path / f"shard-{shard}.json", runs, spec_fields(f"{shard}/{SHARDS}", random=33, seed=7))
               for shard, runs in zip((1, 2, 3), shards)]
    err = refused("merge", *reports)
    assert (f"{reports[1]}: run {taken} is also in {reports[0]}: a session drawn from a seed numbers each of its "
            f"runs once") in err
