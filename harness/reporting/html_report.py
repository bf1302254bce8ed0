"""One self-contained HTML file: the summary, a coverage heat map, and a timeline per failing run.

No external assets (no scripts, fonts or images fetched): the file is opened
from a CI artifact, often offline. Each failing run's timeline is an inline SVG
drawn from its evidence (``read_evidence``): incarnations as lanes, each call a
bar through the crash points it reached, the kill, the recovery's decisions,
the ledger's invocations, effects and probes, and the finding highlighted —
followed by the quoted evidence lines and the repro command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape
from pathlib import Path

from killpoint import protocol as p
from killpoint.harness.judge.checker import PROPERTIES
from killpoint.harness.judge.evidence import Evidence, Line, read_evidence
from killpoint.harness.model import AFTER_SUFFIX, AtPoint, GoldenRun, Incarnation, RunOutcome, Scenario
from killpoint.harness.reporting.coverage import coverage
from killpoint.harness.reporting.report import (call_points, coverage_points, no_call_row, repro_command, summary_rows,
                                                verdict_headline, verdict_label, verdict_reason)
from killpoint.harness.reporting.summary import Summary
from killpoint.harness.schedules.schedule import format_schedule, point_reached

# Failing runs drawn in full; the rest are listed with their repro commands.
MAX_TIMELINES = 50
LEFT, SLOT, TOP, LANE = 170, 26, 64, 78
RECOVERY_SLOTS = len(p.RECOVERY_POINTS)
DECISION_COLOURS = {p.SKIP: "#6b7280", p.RETRY: "#c2410c", p.VERIFY: "#1d4ed8"}
_QUOTED = re.compile(r"^([\w.-]+\.jsonl):(\d+): ")
# Where a ledger record is drawn: under the first of these crash points the call's columns have, the one its
# tool reaches as it writes it (a protocol call's, then a framework step's); a probe half a slot before it.
LEDGER_POINTS = {p.LEDGER_INVOKED: (p.AFTER_STARTED, p.STEP_ENTERED), p.LEDGER_EFFECT: (p.AFTER_EFFECT,),
                 p.LEDGER_PROBE: (p.BEFORE_STARTED, p.AFTER_EFFECT)}

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px 32px; color: #111827; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; }
h3 { font-size: 16px; margin: 0 0 8px; }
.banner { padding: 10px 14px; border-radius: 6px; font-weight: 600; margin: 12px 0; }
.banner.fail { background: #fee2e2; color: #991b1b; } .banner.pass { background: #dcfce7; color: #166534; }
.banner.untested { background: #fef3c7; color: #92400e; } .banner.unknown { background: #e5e7eb; color: #374151; }
table { border-collapse: collapse; } td, th { padding: 3px 10px; border: 1px solid #e5e7eb; text-align: left; }
th { background: #f9fafb; font-weight: 600; }
table.heat td { text-align: center; min-width: 70px; font-variant-numeric: tabular-nums; }
.run { border: 1px solid #fca5a5; border-radius: 8px; padding: 14px 16px; margin: 18px 0; }
.finding { margin: 10px 0; } .prop { background: #dc2626; color: white; border-radius: 4px; padding: 1px 6px;
  font: 600 12px ui-monospace, SFMono-Regular, Menlo, monospace; }
pre { background: #f3f4f6; padding: 8px 10px; border-radius: 4px; overflow-x: auto; margin: 6px 0;
  font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; white-space: pre-wrap; word-break: break-all; }
pre.repro { background: #111827; color: #f9fafb; font-size: 13px; }
.muted { color: #6b7280; } .legend span { margin-right: 16px; }
svg { max-width: 100%; height: auto; display: block; margin: 8px 0; }
svg text { font: 11px system-ui, sans-serif; } svg .mono { font: 10px ui-monospace, Menlo, monospace; }
"""


def write_html_report(path: Path, scenario: Scenario, golden: GoldenRun, outcomes: list[RunOutcome],
                      summary: Summary) -> None:
    path.write_text(render_html(scenario, golden, outcomes, summary))


