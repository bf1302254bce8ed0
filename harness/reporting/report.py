"""What people read: failing runs with their evidence, a summary, a timeline, JSON.

Every failing run's block ends with the one command that reproduces it, written
so that it runs where it is printed (``killpoint_command``). Every figure is
rendered from the session's one ``Summary`` (``reporting/summary``); a run the
checker could not judge is labelled UNKNOWN with its reason, never PASS or FAIL.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from killpoint import protocol as p
from killpoint.harness.frontends._command import \
    killpoint_command  # noqa: F401  (re-exported: the CLI and tests print with it)
from killpoint.harness.judge.checker import judged_black_box
from killpoint.harness.judge.evidence import read_evidence
from killpoint.harness.model import AFTER_SUFFIX, GoldenRun, RunOutcome, Scenario, Verdict
from killpoint.harness.reporting.coverage import BEFORE_FIRST_POINT, coverage
from killpoint.harness.reporting.summary import Summary, unknown_reason
from killpoint.harness.repro.safety import repro_line
from killpoint.harness.schedules.schedule import format_schedule, point_reached

if TYPE_CHECKING:
    from killpoint.harness.frontends.spec import SessionSpec

# Runs described in full in the plugin's failure message; the HTML report has them all.
MAX_DESCRIBED = 3


def repro_command(outcome: RunOutcome) -> str:
    """The line that reproduces ``outcome``, with ``--run-embedded-command`` when its token carries its own command."""
    return repro_line(outcome.token)


def verdict_label(verdict: Verdict) -> str:
    """PASS, FAIL or UNKNOWN: how every output names a verdict."""
    return "PASS" if verdict.valid else "FAIL" if verdict.valid is False else "UNKNOWN"


def verdict_reason(verdict: Verdict) -> str | None:
    """The line said under a verdict's label: an unknown's reason (never missing), else the checker's error if any."""
    return unknown_reason(verdict) if verdict.valid is None else verdict.error


def describe_failure(outcome: RunOutcome, out: TextIO) -> None:
    """The block printed for a run that broke a rule (or could not be judged)."""
    verdict = outcome.verdict
    out.write(f"{verdict_label(verdict)} run {outcome.job.index}: kill at {format_schedule(outcome.job.schedule)}\n")
    if reason := verdict_reason(verdict):
        out.write(f"  {reason}\n")
    for finding in verdict.findings:
        where = " ".join(part for part in (finding.call, f"(kill {finding.kill})" if finding.kill else None) if part)
        out.write(f"  [{finding.property}] {where + ': ' if where else ''}{finding.message}\n")
        out.writelines(f"      {quoted}\n" for quoted in finding.evidence)
    out.writelines(f"  note: {note}\n" for note in verdict.notes)
    out.write(f"  evidence: {outcome.run_dir}\n")
    out.write(f"  reproduce: {repro_command(outcome)}\n")


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


def _describe_unknown(summary: Summary) -> str:
    """"2 run(s) could not be judged: REASON (2)"; the first three reasons, most frequent first."""
    reasons = list(summary.unknown_reasons.items())
    text = f"{summary.unknown} run(s) could not be judged: " + "; ".join(
        f"{reason} ({count})" for reason, count in reasons[:3])
    return text + (f"; {len(reasons) - 3} other reason(s)" if len(reasons) > 3 else "")


def summary_line(summary: Summary) -> str:
    """The session in one line, last in every mode but ``machine``."""
    text = f"{summary.runs} runs: {_describe_results(summary)}"
    if summary.later_kill_never_came:
        text += f", {summary.later_kill_never_came} where a later kill never came"
    if summary.properties:
        text += " (" + ", ".join(f"{prop}: {count}" for prop, count in summary.properties.items()) + ")"
    if latency := _describe_latency(summary):
        text += f"; {latency}"
    return f"{text} in {summary.seconds:.2f}s ({summary.schedules_per_second:.1f} schedules/s)"


