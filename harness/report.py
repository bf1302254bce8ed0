"""What people read: failing runs with their evidence, a summary, a timeline, JSON.

Every failing run's block ends with the one command that reproduces it, written
so that it runs where it is printed (``killpoint_command``). Every summary is
rendered from one ``Summary`` value.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from killpoint import protocol as p
from killpoint.harness._command import killpoint_command  # noqa: F401  (re-exported: the CLI and tests print with it)
from killpoint.harness.evidence import read_evidence
from killpoint.harness.explore import coverage
from killpoint.harness.model import GoldenRun
from killpoint.harness.repro_safety import repro_line
from killpoint.harness.scenario import Scenario
from killpoint.harness.schedule import format_schedule
from killpoint.harness.session import RESULTS, RunOutcome, outcome_to_json


def repro_command(outcome: RunOutcome) -> str:
    """The line that reproduces ``outcome``, with ``--run-embedded-command`` when its token carries its own command."""
    return repro_line(outcome.token)


def describe_failure(outcome: RunOutcome, out: TextIO) -> None:
    """The block printed for a run that broke a rule (or could not be judged)."""
    verdict = outcome.verdict
    label = "FAIL" if verdict.valid is False else "UNKNOWN"
    out.write(f"{label} run {outcome.job.index}: kill at {format_schedule(outcome.job.schedule)}\n")
    if verdict.error:
        out.write(f"  {verdict.error}\n")
    for finding in verdict.findings:
        where = " ".join(part for part in (finding.call, f"(kill {finding.kill})" if finding.kill else None) if part)
        out.write(f"  [{finding.property}] {where + ': ' if where else ''}{finding.message}\n")
        out.writelines(f"      {quoted}\n" for quoted in finding.evidence)
    out.writelines(f"  note: {note}\n" for note in verdict.notes)
    out.write(f"  evidence: {outcome.run_dir}\n")
    out.write(f"  reproduce: {repro_command(outcome)}\n")


@dataclass(frozen=True)
class Summary:
    """A session's figures, counted once: the summary line, the summary table, the JSON report,
    the machine-mode summary and the HTML report all render this value.

    Runs are counted by ``RunOutcome.result``: "passed" only when a kill landed
    and recovery was judged correct; a valid run where no kill landed is "untested".
    """

    runs: int
    passed: int
    failed: int
    unknown: int
    untested: int
    later_kill_never_came: int  # runs where a kill landed but a later kill of the schedule never came
    schedules: int  # distinct ones
    kills: int  # scheduled kills that landed (not kills at the timeout)
    properties: dict[str, int]  # failing runs per broken property, most first
    kill_latency_ms: dict[str, float] | None  # event kills: median and max from the event to the confirmed kill
    seconds: float


def summarise(outcomes: list[RunOutcome], seconds: float) -> Summary:
    results = Counter(outcome.result for outcome in outcomes)
    latencies = sorted(incarnation.kill_latency_s * 1000 for outcome in outcomes for incarnation in outcome.incarnations
                       if incarnation.kill_latency_s is not None)
    return Summary(
        runs=len(outcomes), **{result: results[result] for result in RESULTS},
        later_kill_never_came=sum(1 for outcome in outcomes if outcome.killed_any and outcome.unreached),
        schedules=len({tuple(map(str, outcome.job.schedule)) for outcome in outcomes}),
        kills=sum(len(outcome.kills_landed) for outcome in outcomes),
        properties=dict(Counter(prop for outcome in outcomes for prop in outcome.verdict.properties).most_common()),
        kill_latency_ms={"median": round(latencies[len(latencies) // 2], 3), "max": round(latencies[-1], 3)}
        if latencies else None,
        seconds=round(seconds, 3),
    )


def _describe_results(summary: Summary) -> str:
    """"5 passed, 0 failed, 15 untested (no kill landed)": unknown and untested only when there are any."""
    text = f"{summary.passed} passed, {summary.failed} failed"
    if summary.unknown:
        text += f", {summary.unknown} unknown"
    if summary.untested:
        text += f", {summary.untested} untested (no kill landed)"
    return text


def _describe_latency(summary: Summary) -> str | None:
    latency = summary.kill_latency_ms
    return f"event-to-kill latency median {latency['median']:.2f} ms, max {latency['max']:.2f} ms" if latency else None


def _rate(summary: Summary) -> float:
    """Schedules per second."""
    return summary.runs / summary.seconds if summary.seconds > 0 else 0.0


def summary_line(outcomes: list[RunOutcome], seconds: float) -> str:
    """The session in one line, last in every mode but ``machine``."""
    summary = summarise(outcomes, seconds)
    text = f"{summary.runs} runs: {_describe_results(summary)}"
    if summary.later_kill_never_came:
        text += f", {summary.later_kill_never_came} where a later kill never came"
    if summary.properties:
        text += " (" + ", ".join(f"{prop}: {count}" for prop, count in summary.properties.items()) + ")"
    if latency := _describe_latency(summary):
        text += f"; {latency}"
    return f"{text} in {summary.seconds:.2f}s ({_rate(summary):.1f} schedules/s)"


def summary_rows(summary: Summary, cover: dict[str, Any], golden_seconds: float) -> list[tuple[str, str]]:
    """(label, text) rows of the summary; a broken property's label is its name in brackets."""
    recoveries = "; ".join(
        f"{count} crash point{'s' if count != 1 else ''} killed in incarnation {number}, the restart after "
        f"{number} kill{'s' if int(number) > 1 else ''}" for number, count in cover["points_per_incarnation"].items()
        if number != "0")
    latency = _describe_latency(summary)
    return [
        ("runs", f"{summary.runs}: {_describe_results(summary)}"),
        ("schedules", f"{summary.schedules} distinct, {summary.kills} kills landed"
                      + (f"; in {summary.later_kill_never_came} run(s) a later kill never came"
                         if summary.later_kill_never_came else "")),
        *((f"[{prop}]", f"broken in {count} run(s)") for prop, count in summary.properties.items()),
        ("coverage", f"{cover['first_kill_points']} of {cover['golden_points']} crash points of the crash-free run "
                     f"killed in the first incarnation" + (f"; {recoveries}" if recoveries else "")),
        *((("kill latency", latency),) if latency else ()),
        ("time", f"{summary.seconds:.2f}s ({_rate(summary):.1f} schedules/s; golden run {golden_seconds:.2f}s)"),
    ]


