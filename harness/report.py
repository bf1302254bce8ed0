"""What people read: failing runs with their evidence, a summary, a timeline, JSON.

Every failing run's block ends with the one command that reproduces it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import TextIO

from harness import protocol as p
from harness.evidence import read_evidence
from harness.runner import GoldenRun
from harness.scenario import Scenario
from harness.schedule import format_schedule
from harness.session import RunOutcome, outcome_to_json


def killpoint_command() -> str:
    """The command prefix that runs this killpoint when pasted where it is printed.

    ``killpoint`` only when that name on PATH is this installation's script: the
    README's venv set-up (``.venv/bin/pip install -e .``) puts nothing on PATH.
    Else the script beside the running interpreter (relative to the current
    directory when inside it, e.g. ``.venv/bin/killpoint``), else ``python -m``.
    """
    script = Path(sys.executable).parent / "killpoint"
    if not script.is_file():
        return f"{shlex.quote(sys.executable)} -m harness.cli"
    on_path = shutil.which("killpoint")
    if on_path is not None and os.path.samefile(on_path, script):
        return "killpoint"
    script = script.absolute()
    if script.is_relative_to(Path.cwd()):
        relative = script.relative_to(Path.cwd())
        return shlex.quote(str(relative) if len(relative.parts) > 1 else f"./{relative}")
    return shlex.quote(str(script))


def repro_command(outcome: RunOutcome) -> str:
    return f"{killpoint_command()} repro {outcome.token}"


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
        for quoted in finding.evidence:
            out.write(f"      {quoted}\n")
    for note in verdict.notes:
        out.write(f"  note: {note}\n")
    out.write(f"  evidence: {outcome.run_dir}\n")
    out.write(f"  reproduce: {repro_command(outcome)}\n")


def summary_line(outcomes: list[RunOutcome], seconds: float) -> str:
    failed = [outcome for outcome in outcomes if outcome.verdict.valid is False]
    unknown = [outcome for outcome in outcomes if outcome.verdict.valid is None]
    unreached = sum(1 for outcome in outcomes if outcome.unreached)
    by_property = Counter(prop for outcome in failed for prop in outcome.verdict.properties)
    parts = [f"{len(outcomes)} runs: {len(outcomes) - len(failed) - len(unknown)} passed, {len(failed)} failed"]
    if unknown:
        parts.append(f"{len(unknown)} unknown")
    if unreached:
        parts.append(f"{unreached} with a kill point never reached")
    text = ", ".join(parts)
    if by_property:
        text += " (" + ", ".join(f"{prop}: {count}" for prop, count in by_property.most_common()) + ")"
    rate = len(outcomes) / seconds if seconds > 0 else 0.0
    latencies = sorted(incarnation.kill_latency_s for outcome in outcomes for incarnation in outcome.incarnations
                       if incarnation.kill_latency_s is not None)
    if latencies:
        text += (f"; event-to-kill latency median {latencies[len(latencies) // 2] * 1000:.2f} ms, "
                 f"max {latencies[-1] * 1000:.2f} ms")
    return f"{text} in {seconds:.2f}s ({rate:.1f} schedules/s)"


def write_json_report(path: Path, scenario: Scenario, golden: GoldenRun, outcomes: list[RunOutcome], seconds: float) -> None:
    report = {
        "scenario": scenario.name,
        "origin": scenario.origin,
        "plan_digest": scenario.plan.digest,
        "golden": {"run_dir": str(golden.run_dir), "seconds": golden.seconds, "points": list(golden.points)},
        "summary": {
            "runs": len(outcomes),
            "failed": sum(1 for outcome in outcomes if outcome.verdict.valid is False),
            "unknown": sum(1 for outcome in outcomes if outcome.verdict.valid is None),
            "seconds": round(seconds, 3),
        },
        "runs": [outcome_to_json(outcome) for outcome in outcomes],
    }
    path.write_text(json.dumps(report, indent=1))


def write_coverage(scenario: Scenario, golden: GoldenRun, outcomes: list[RunOutcome], out: TextIO) -> None:
    """Calls x points, per incarnation: how many kills really landed there ("+" = a timed or event kill after it)."""
    from harness.explore import coverage

    covered = coverage(outcomes)
    columns = [*p.CALL_POINTS, *p.RECOVERY_POINTS]
    short = {point: point.replace("before_", "b_").replace("after_", "a_") for point in columns}
    for incarnation, counts in sorted(covered.items()):
        out.write(f"coverage, incarnation {incarnation} (kills per call x point):\n")
        out.write(f"  {'':<8}" + "".join(f"{short[point]:>12}" for point in columns) + "\n")
        rows = [*scenario.plan.call_ids, None]
        for call in rows:
            cells = [counts.get(point if call is None else f"{call}:{point}", 0) for point in columns]
            if any(cells):
                out.write(f"  {call or '(task)':<8}" + "".join(f"{cell or '.':>12}" for cell in cells) + "\n")
    reached = set(golden.points)
    never = [f"{call}:{point}" for call in scenario.plan.call_ids for point in p.CALL_POINTS
             if f"{call}:{point}" not in reached]
    if never:
        out.write(f"  never reached by the crash-free run (not counted): {', '.join(never)}\n")


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