def verdict_headline(summary: Summary) -> str:
    """What went wrong, in one clause: runs that broke the rules and runs that could not be judged, apart
    (empty when every run passed or was untested)."""
    parts = [f"{summary.failed} of {summary.runs} runs broke the recovery rules"] if summary.failed else []
    if summary.unknown:
        parts.append(f"{summary.unknown}{'' if parts else f' of {summary.runs}'} runs could not be judged (unknown)")
    return "; ".join(parts)


def summary_rows(summary: Summary) -> list[tuple[str, str]]:
    """(label, text) rows of the summary; a broken property's label is its name in brackets."""
    cover = summary.coverage
    recoveries = "; ".join(
        f"{count} crash point{'s' if count != 1 else ''} killed in incarnation {number}, the restart after "
        f"{number} kill{'s' if int(number) > 1 else ''}" for number, count in cover.points_per_incarnation.items()
        if number != "0")
    latency = _describe_latency(summary)
    return [
        ("runs", f"{summary.runs}: {_describe_results(summary)}"),
        ("schedules", f"{summary.schedules} distinct, {summary.kills} kills landed"
                      + (f"; in {summary.later_kill_never_came} run(s) a later kill never came"
                         if summary.later_kill_never_came else "")),
        *((f"[{prop}]", f"broken in {count} run(s)") for prop, count in summary.properties.items()),
        *((("unknown", _describe_unknown(summary)),) if summary.unknown else ()),
        ("coverage", f"{cover.first_kill_points} of {cover.golden_points} crash points of the crash-free run "
                     f"killed in the first incarnation" + (f"; {recoveries}" if recoveries else "")),
        *((("kill latency", latency),) if latency else ()),
        ("time", f"{summary.seconds:.2f}s ({summary.schedules_per_second:.1f} schedules/s; "
                 f"golden run {summary.golden_seconds:.2f}s)"),
    ]


def judged_from(scenario: Scenario) -> str:
    """What a session's verdicts were judged from: killpoint's journal, or black-box from the runtime's own store."""
    return judged_black_box(scenario.journal) if scenario.journal is not None else "judged from killpoint's journal"


# What a JSON report says it is first; ``killpoint merge`` reads no file that does not say it.
REPORT_FORMAT = "killpoint-report/1"


def session_fields(spec: SessionSpec) -> dict[str, object]:
    """What a JSON report says of the session that ran: what ``killpoint merge`` checks its shards agree on.

    ``session_digest`` covers every choice that decides which schedules run and how they are judged (the
    mode with all its parameters, the fault every kill carries, drift, the incarnation timeout), so two
    shards whose descriptions read alike but were run with different options are still told apart. The
    seed is the one a mode draws from (random and timed); an exhaustive session draws nothing, so its
    shards need not agree on a seed nobody used.
    """
    choices = f"{spec.mode!r}; {spec.every_kill!r}; drift {spec.drift!r}; timeout {spec.scenario.timeout_s!r}"
    return {
        "session": spec.mode.describe() + str(spec.every_kill) + (f", drift {spec.drift}" if spec.drift else ""),
        "session_digest": hashlib.sha256(choices.encode()).hexdigest()[:12],
        "seed": getattr(spec.mode, "seed", None),
        "backend": spec.describe_backend(),
        "shard": list(spec.shard) if spec.shard else None,
    }


def write_json_report(path: Path, scenario: Scenario, golden: GoldenRun, outcomes: list[RunOutcome],
                      summary: Summary, session: dict[str, object] | None = None) -> None:
    """The whole session as JSON; ``session`` (``session_fields``) says how it was run, for ``killpoint merge``.

    It carries what merging shards needs besides the runs: the workload, plan and catalogue themselves (their
    digests are checked against them), so a merged report and its HTML are built from the reports alone.
    """
    report = {
        "format": REPORT_FORMAT,
        "scenario": scenario.name,
        "origin": scenario.origin,
        "plan_digest": scenario.plan.digest,
        "catalogue_digest": scenario.catalogue_digest,
        "judged": judged_from(scenario),
        **(session or {}),
        "workload": list(scenario.workload),
        "plan": scenario.plan.to_json(),
        "catalogue": scenario.catalogue.to_protocol(),
        "golden": {"run_dir": str(golden.run_dir), "seconds": golden.seconds, "points": list(golden.points)},
        "summary": summary.to_json(),
        "runs": [],
    }
    # The runs are written one a line as they are encoded: a 30,000-run report built whole as one string took
    # the harness from 340 to 860 MiB. Everything before them is indented as before; the file is one JSON value.
    head = json.dumps(report, indent=1)
    closing = "[]\n}"
    with path.open("w") as stream:
        stream.write(head.removesuffix(closing) + "[")
        for number, outcome in enumerate(outcomes):
            stream.write(("," if number else "") + "\n  " + json.dumps(outcome.to_json()))
        stream.write("\n " * bool(outcomes) + "]\n}\n")