def render_html(scenario: Scenario, golden: GoldenRun, outcomes: list[RunOutcome], summary: Summary) -> str:
    """The whole report as one HTML string; "failing runs" here are those that broke a rule or could not be judged."""
    failures = [outcome for outcome in outcomes if not outcome.verdict.valid]
    body = [f"<h1>killpoint report: {escape(scenario.name)}</h1>",
            f'<div class="muted">workload <code>{escape(" ".join(scenario.workload))}</code> · plan '
            f"{escape(scenario.plan.digest)} · {len(scenario.plan.calls)} calls</div>",
            _summary(summary), _heat_map(scenario, golden, outcomes)]
    if failures:
        body.append(f"<h2>{_failures_heading(summary)}</h2>")
        slots = Slots(scenario.plan.call_ids, call_points(golden))
        body += [_failing_run(scenario, outcome, slots) for outcome in failures[:MAX_TIMELINES]]
        if len(failures) > MAX_TIMELINES:
            body.append(f"<p>{len(failures) - MAX_TIMELINES} more failing runs, not drawn:</p>")
            body += [f"<pre>run {outcome.job.index}: {escape(format_schedule(outcome.job.schedule))}\n"
                     f"{escape(repro_command(outcome))}</pre>" for outcome in failures[MAX_TIMELINES:]]
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>killpoint: {escape(scenario.name)}</title><style>{STYLE}</style></head>"
            f"<body>{''.join(body)}</body></html>\n")


def _failures_heading(summary: Summary) -> str:
    """"Failing runs (2)", "Unknown runs (1)" or "Failing runs (2) and unknown runs (1)"."""
    parts = [f"{kind} runs ({count})" for kind, count in (("failing", summary.failed), ("unknown", summary.unknown))
             if count]
    return " and ".join(parts).capitalize()


def _summary(summary: Summary) -> str:
    if summary.failed:
        banner = f'<div class="banner fail">FAILED: {escape(verdict_headline(summary))}</div>'
    elif summary.unknown:
        banner = f'<div class="banner unknown">UNKNOWN: {escape(verdict_headline(summary))}</div>'
    elif summary.untested:
        banner = (f'<div class="banner untested">{"PASSED" if summary.passed else "UNTESTED"}: {summary.passed} of '
                  f"{summary.runs} runs recovered correctly from a kill; {summary.untested} untested: no kill of "
                  f"their schedule landed, so they tested no recovery</div>")
    else:
        banner = f'<div class="banner pass">PASSED: all {summary.runs} runs recovered correctly</div>'
    rows = []
    for label, text in summary_rows(summary):
        if label.startswith("["):
            prop = label.strip("[]")
            label, text = f'<span class="prop">{escape(prop)}</span>', f"{text}: {PROPERTIES.get(prop, '')}"
        else:
            label = escape(label)
        rows.append(f"<tr><th>{label}</th><td>{escape(text)}</td></tr>")
    return f"<h2>Summary</h2>{banner}<table>{''.join(rows)}</table>"


def _heat_map(scenario: Scenario, golden: GoldenRun, outcomes: list[RunOutcome]) -> str:
    """Kills per call x point, per incarnation; red where a failing run was killed there."""
    kills, failing = coverage(outcomes), coverage([outcome for outcome in outcomes if outcome.verdict.valid is False])
    columns, no_call = coverage_points(golden), no_call_row(golden)
    parts = ["<h2>Coverage</h2><p class='muted'>Kills that really landed at each crash point, per incarnation "
             "(a timed or event kill counts at the last point announced before it). Red: a failing run was "
             "killed there.</p>"]
    for incarnation in sorted(kills):
        counts, bad = _fold_after(kills[incarnation]), _fold_after(failing.get(incarnation, {}))
        most = max(counts.values(), default=1)
        head = "".join(f"<th>{escape(point)}</th>" for point in columns)
        rows = []
        for call in [*scenario.plan.call_ids, None]:
            keys = [point_reached(point, call) for point in columns]
            if not any(counts.get(key) for key in keys):
                continue
            cells = "".join(_heat_cell(key, incarnation, counts.get(key, 0), bad.get(key, 0), most) for key in keys)
            rows.append(f"<tr><th>{escape(call or no_call)}</th>{cells}</tr>")
        parts.append(f"<h3>incarnation {incarnation}</h3><table class='heat'><tr><th></th>{head}</tr>{''.join(rows)}</table>")
    return "".join(parts)