def coverage_figures(golden: GoldenRun, outcomes: list[RunOutcome]) -> dict[str, Any]:
    """How much of the crash-free run's points the first kills covered, and crash points killed per incarnation."""
    covered = coverage(outcomes)
    return {
        "golden_points": len(golden.points),
        "first_kill_points": len(set(covered.get(0, {})) & set(golden.points)),
        "points_per_incarnation": {str(number): len(points) for number, points in sorted(covered.items())},
    }


def summary_json(golden: GoldenRun, outcomes: list[RunOutcome], seconds: float) -> dict[str, Any]:
    """The summary and coverage as JSON: the JSON report's ``summary``, and machine mode's summary line."""
    return {**asdict(summarise(outcomes, seconds)), "coverage": coverage_figures(golden, outcomes)}


def write_json_report(path: Path, scenario: Scenario, golden: GoldenRun, outcomes: list[RunOutcome], seconds: float) -> None:
    report = {
        "scenario": scenario.name,
        "origin": scenario.origin,
        "plan_digest": scenario.plan.digest,
        "golden": {"run_dir": str(golden.run_dir), "seconds": golden.seconds, "points": list(golden.points)},
        "summary": summary_json(golden, outcomes, seconds),
        "runs": [outcome_to_json(outcome) for outcome in outcomes],
    }
    path.write_text(json.dumps(report, indent=1))