def failure_message(scenario: Scenario, described: str, outcomes: list[RunOutcome], summary: Summary,
                    html_report: Path) -> str:
    """A failing session as the pytest plugin reports it (the text JUnit XML carries).

    Every run that failed or could not be judged, the first few in full, then the
    summary line, the HTML report, and the first such run's repro command last.
    """
    attention = [outcome for outcome in outcomes if not outcome.verdict.valid]
    text = io.StringIO()
    judged = f", {judged_from(scenario)}" if scenario.journal is not None else ""
    text.write(f"killpoint: {scenario.name} ({described}{judged}): {verdict_headline(summary)}\n")
    for outcome in attention[:MAX_DESCRIBED]:
        describe_failure(outcome, text)
    for outcome in attention[MAX_DESCRIBED:]:
        verdict = outcome.verdict
        why = ", ".join(verdict.properties) if verdict.valid is False else unknown_reason(verdict)
        text.write(f"{verdict_label(verdict)} run {outcome.job.index}: [{why}] {repro_command(outcome)}\n")
    text.write(summary_line(summary) + "\n")
    text.write(f"HTML report: {html_report}\nreproduce the first failure with:\n{repro_command(attention[0])}")
    return text.getvalue()


# A call's crash points in the order a call reaches them. A runtime speaking the protocol announces
# BEFORE_STARTED..AFTER_FINISHED; a framework step (killpoint.frameworks) announces STEP_POINTS instead, around
# the after_effect both kinds share (the step, or the fake tool, sends it once the effect happened); an agent
# judged at its network seams gets SEAM_POINTS, announced for it by the services the harness runs.
CALL_ORDER = (p.BEFORE_STARTED, p.AFTER_STARTED, p.STEP_ENTERED, p.AFTER_EFFECT, p.STEP_RETURNED, p.STEP_SAVING,
              p.STEP_RECORDED, p.BEFORE_FINISHED, p.AFTER_FINISHED, *p.SEAM_POINTS)
# step_saving is not of the step kind's fixed columns: only a framework with a saver of its own (LangGraph's
# checkpointer) reaches it, so it is shown where the crash-free run reached it, not missed where it did not (DBOS);
# likewise store_result, reached only by an agent whose scenario names its store, and tool_opened, only by a real
# server behind the recording proxy (where fanotify is allowed).
POINT_KINDS = (p.CALL_POINTS, (*(point for point in p.STEP_POINTS if point != p.STEP_SAVING), p.AFTER_EFFECT),
               tuple(point for point in p.SEAM_POINTS if point not in (p.STORE_RESULT, p.TOOL_OPENED)))
# Short headings keep calls x points within 100 columns; the map's first lines are their legend.
HEADING_PREFIXES = (("before_", "b_"), ("after_", "a_"), ("step_", "s_"), ("model_", "m_"), ("tool_", "t_"),
                    ("store_", "st_"))
COVERAGE_HEADINGS = {point: next((short + point.removeprefix(long) for long, short in HEADING_PREFIXES
                                  if point.startswith(long)), point) for point in p.ALL_POINTS}


def call_points(golden: GoldenRun) -> tuple[str, ...]:
    """A call's crash points as the reports show them: every point of each kind the crash-free run announced.

    A kind counts as announced when the run reached a point of its own (not the shared after_effect); all
    of its points are then shown, so one the runtime never reached is seen missing rather than left out.
    A protocol runtime gets CALL_POINTS, a framework workload its step points, an agent judged at its network
    seams the seam points (``harness/agents/seams.py``), never another kind's.
    """
    reached = {point.rpartition(":")[2] for point in golden.points}
    shown = reached.union(*(kind for kind in POINT_KINDS if reached & (set(kind) - {p.AFTER_EFFECT})))
    return tuple(point for point in CALL_ORDER if point in shown)