def _fold_after(counts: dict[str, int]) -> dict[str, int]:
    folded: dict[str, int] = {}
    for trigger, count in counts.items():
        point = trigger.removesuffix(AFTER_SUFFIX)
        folded[point] = folded.get(point, 0) + count
    return folded


def _heat_cell(key: str, incarnation: int, count: int, failing: int, most: int) -> str:
    if not count:
        return "<td class='muted'>·</td>"
    strength = 0.2 + 0.6 * count / most
    colour = f"rgba(220,38,38,{strength:.2f})" if failing else f"rgba(22,163,74,{strength:.2f})"
    text = f"{count}" + (f" ({failing} failing)" if failing else "")
    return (f"<td style='background:{colour}' title='{escape(key)}, incarnation {incarnation}: {count} kill(s), "
            f"{failing} in failing runs'>{text}</td>")


def _failing_run(scenario: Scenario, outcome: RunOutcome, slots: Slots) -> str:
    verdict = outcome.verdict
    findings = []
    for finding in verdict.findings:
        where = " ".join(part for part in (finding.call, f"(kill {finding.kill})" if finding.kill else None) if part)
        quoted = "\n".join(finding.evidence)
        findings.append(f"<div class='finding'><span class='prop'>{escape(finding.property)}</span> "
                        f"<b>{escape(where)}</b> {escape(finding.message)}"
                        + (f"<pre>{escape(quoted)}</pre>" if quoted else "") + "</div>")
    extra = "".join(f"<p class='muted'>note: {escape(note)}</p>" for note in verdict.notes)
    if reason := verdict_reason(verdict):
        extra += f"<pre>{escape(reason)}</pre>"
    return (f"<div class='run' id='run-{outcome.job.index}'><h3>{verdict_label(verdict)} run {outcome.job.index}: kill at "
            f"{escape(format_schedule(outcome.job.schedule))}</h3>{timeline_svg(scenario, outcome, slots)}"
            "<div class='legend muted'><span>● crash point reached</span><span>✕ SIGKILL</span>"
            "<span>▲ tool invoked</span><span>◆ effect</span><span>○ probe</span><span>SKIP/RETRY/VERIFY: "
            "recovery decision</span><span>red: the finding</span><br>a call's columns: "
            f"{', '.join(slots.points)}; recovery: {', '.join(p.RECOVERY_POINTS)}</div>"
            f"{''.join(findings)}{extra}<p class='muted'>evidence: {escape(str(outcome.run_dir))}</p>"
            f"<pre class='repro'>{escape(repro_command(outcome))}</pre></div>")


@dataclass(frozen=True)
class Slots:
    """The timeline's x slots: the recovery points first, then a band per call of the plan, a slot per point."""

    calls: tuple[str, ...]
    points: tuple[str, ...]  # a call's crash points, as the coverage map shows them (report.call_points)

    @property
    def count(self) -> int:
        return RECOVERY_SLOTS + len(self.calls) * len(self.points)

    def band(self, call: str) -> int:
        """The first slot of a call's band."""
        return RECOVERY_SLOTS + self.calls.index(call) * len(self.points)

    def of(self, point: str) -> int | None:
        """The slot of a crash point announced, or None for one the timeline has no column for."""
        if point in p.RECOVERY_POINTS:
            return p.RECOVERY_POINTS.index(point)
        call, _, name = point.rpartition(":")
        if call not in self.calls or name not in self.points:
            return None
        return self.band(call) + self.points.index(name)

    def ledger(self, call: str, kind: str) -> float:
        """Where a ledger record of a call is drawn (see LEDGER_POINTS)."""
        point = next((point for point in LEDGER_POINTS[kind] if point in self.points), None)
        offset = self.points.index(point) if point else 0
        return self.band(call) + offset - (0.5 if kind == p.LEDGER_PROBE else 0)


