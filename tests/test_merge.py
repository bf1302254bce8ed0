"""`killpoint merge` on literal shard reports (no process runs here): the shards of a session merge into
its summary, coverage map and verdict, a missing shard leaves it not established, and every report that
is not a shard of the same session is refused with its file, field and fix (exit 2, never a traceback)."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from killpoint import protocol as p
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.frontends.cli import main
from killpoint.harness.frontends.spec import build_spec
from killpoint.harness.model import AtPoint, Finding, GoldenRun, Incarnation, Job, Plan, RunOutcome, Scenario, Verdict
from killpoint.harness.reporting.merge import merge_reports
from killpoint.harness.reporting.report import session_fields, write_coverage, write_json_report
from killpoint.harness.reporting.summary import summarise
from killpoint.harness.schedules.explore import shard_of
from tests.helpers import DEMO

SCENARIO = load_scenario(DEMO)
POINTS = tuple(f"{call}:{point}" for call in SCENARIO.plan.call_ids for point in p.CALL_POINTS)
GOLDEN = GoldenRun(Path("runs/golden"), {}, {}, POINTS, 0.25)
SHARDS = 3
BROKEN = Finding("interrupted-action", "c4 was RUNNING at the kill; the rules say VERIFY, but it decided RETRY",
                 call="c4", kill="c4:after_effect", evidence=("journal.jsonl:11: {}",))
# Depth 2 numbers a second level's runs from where the first level ended in every shard alike, so two
# shards hold runs of the same index (explore.ExhaustiveMode): merging must keep both.
SECOND_LEVEL_INDEX = len(POINTS)


def kill_at(point: str) -> AtPoint:
    call, _, name = point.rpartition(":")
    return AtPoint(name, call or None)


def run(index: int, *points: str, failing: bool = False) -> RunOutcome:
    """A run killed at each of ``points`` in turn, then recovered (correctly unless ``failing``)."""
    incarnations = [Incarnation(number, 100 + number, None, killed_at=point,
                                points=POINTS[:POINTS.index(point) + 1]) for number, point in enumerate(points)]
    incarnations.append(Incarnation(len(points), 100 + len(points), 0, points=POINTS))
    verdict = Verdict(False, (BROKEN,)) if failing else Verdict(True)
    return RunOutcome(Job(index, tuple(kill_at(point) for point in points)), Path(f"runs/run-{index:05d}"), verdict,
                      tuple(incarnations), f"kp1.token{index}", 0.1)


def session(*, failing: str | None = None) -> list[RunOutcome]:
    """Every first kill, and in each shard one schedule of two kills numbered like its first sibling shard's."""
    first = [run(index, point, failing=point == failing) for index, point in enumerate(POINTS)]
    second = [run(SECOND_LEVEL_INDEX, root, POINTS[-1]) for root in
              [next(point for point in POINTS if shard_of(Job(0, (kill_at(point),)), SHARDS) == shard)
               for shard in range(1, SHARDS + 1)]]
    return first + second


def spec_fields(shard: str | None = None, **choices: Any) -> dict[str, object]:
    choices = choices or {"exhaustive": True}
    return session_fields(build_spec(SCENARIO, shard=shard, runs_dir=Path("runs"), **choices))


def write(path: Path, outcomes: list[RunOutcome], fields: dict[str, object], *, scenario: Scenario = SCENARIO,
          golden: GoldenRun = GOLDEN) -> Path:
    write_json_report(path, scenario, golden, outcomes, summarise(golden, outcomes, 1.0), fields)
    return path


def shard_reports(folder: Path, outcomes: list[RunOutcome], shards: tuple[int, ...] = (1, 2, 3)) -> list[Path]:
    return [write(folder / f"shard-{shard}.json",
                  [outcome for outcome in outcomes if shard_of(outcome.job, SHARDS) == shard],
                  spec_fields(f"{shard}/{SHARDS}")) for shard in shards]


