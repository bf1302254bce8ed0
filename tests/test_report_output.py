"""What a session prints, on literal outcomes (no process runs here): one summary that the terminal,
JSON, HTML and JUnit outputs all render, untested and unknown runs counted apart from passes and
failures in every output, a coverage map whose headings are explained, and reproduce lines whose
command runs as printed."""

from __future__ import annotations

import io
import json
import re
import shlex
import subprocess
import sys
from html import unescape
from pathlib import Path
from xml.etree import ElementTree

import pytest

from killpoint import protocol as p
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.model import AfterDelay, AtPoint, Finding, GoldenRun, Incarnation, Job, Kill, RunOutcome, Verdict
from killpoint.harness.reporting.html_report import render_html
from killpoint.harness.reporting.progress import SessionPrinter
from killpoint.harness.reporting.report import (COVERAGE_HEADINGS, HEADING_PREFIXES, describe_failure, failure_message,
                                                killpoint_command, repro_command, summary_line, summary_rows,
                                                write_coverage, write_json_report, write_timeline)
from killpoint.harness.reporting.summary import NO_REASON, Summary, summarise
from tests.helpers import DEMO

pytest_plugins = ["pytester"]

SCENARIO = load_scenario(DEMO)
GOLDEN_POINTS = tuple(f"{call}:{point}" for call in SCENARIO.plan.call_ids for point in p.CALL_POINTS)
GOLDEN = GoldenRun(Path("runs/golden"), {}, {}, GOLDEN_POINTS, 0.25)
BROKEN = Finding("interrupted-action", "c4 was RUNNING at the kill; the rules say VERIFY, but it decided RETRY",
                 call="c4", kill="c4:after_effect", evidence=("journal.jsonl:11: {}",))


def outcome(index: int, kill: Kill, verdict: Verdict, *incarnations: Incarnation) -> RunOutcome:
    return RunOutcome(Job(index, (kill,)), Path(f"runs/run-{index:05d}"), verdict, incarnations, f"kp1.token{index}", 0.1)


def killed(number: int, at: str) -> Incarnation:
    points = GOLDEN_POINTS[:GOLDEN_POINTS.index(at) + 1] if number == 0 else ("after_decisions", at)
    return Incarnation(number, 100 + number, None, killed_at=at, points=points)


def finished(number: int) -> Incarnation:
    return Incarnation(number, 100 + number, 0, points=GOLDEN_POINTS)


def passed(index: int) -> RunOutcome:
    """A kill landed at c3:after_effect and recovery was judged correct."""
    return outcome(index, AtPoint("after_effect", "c3"), Verdict(True),
                   killed(0, "c3:after_effect"), finished(1))


def untested(index: int) -> RunOutcome:
    """A timed kill whose moment never came: the workload finished first, so nothing was tested."""
    return outcome(index, AfterDelay(5.0), Verdict(True), finished(0))


def failed(index: int) -> RunOutcome:
    return outcome(index, AtPoint("after_effect", "c4"), Verdict(False, (BROKEN,)),
                   killed(0, "c4:after_effect"), finished(1))


def hung(index: int) -> RunOutcome:
    """Killed at the timeout before its scheduled kill: a liveness failure, and no scheduled kill landed."""
    return outcome(index, AtPoint("after_effect", "c6"), Verdict(False, (Finding("liveness", "hung"),)),
                   Incarnation(0, 100, None, killed_at="timeout", timed_out=True, points=GOLDEN_POINTS[:3]))


def killed_twice(index: int) -> RunOutcome:
    """Killed at c3:after_effect, then again during recovery, after its decisions."""
    return RunOutcome(Job(index, (AtPoint("after_effect", "c3"), AtPoint("after_decisions"))),
                      Path(f"runs/run-{index:05d}"), Verdict(True),
                      (killed(0, "c3:after_effect"), killed(1, "after_decisions"), finished(2)), f"kp1.token{index}", 0.1)


def unjudged(index: int) -> RunOutcome:
    return outcome(index, AtPoint("after_started", "c2"), Verdict(None, error="checker error: KeyError('op')"),
                   killed(0, "c2:after_started"), finished(1))


MIXED = [passed(0), untested(1), failed(2), hung(3), unjudged(4), killed_twice(5)]
RESULTS = ["passed", "untested", "failed", "failed", "unknown", "passed"]


def test_a_pass_needs_a_kill_that_landed():
    assert [run.result for run in MIXED] == RESULTS
    assert [run.killed_any for run in MIXED] == [True, False, True, False, True, True]
    assert hung(3).unreached == ("c6:after_effect",), "a kill at the timeout is not the scheduled kill"