def _x(slot: float) -> float:
    return LEFT + (slot + 0.5) * SLOT


def timeline_svg(scenario: Scenario, outcome: RunOutcome, slots: Slots) -> str:
    """The run as an inline SVG: a lane per incarnation, a column per crash point."""
    evidence = read_evidence(outcome.run_dir)
    quoted = {(match[1], int(match[2])) for finding in outcome.verdict.findings for text in finding.evidence
              if (match := _QUOTED.match(text))}
    blamed = {finding.call for finding in outcome.verdict.findings if finding.call}
    lanes = max(len(outcome.incarnations), 1)
    width = LEFT + slots.count * SLOT + 12
    height = TOP + lanes * LANE + 8
    svg = [f'<svg viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" aria-label="timeline of run {outcome.job.index}">']
    svg += _columns(scenario, slots, blamed, outcome, height)
    for number, incarnation in enumerate(outcome.incarnations):
        svg += _lane(number, incarnation, slots, evidence, quoted, width)
    svg.append("</svg>")
    return "".join(svg)


def _columns(scenario: Scenario, slots: Slots, blamed: set[str], outcome: RunOutcome, height: int) -> list[str]:
    """Column headers: the recovery block, then one band per call (red where a finding names the call)."""
    parts = [f'<text x="{_x(0) - SLOT / 2}" y="20" font-weight="600">recovery</text>']
    for index, call in enumerate(scenario.plan.calls):
        left = LEFT + slots.band(call.call_id) * SLOT
        band = len(slots.points) * SLOT
        fill = "#fee2e2" if call.call_id in blamed else ("#f9fafb" if index % 2 else "#f3f4f6")
        parts.append(f'<rect x="{left}" y="0" width="{band}" height="{height}" fill="{fill}"/>')
        parts.append(f'<text x="{left + 4}" y="20" font-weight="600">{escape(call.call_id)} {escape(call.tool)}</text>')
        parts.append(f'<text x="{left + 4}" y="34" class="mono" fill="#6b7280">'
                     f"{escape(scenario.catalogue.class_of(call.tool) or '')}</text>")
        properties = [finding.property for finding in outcome.verdict.findings if finding.call == call.call_id]
        for line, prop in enumerate(dict.fromkeys(properties)):
            parts.append(f'<text x="{left + 4}" y="{48 + line * 11}" class="mono" fill="#b91c1c">{escape(prop)}</text>')
    return parts