def merge(*arguments: object, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(["merge", *map(str, arguments)], out=out)
    return code, out.getvalue(), capsys.readouterr().err


def edited(path: Path, change: Any) -> Path:
    """The report at ``path`` after ``change`` (a function of its JSON) edited it in place."""
    report = json.loads(path.read_text())
    change(report)
    path.write_text(json.dumps(report))
    return path


def coverage_map(outcomes: list[RunOutcome]) -> str:
    text = io.StringIO()
    write_coverage(SCENARIO, GOLDEN, outcomes, text)
    return text.getvalue()


def test_the_shards_merge_into_the_unsharded_sessions_summary_coverage_and_runs(tmp_path):
    outcomes = session()
    merged = merge_reports(shard_reports(tmp_path, outcomes))
    assert merged.summary == summarise(GOLDEN, outcomes, 1.0)
    assert coverage_map(list(merged.outcomes)) == coverage_map(outcomes)
    assert sorted((outcome.job.index, str(outcome.job.schedule)) for outcome in merged.outcomes) == sorted(
        (outcome.job.index, str(outcome.job.schedule)) for outcome in outcomes)
    assert sum(outcome.job.index == SECOND_LEVEL_INDEX for outcome in merged.outcomes) == SHARDS
    assert merged.missing == () and merged.incomplete() == []


def test_merge_exits_as_run_would_and_writes_one_json_and_html_report(tmp_path, capsys):
    reports = shard_reports(tmp_path, session())
    code, out, _ = merge(*reports, "--json", tmp_path / "merged.json", "--html", tmp_path / "merged.html", capsys=capsys)
    assert code == 0, out
    assert "killpoint merge: demo: exhaustive to depth 1; 3 of 3 shard(s)" in out
    assert "coverage, incarnation 1 (after 1 kill)" in out and "33 runs: 33 passed, 0 failed" in out
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert merged["summary"]["runs"] == len(merged["runs"]) == 33
    assert merged["merged"] == {"shards": 3, "given": [1, 2, 3], "missing": [], "reports": list(map(str, reports))}
    assert "PASSED: all 33 runs recovered correctly" in (tmp_path / "merged.html").read_text()


def test_a_failing_run_in_any_shard_fails_the_merge_with_its_repro_line(tmp_path, capsys):
    code, out, _ = merge(*shard_reports(tmp_path, session(failing="c4:after_effect")), "-q", capsys=capsys)
    assert code == 1
    assert "FAIL run 17: kill at c4:after_effect" in out and "[interrupted-action]" in out
    assert "first failure reproduces with:" in out and "kp1.token17" in out


@pytest.mark.parametrize("failing", [False, True])
def test_a_missing_shard_is_not_established_and_still_fails_on_a_failure_it_holds(tmp_path, capsys, failing):
    broken = "c4:after_effect"
    missing = shard_of(Job(0, (kill_at(broken),)), SHARDS) % SHARDS + 1  # a shard other than the failing run's
    present = tuple(shard for shard in range(1, SHARDS + 1) if shard != missing)
    code, out, err = merge(*shard_reports(tmp_path, session(failing=broken if failing else None), present),
                           capsys=capsys)
    assert code == (1 if failing else 3), out + err
    assert f"the merged session is incomplete: shard(s) {missing} of 3 missing" in err


def test_shards_whose_crash_free_runs_differ_are_not_established(tmp_path, capsys):
    outcomes = session()
    reports = shard_reports(tmp_path, outcomes)
    write(reports[1], [outcome for outcome in outcomes if shard_of(outcome.job, SHARDS) == 2], spec_fields("2/3"),
          golden=replace(GOLDEN, points=POINTS[:-1]))  # its summary counts its own crash-free run's points
    code, _, err = merge(*reports, capsys=capsys)
    assert code == 3 and "its crash-free run reached other crash points" in err and "not deterministic" in err


def test_a_session_run_whole_merges_to_itself(tmp_path, capsys):
    # Run whole, a session numbers its second level on from its first: each run has its own index.
    outcomes = [replace(outcome, job=replace(outcome.job, index=index)) for index, outcome in enumerate(session())]
    code, out, _ = merge(write(tmp_path / "full.json", outcomes, spec_fields()), capsys=capsys)
    assert code == 0 and "1 of 1 shard(s)" in out and "33 runs: 33 passed" in out


def test_not_enough_coverage_across_the_shards_is_not_established(tmp_path, capsys):
    reports = shard_reports(tmp_path, session()[:10])
    code, _, err = merge(*reports, "--min-coverage", "50", capsys=capsys)
    assert code == 3 and "coverage 33.3% is below the minimum of 50%" in err


def refused(capsys: pytest.CaptureFixture[str], *arguments: object) -> str:
    code, out, err = merge(*arguments, capsys=capsys)
    assert code == 2, out + err
    assert "Traceback" not in err
    return err


def test_reports_of_other_sessions_are_refused_naming_the_file_the_field_and_the_fix(tmp_path, capsys):
    outcomes = session()
    first, second, third = shard_reports(tmp_path, outcomes)
    other_name = write(tmp_path / "other-name.json", json_runs(second), spec_fields("2/3"),
                       scenario=replace(SCENARIO, name="other"))
    err = refused(capsys, first, other_name, third)
    assert f"{other_name}: scenario is 'other', but {first}'s is 'demo'; merge the shards of one scenario" in err
    plan = Plan("other", tuple(replace(call, args={"changed": True}) if call.call_id == "c1" else call
                               for call in SCENARIO.plan.calls))
    other_plan = write(tmp_path / "other-plan.json", json_runs(second), spec_fields("2/3"),
                       scenario=replace(SCENARIO, plan=plan))
    err = refused(capsys, first, other_plan)
    assert f"{other_plan}: plan_digest is" in err and "the plan changed between the shards" in err
    depth_2 = write(tmp_path / "depth-2.json", json_runs(second), spec_fields("2/3", exhaustive=True, depth=2))
    err = refused(capsys, first, depth_2)
    assert "session_digest is" in err and "run every shard with the same flags, all but --shard" in err
    two_shards = write(tmp_path / "of-two.json", [], spec_fields("2/2"))
    assert "shards is 2, but" in (err := refused(capsys, first, two_shards)) and "the same N in --shard K/N" in err
    forkserver, subprocess = (write(tmp_path / f"{backend}.json", [], spec_fields("2/3", exhaustive=True,
                                                                                   backend=backend))
                              for backend in ("forkserver", "subprocess"))
    assert "backend is 'backend subprocess', but" in refused(capsys, forkserver, subprocess)


def json_runs(path: Path) -> list[RunOutcome]:
    return list(merge_reports([path]).outcomes)


def test_shards_drawn_from_different_seeds_are_refused(tmp_path, capsys):
    seeds = [write(tmp_path / f"seed-{seed}.json", [], spec_fields(f"{shard}/2", random=5, seed=seed))
             for shard, seed in ((1, 1), (2, 2))]
    err = refused(capsys, *seeds)
    assert f"{seeds[1]}: seed is 2, but {seeds[0]}'s is 1; give every shard the same --seed" in err


def test_one_shard_given_twice_is_refused(tmp_path, capsys):
    first, second, _ = shard_reports(tmp_path, session())
    copy = tmp_path / "copy-of-2.json"
    copy.write_text(second.read_text())
    err = refused(capsys, first, second, copy)
    assert f"{second} and {copy} are both shard 2 of 3: give each shard's report once" in err


@pytest.mark.parametrize(("content", "said"), [
    ("{", "not JSON"),
    ("[]", "holds list, not a report"),
    ('{"name": "x"}', "format: missing: this is no killpoint report"),
    ('{"scenario": "demo", "summary": {}, "runs": []}', "written by a killpoint that predates `killpoint merge`"),
    ('{"format": "killpoint-report/0"}', "but this killpoint reads 'killpoint-report/1'"),
])
def test_a_file_that_is_no_killpoint_report_is_refused_saying_why(tmp_path, capsys, content, said):
    path = tmp_path / "report.json"
    path.write_text(content)
    err = refused(capsys, path)
    assert str(path) in err and said in err


def test_a_missing_file_and_an_out_of_range_coverage_are_refused(tmp_path, capsys):
    assert "cannot read a report (No such file or directory); give the JSON reports the shards wrote" in refused(
        capsys, tmp_path / "absent.json")
    (report,) = shard_reports(tmp_path, session(), (1,))
    assert "--min-coverage 120.0: give a percentage from 0 to 100" in refused(capsys, report, "--min-coverage", "120")


@pytest.mark.parametrize(("change", "said"), [
    (lambda report: report.pop("golden"), "golden: missing"),
    (lambda report: report.pop("seed"), "seed: missing"),
    (lambda report: report.update(shard=[4, 3]), "shard: [4, 3] is not [K, N] with 1 <= K <= N"),
    (lambda report: report["golden"].update(points="c1"), "golden.points: str"),
    (lambda report: report["runs"][0].pop("rules"), "runs[0] (run 7): rules: missing"),
    (lambda report: report["runs"][0].update(outcome="failed"),
     "runs[0] (run 7): outcome: says failed, but its verdict and incarnations make it passed"),
    (lambda report: report["runs"][0].update(schedule=["c9:nowhere"]), "runs[0] (run 7): schedule: 'c9:nowhere' is no kill"),
    (lambda report: report["plan"]["calls"][0].update(tool="other"), "plan_digest: the report's plan hashes to"),
    (lambda report: report["catalogue"]["tools"].update(append="IDEMPOTENT"), "catalogue_digest: the report's"),
    (lambda report: report.update(merged={}), "already a merge of shards; merge the shards' own reports"),
    (lambda report: report["runs"][0].update(shared_incarnations=5),
     "runs[0] (run 7): shared_incarnations: 5 is not a whole number from 0 to the run's 2 incarnations"),
])
def test_a_report_missing_a_field_or_changed_since_it_was_written_is_refused(tmp_path, capsys, change, said):
    (report,) = shard_reports(tmp_path, session(), (1,))  # its first run is run 7, the first kill of shard 1
    err = refused(capsys, edited(report, change))
    assert str(report) in err and said in err


def test_a_run_in_a_shard_its_first_kill_does_not_belong_to_is_refused(tmp_path, capsys):
    first, second, _ = shard_reports(tmp_path, session())
    stray = json.loads(second.read_text())["runs"][0]
    err = refused(capsys, edited(first, lambda report: report["runs"].append(stray)))
    assert "is shard 2's of 3, not this report's shard 1" in err


def test_a_runs_shared_incarnations_survive_the_merge_and_a_report_made_before_them_reads_as_none(tmp_path):
    outcomes = session()
    grown = outcomes[-1]
    outcomes[-1] = replace(grown, shared=1)  # its first incarnation restored from its parent's saved state
    first, second, third = shard_reports(tmp_path, outcomes)
    merged = {outcome.job.index: outcome.shared for outcome in merge_reports([first, second, third]).outcomes}
    assert merged[grown.job.index] == 1 and sum(merged.values()) == 1
    older = edited(third, lambda report: [run.pop("shared_incarnations") for run in report["runs"]])
    assert all(outcome.shared == 0 for outcome in json_runs(older))