COVERAGE_COLUMNS = (*p.CALL_POINTS, *p.RECOVERY_POINTS)
# Short headings keep calls x points within 100 columns; the map's first lines are their legend.
COVERAGE_HEADINGS = {point: point.replace("before_", "b_").replace("after_", "a_") for point in COVERAGE_COLUMNS}
COVERAGE_LEGEND = ("coverage: kills that landed at each crash point, per incarnation. b_ is before_, a_ is after_\n"
                   "  (b_started: before_started); N+M: N kills at the point, M timed or event kills just after it\n")


def write_coverage(scenario: Scenario, golden: GoldenRun, outcomes: list[RunOutcome], out: TextIO) -> None:
    """Calls x points, per incarnation: how many kills really landed there, under a legend of the headings."""
    covered = coverage(outcomes)
    width = max(10, *(len(call) for call in scenario.plan.call_ids))
    out.write(COVERAGE_LEGEND)
    for incarnation, counts in sorted(covered.items()):
        started = f"after {incarnation} kill{'s' if incarnation > 1 else ''}" if incarnation else "before any kill"
        out.write(f"coverage, incarnation {incarnation} ({started}):\n")
        out.write(f"  {'':<{width}}" + "".join(f"{COVERAGE_HEADINGS[point]:>12}" for point in COVERAGE_COLUMNS) + "\n")
        for call in [*scenario.plan.call_ids, None]:
            cells = [_coverage_cell(counts, point if call is None else f"{call}:{point}") for point in COVERAGE_COLUMNS]
            if any(cells):
                out.write(f"  {call or '(recovery)':<{width}}" + "".join(f"{cell or '.':>12}" for cell in cells) + "\n")
        if counts.get("start+"):
            out.write(f"  {counts['start+']} timed or event kill(s) before the first crash point\n")
    reached = set(golden.points)
    never = [f"{call}:{point}" for call in scenario.plan.call_ids for point in p.CALL_POINTS
             if f"{call}:{point}" not in reached]
    if never:
        out.write(f"  never reached by the crash-free run (not counted): {', '.join(never)}\n")


def _coverage_cell(counts: dict[str, int], point: str) -> str:
    """"N", "N+M" or "+M": kills at the point, and timed or event kills after it (``explore.coverage``'s "point+")."""
    at, after = counts.get(point, 0), counts.get(point + "+", 0)
    return f"{at or ''}{f'+{after}' if after else ''}"


def write_timeline(outcome: RunOutcome, out: TextIO) -> None:
    """Incarnation by incarnation: calls x points reached, the kill, decisions, ledger records."""
    evidence = read_evidence(outcome.run_dir)
    segments = evidence.ledger_segments()
    for number, incarnation in enumerate(outcome.incarnations):
        ending = (f"KILLED at {incarnation.killed_at}" if incarnation.killed_at
                  else "hung, killed at the timeout" if incarnation.timed_out
                  else f"exited {incarnation.exit_code}")
        out.write(f"incarnation {incarnation.number} (pid {incarnation.pid}, {incarnation.seconds:.3f}s): {ending}\n")
        out.write(f"  points:    {_points_by_call(incarnation.points) or '(none)'}\n")
        decisions = [line for line in evidence.journal_records(p.DECISION) if line.get("incarnation") == incarnation.number]
        if decisions:
            out.write("  decisions: " + ", ".join(
                f"{line.get('call')} {line.get('found')}->{line.get('action')}" for line in decisions) + "\n")
        for line in segments[number] if number < len(segments) else []:
            record = line.record
            kind = next(key for key in ("invoked", "effect", "probe") if key in record)
            out.write(f"  ledger:    {kind:<7} {record.get('call')} {record[kind]}\n")
    verdict = outcome.verdict
    out.write("verdict: " + ("PASS" if verdict.valid else "FAIL" if verdict.valid is False else "UNKNOWN") + "\n")


def _points_by_call(points: tuple[str, ...]) -> str:
    grouped: dict[str, list[str]] = {}
    for point in points:
        call, _, name = point.rpartition(":")
        grouped.setdefault(call or "-", []).append(name)
    return "; ".join(f"{call}: {' '.join(names)}" if call != "-" else " ".join(names) for call, names in grouped.items())