def _lane(number: int, incarnation: Incarnation, slots: Slots, evidence: Evidence, quoted: set[tuple[str, int]],
          width: int) -> list[str]:
    top = TOP + number * LANE
    mid = top + LANE / 2
    ending = (f"KILLED at {incarnation.killed_at}" if incarnation.killed_at and not incarnation.timed_out
              else "hung: killed at the timeout" if incarnation.timed_out else f"exited {incarnation.exit_code}")
    parts = [f'<line x1="0" x2="{width}" y1="{top}" y2="{top}" stroke="#d1d5db"/>',
             f'<text x="4" y="{top + 18}" font-weight="600">incarnation {incarnation.number}</text>',
             f'<text x="4" y="{top + 33}" fill="{"#b91c1c" if incarnation.killed_at else "#166534"}">{escape(ending)}</text>',
             f'<text x="4" y="{top + 48}" class="mono" fill="#6b7280">pid {incarnation.pid}, {incarnation.seconds:.3f}s</text>']
    by_call: dict[str, list[float]] = {}
    for point in incarnation.points:
        slot = slots.of(point)
        if slot is not None:
            by_call.setdefault(point.rpartition(":")[0], []).append(slot)
    for call, reached in by_call.items():
        if call:
            parts.append(f'<rect x="{_x(min(reached)) - 4}" y="{mid - 5}" width="{(max(reached) - min(reached)) * SLOT + 8}" '
                         f'height="10" rx="5" fill="#93c5fd"/>')
    for point in incarnation.points:
        slot = slots.of(point)
        if slot is not None:
            parts.append(f'<circle cx="{_x(slot)}" cy="{mid}" r="3.5" fill="#1e3a8a"><title>{escape(point)}</title></circle>')
    if incarnation.killed_at and incarnation.points:
        slot = slots.of(incarnation.points[-1])
        if slot is not None:
            kill = incarnation.kill
            at_last_point = isinstance(kill, AtPoint) and kill.trigger == incarnation.points[-1]
            x = _x(slot) + (0 if at_last_point else SLOT / 2)
            parts.append(f'<g stroke="#dc2626" stroke-width="2.5"><title>SIGKILL at {escape(incarnation.killed_at)}</title>'
                         f'<line x1="{x}" x2="{x}" y1="{top + 22}" y2="{top + LANE - 4}"/>'
                         f'<line x1="{x - 6}" x2="{x + 6}" y1="{mid - 14}" y2="{mid - 2}"/>'
                         f'<line x1="{x - 6}" x2="{x + 6}" y1="{mid - 2}" y2="{mid - 14}"/></g>')
    for line in evidence.journal_records(p.DECISION):
        if line.get("incarnation") == incarnation.number and line.get("call") in slots.calls:
            parts.append(_decision(line, slots, top, (line.source, line.number) in quoted))
    marks: dict[tuple[str, str], int] = {}
    for line in evidence.ledger.lines:
        if line.get("incarnation") == incarnation.number and line.get("call") in slots.calls:
            parts.append(_ledger_mark(line, slots, mid, marks, (line.source, line.number) in quoted))
    return parts


def _decision(line: Line, slots: Slots, top: float, blamed: bool) -> str:
    """A recovery decision, over the middle of its call's band."""
    action = line.get("action", "?")
    x = LEFT + (slots.band(line.get("call")) + len(slots.points) / 2) * SLOT
    colour = "#dc2626" if blamed else DECISION_COLOURS.get(action, "#111827")
    return (f'<text x="{x}" y="{top + 15}" text-anchor="middle" font-weight="700" fill="{colour}">'
            f"{escape(str(line.get('found')))}→{escape(str(action))}<title>{escape(line.quote())}</title></text>")


def _ledger_mark(line: Line, slots: Slots, mid: float, marks: dict[tuple[str, str], int], blamed: bool) -> str:
    """▲ invoked, ◆ effect, ○ probe, below the call's bar; repeated marks step right."""
    kind = next((key for key in p.TOOL_LEDGER_KINDS if key in line.record), p.LEDGER_EFFECT)
    call = line.get("call")
    repeat = marks[(call, kind)] = marks.get((call, kind), -1) + 1
    x = _x(slots.ledger(call, kind)) + repeat * 9
    y = mid + 20
    stroke = ' stroke="#dc2626" stroke-width="2.5"' if blamed else ""
    shape = {p.LEDGER_INVOKED: f'<polygon points="{x - 5},{y + 4} {x + 5},{y + 4} {x},{y - 5}" fill="#6b7280"{stroke}>',
             p.LEDGER_EFFECT: f'<polygon points="{x},{y - 6} {x + 6},{y} {x},{y + 6} {x - 6},{y}" fill="#f59e0b"{stroke}>',
             p.LEDGER_PROBE: f'<circle cx="{x}" cy="{y}" r="5" fill="white" '
                             f'stroke="{"#dc2626" if blamed else "#1d4ed8"}" stroke-width="2">'}[kind]
    closing = "</circle>" if kind == p.LEDGER_PROBE else "</polygon>"
    return f"{shape}<title>{escape(line.quote())}</title>{closing}"