def test_summary_line_counts_untested_runs_apart_from_passes():
    runs = [passed(index) for index in range(5)] + [untested(index) for index in range(5, 20)]
    assert summary_line(summarise(GOLDEN, runs, 2.0)).startswith(
        "20 runs: 5 passed, 0 failed, 15 untested (no kill landed) in 2.00s")
    assert summary_line(summarise(GOLDEN, MIXED, 1.0)).startswith(
        "6 runs: 2 passed, 2 failed, 1 unknown, 1 untested (no kill landed) (interrupted-action: 1, liveness: 1)")


def test_normal_mode_prints_the_untested_count_in_the_table_and_a_legend_for_the_coverage_headings():
    out = io.StringIO()
    with SessionPrinter(out, mode="normal", progress_bar=False) as printer:
        printer.finish(SCENARIO, GOLDEN, MIXED, summarise(GOLDEN, MIXED, 1.0), show_coverage=True)
    text = out.getvalue()
    assert re.search(r"runs\s+│ 6: 2 passed, 2 failed, 1 unknown, 1 untested \(no kill landed\)", text)
    coverage_map = text[:text.index("killpoint summary")].splitlines()
    assert coverage_map[:2] == [
        "coverage: kills that landed at each crash point, per incarnation. b_ is before_, a_ is after_",
        "  (b_started: before_started); N+M: N kills at the point, M timed or event kills just after it"]
    for point, heading in COVERAGE_HEADINGS.items():
        long = dict((short, long) for long, short in HEADING_PREFIXES)
        short, _, rest = heading.partition("_")
        assert long[short + "_"] + rest == point
    assert coverage_map[3].split() == ["b_started", "a_started", "a_effect", "b_finished", "a_finished", "a_decisions",
                                       "a_verify"]
    assert "coverage, incarnation 1 (after 1 kill):" in coverage_map
    assert max(map(len, coverage_map)) <= 100


def test_a_timed_kill_counts_just_after_the_last_point_announced():
    timed = outcome(6, AfterDelay(0.05), Verdict(True),
                    Incarnation(0, 100, None, killed_at="@0.0500", points=GOLDEN_POINTS[:7]), finished(1))
    out = io.StringIO()
    write_coverage(SCENARIO, GOLDEN, [passed(0), timed, killed_twice(5)], out)
    rows = {line.split()[0]: line.split()[1:] for line in out.getvalue().splitlines()[4:7]}
    assert rows == {"c2": [".", "+1", ".", ".", ".", ".", "."], "c3": [".", ".", "2", ".", ".", ".", "."],
                    "coverage,": ["incarnation", "1", "(after", "1", "kill):"]}


def test_summary_rows_say_in_words_what_was_killed_during_recovery():
    rows = dict(summary_rows(summarise(GOLDEN, MIXED, 1.0)))
    assert rows["coverage"] == ("3 of 30 crash points of the crash-free run killed in the first incarnation; "
                                "1 crash point killed in incarnation 1, the restart after 1 kill")
    assert rows["schedules"] == "6 distinct, 5 kills landed"


def test_machine_mode_gives_each_run_its_outcome_and_the_summary_its_untested_count():
    out = io.StringIO()
    with SessionPrinter(out, mode="machine") as printer:
        for run in MIXED:
            printer.on_outcome(run)
        printer.finish(SCENARIO, GOLDEN, MIXED, summarise(GOLDEN, MIXED, 1.0))
    *runs, summary = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [run["outcome"] for run in runs] == RESULTS
    assert (summary["kind"], summary["passed"], summary["failed"], summary["unknown"], summary["untested"]) == (
        "summary", 2, 2, 1, 1)
    assert summary["reproduce"] == f"{killpoint_command()} repro kp1.token2"


def test_json_report_has_one_summary_with_untested_and_each_run_its_outcome(tmp_path):
    path = tmp_path / "report.json"
    write_json_report(path, SCENARIO, GOLDEN, MIXED, summarise(GOLDEN, MIXED, 1.0))
    report = json.loads(path.read_text())
    assert {key: report["summary"][key] for key in ("runs", "passed", "failed", "unknown", "untested")} == {
        "runs": 6, "passed": 2, "failed": 2, "unknown": 1, "untested": 1}
    assert [run["outcome"] for run in report["runs"]] == RESULTS
    assert report["summary"]["kills"] == 5, "the kill at the timeout is not counted as a kill that landed"


def test_html_names_untested_runs_and_properties_without_rule_numbers():
    html = render_html(SCENARIO, GOLDEN, [passed(0), untested(1)], summarise(GOLDEN, [passed(0), untested(1)], 1.0))
    assert "1 of 2 runs recovered correctly from a kill; 1 untested" in html and "all 2 runs recovered" not in html
    assert "1 untested (no kill landed)" in html
    failing = render_html(SCENARIO, GOLDEN, [passed(0), failed(1)], summarise(GOLDEN, [passed(0), failed(1)], 1.0))
    assert "interrupted-action" in failing and "an operation RUNNING at the kill gets RETRY or VERIFY" in failing
    assert not re.search(r"rule \d", failing)