def coverage_points(golden: GoldenRun) -> tuple[str, ...]:
    """The coverage columns of both reports: a call's points (``call_points``), then the recovery points (an agent
    judged at its seams announces none: its points with no call are the final answer's model request and reply)."""
    columns = call_points(golden)
    return columns if _at_seams(columns) else (*columns, *p.RECOVERY_POINTS)


def no_call_row(golden: GoldenRun) -> str:
    """What the map's row of points with no call is: the recovery's, or an agent's final answer's."""
    return "(answer)" if _at_seams(call_points(golden)) else "(recovery)"


def _at_seams(columns: tuple[str, ...]) -> bool:
    return any(point in p.SEAM_POINTS for point in columns)


def coverage_legend(columns: tuple[str, ...]) -> str:
    """What the map's short headings stand for, naming only the prefixes its columns use."""
    prefixes = ", ".join(f"{short} is {long}" for long, short in HEADING_PREFIXES
                         if any(point.startswith(long) for point in columns))
    return (f"coverage: kills that landed at each crash point, per incarnation. {prefixes}\n"
            f"  ({COVERAGE_HEADINGS[columns[0]]}: {columns[0]}); N+M: N kills at the point, M timed or event kills "
            "just after it\n")


def write_coverage(scenario: Scenario, golden: GoldenRun, outcomes: list[RunOutcome], out: TextIO) -> None:
    """Calls x points, per incarnation: how many kills really landed there, under a legend of the headings."""
    covered = coverage(outcomes)
    columns, no_call = coverage_points(golden), no_call_row(golden)
    width = max(10, *(len(call) for call in scenario.plan.call_ids))
    out.write(coverage_legend(columns))
    for incarnation, counts in sorted(covered.items()):
        started = f"after {incarnation} kill{'s' if incarnation > 1 else ''}" if incarnation else "before any kill"
        out.write(f"coverage, incarnation {incarnation} ({started}):\n")
        out.write(f"  {'':<{width}}" + "".join(f"{COVERAGE_HEADINGS[point]:>12}" for point in columns) + "\n")
        for call in [*scenario.plan.call_ids, None]:
            cells = [_coverage_cell(counts, point_reached(point, call)) for point in columns]
            if any(cells):
                out.write(f"  {call or no_call:<{width}}" + "".join(f"{cell or '.':>12}" for cell in cells) + "\n")
        if counts.get(BEFORE_FIRST_POINT):
            out.write(f"  {counts[BEFORE_FIRST_POINT]} timed or event kill(s) before the first crash point\n")
    reached = set(golden.points)
    never = [f"{call}:{point}" for call in scenario.plan.call_ids for point in call_points(golden)
             if f"{call}:{point}" not in reached]
    if never:
        out.write(f"  never reached by the crash-free run (not counted): {', '.join(never)}\n")


def _coverage_cell(counts: dict[str, int], point: str) -> str:
    """"N", "N+M" or "+M": kills at the point, and timed or event kills after it (``coverage.coverage``'s "point+")."""
    at, after = counts.get(point, 0), counts.get(point + AFTER_SUFFIX, 0)
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
            kind = next(key for key in p.TOOL_LEDGER_KINDS if key in record)
            out.write(f"  ledger:    {kind:<7} {record.get('call')} {record[kind]}\n")
    verdict = outcome.verdict
    reason = unknown_reason(verdict) if verdict.valid is None else None
    out.write(f"verdict: {verdict_label(verdict)}" + (f" ({reason})" if reason else "") + "\n")


def _points_by_call(points: tuple[str, ...]) -> str:
    grouped: dict[str, list[str]] = {}
    for point in points:
        call, _, name = point.rpartition(":")
        grouped.setdefault(call or "-", []).append(name)
    return "; ".join(f"{call}: {' '.join(names)}" if call != "-" else " ".join(names) for call, names in grouped.items())