# "2 passed, 2 failed, 1 unknown, 1 untested": the counts as the terminal, HTML and JUnit outputs word them.
COUNTS = re.compile(r"(\d+) passed, (\d+) failed(?:, (\d+) unknown)?(?:, (\d+) untested)?")


def counts_in(text: str) -> tuple[int, ...]:
    match = COUNTS.search(text)
    assert match, f"no counts in {text!r}"
    return tuple(int(count or 0) for count in match.groups())


def outputs(pytester: pytest.Pytester, runs: list[RunOutcome], summary: Summary) -> dict[str, str]:
    """The session as each output renders it: terminal (quiet), JSON report, HTML report (as text: unescaped),
    and the failure JUnit XML records."""
    terminal = io.StringIO()
    with SessionPrinter(terminal, mode="quiet") as printer:
        for run in runs:
            printer.on_outcome(run)
        printer.finish(SCENARIO, GOLDEN, runs, summary)
    json_report = pytester.path / "report.json"
    write_json_report(json_report, SCENARIO, GOLDEN, runs, summary)
    # The plugin fails a test with this message (pytest.fail, no traceback); JUnit XML is pytest's own.
    message = failure_message(SCENARIO, "literal runs", runs, summary, pytester.path / "report.html")
    pytester.makepyfile(test_session=f"import pytest\n\ndef test_session():\n    pytest.fail({message!r}, pytrace=False)\n")
    junit = pytester.path / "junit.xml"
    pytester.runpytest_inprocess("-p", "no:killpoint", "-p", "no:cacheprovider", f"--junitxml={junit}",
                                 "-W", "ignore::pytest.PytestAssertRewriteWarning")
    (failure,) = ElementTree.parse(junit).getroot().iter("failure")
    return {"terminal": terminal.getvalue(), "json": json_report.read_text(),
            "html": unescape(render_html(SCENARIO, GOLDEN, runs, summary)), "junit": failure.text or ""}


def test_the_terminal_json_html_and_junit_outputs_render_one_summary(pytester):
    summary = summarise(GOLDEN, MIXED, 1.0)
    assert (summary.runs, summary.passed, summary.failed, summary.unknown, summary.untested) == (6, 2, 2, 1, 1)
    assert (summary.kills, summary.schedules, summary.later_kill_never_came) == (5, 6, 0)
    assert summary.properties == {"interrupted-action": 1, "liveness": 1}
    assert summary.unknown_reasons == {"checker error: KeyError('op')": 1}
    assert (summary.coverage.golden_points, summary.coverage.first_kill_points) == (30, 3)
    assert summary.coverage.points_per_incarnation == {"0": 3, "1": 1}
    assert (summary.golden_seconds, summary.seconds) == (0.25, 1.0)

    rendered = outputs(pytester, MIXED, summary)
    for name in ("terminal", "html", "junit"):
        assert counts_in(rendered[name]) == (2, 2, 1, 1), name
        assert "UNKNOWN run 4" in rendered[name] and "checker error: KeyError('op')" in rendered[name], name
    for name in ("terminal", "junit"):
        assert "1 untested (no kill landed) (interrupted-action: 1, liveness: 1) in 1.00s" in rendered[name], name
    assert json.loads(rendered["json"])["summary"] == summary.to_json()
    for name in ("html", "junit"):
        assert "2 of 6 runs broke the recovery rules; 1 runs could not be judged (unknown)" in rendered[name], name
    assert "interrupted-action</span></th><td>broken in 1 run(s)" in rendered["html"]
    assert "could not be judged: checker error: KeyError('op') (1)" in rendered["html"]


def test_an_unknown_run_is_unknown_with_its_reason_in_every_output_never_a_failure(pytester, tmp_path):
    silent = outcome(7, AtPoint("after_started", "c3"), Verdict(None), killed(0, "c3:after_started"), finished(1))
    runs = [passed(0), unjudged(4), silent]
    summary = summarise(GOLDEN, runs, 1.0)
    assert (summary.passed, summary.failed, summary.unknown) == (1, 0, 2)
    assert summary.unknown_reasons == {"checker error: KeyError('op')": 1, NO_REASON: 1}

    rendered = outputs(pytester, runs, summary)
    assert json.loads(rendered["json"])["summary"]["unknown_reasons"] == summary.unknown_reasons
    assert [run["outcome"] for run in json.loads(rendered["json"])["runs"]] == ["passed", "unknown", "unknown"]
    for name in ("terminal", "html", "junit"):
        assert counts_in(rendered[name]) == (1, 0, 2, 0), name
        assert "UNKNOWN run 7: kill at c3:after_started" in rendered[name] and NO_REASON in rendered[name], name
        assert "FAIL run" not in rendered[name] and "broke" not in rendered[name], name
    assert "UNKNOWN: 2 of 3 runs could not be judged (unknown)" in rendered["html"]
    assert "FAILED" not in rendered["html"] and "Unknown runs (2)" in rendered["html"]
    assert "rgba(220,38,38" not in rendered["html"], "the heat map marks only runs that broke a rule red"
    assert rendered["junit"].startswith("killpoint: demo (literal runs): 2 of 3 runs could not be judged (unknown)\n")

    timeline = io.StringIO()
    write_timeline(silent, timeline)
    assert timeline.getvalue().endswith(f"verdict: UNKNOWN ({NO_REASON})\n")


@pytest.mark.integration  # runs the printed command
def test_every_reproduce_line_starts_with_the_command_that_runs_here():
    block = io.StringIO()
    describe_failure(failed(2), block)
    assert f"  reproduce: {killpoint_command()} repro kp1.token2\n" in block.getvalue()
    assert repro_command(failed(2)) == f"{killpoint_command()} repro kp1.token2"
    printed = subprocess.run([*shlex.split(killpoint_command()), "repro", "--help"], capture_output=True, text=True)
    assert printed.returncode == 0 and "usage: killpoint repro" in printed.stdout


@pytest.fixture
def installation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake installation: an interpreter and a killpoint script side by side, nothing on PATH."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "killpoint"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.setenv("PATH", "/nonexistent")
    return bin_dir


def test_killpoint_command_is_the_bare_name_only_when_path_finds_this_installation(installation, monkeypatch):
    elsewhere = installation.parent.parent / "other" / "bin"
    elsewhere.mkdir(parents=True)
    (elsewhere / "killpoint").write_text("#!/bin/sh\n")
    (elsewhere / "killpoint").chmod(0o755)
    monkeypatch.setenv("PATH", str(elsewhere))
    monkeypatch.chdir(installation.parent.parent)
    assert killpoint_command() == "venv/bin/killpoint"
    monkeypatch.setenv("PATH", f"{installation}:{elsewhere}")
    assert killpoint_command() == "killpoint"


def test_killpoint_command_is_relative_inside_the_cwd_and_absolute_outside(installation, monkeypatch, tmp_path):
    monkeypatch.chdir(installation.parent)
    assert killpoint_command() == "bin/killpoint"
    monkeypatch.chdir(installation)
    assert killpoint_command() == "./killpoint"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    monkeypatch.chdir(outside)
    assert killpoint_command() == str(installation / "killpoint")


def test_killpoint_command_falls_back_to_the_module_without_a_script(installation):
    (installation / "killpoint").unlink()
    assert killpoint_command() == f"{installation / 'python'} -m killpoint"


def test_failure_blocks_print_in_run_order_however_the_runs_finish():
    """Runs finish out of order under -j; their blocks once printed 16, 17, 18, 22, 21, 23."""
    runs = {index: outcome(index, AtPoint("c4", p.AFTER_EFFECT), Verdict(False, (BROKEN,)),
                           killed(0, "c4:after_effect"), finished(1)) for index in range(4)}
    out = io.StringIO()
    with SessionPrinter(out, mode="quiet") as printer:
        batches = printer.track(lambda golden: (batch for batch in [[run.job for run in runs.values()]]))
        for _ in batches(GOLDEN):
            for index in (1, 0, 3):
                printer.on_outcome(runs[index])
            assert re.findall(r"FAIL run (\d+)", out.getvalue()) == ["0", "1"]  # run 3 waits for run 2
            printer.on_outcome(runs[2])
    assert re.findall(r"FAIL run (\d+)", out.getvalue()) == ["0", "1", "2", "3"]


def test_a_session_with_no_bar_prints_a_progress_line_every_few_seconds():
    """Under CI, or piped, a long session once printed nothing between its header and its summary."""
    now = [0.0]
    out = io.StringIO()
    with SessionPrinter(out, mode="normal", progress_bar=False, clock=lambda: now[0]) as printer:
        batches = printer.track(lambda golden: (batch for batch in [[Job(index, ()) for index in range(10)]]))
        for _ in batches(GOLDEN):
            for index in range(10):
                now[0] += 1.5
                printer.on_outcome(passed(index))
    assert out.getvalue().splitlines() == [
        "progress: 4 of 10 schedules run, 0 failing, 0 unknown, 0.7 schedules/s, 6s",
        "progress: 8 of 10 schedules run, 0 failing, 0 unknown, 0.7 schedules/s, 12s"]
    quiet = io.StringIO()
    with SessionPrinter(quiet, mode="quiet", clock=lambda: now[0]) as printer:
        now[0] += 60
        printer.on_outcome(passed(0))
    assert quiet.getvalue() == ""
