"""The coverage columns come from what the crash-free run announced: a runtime speaking the protocol gets
before_started..after_finished, a framework workload its step points (step_entered, after_effect,
step_returned, step_recorded), and neither report names points of a kind the runtime never announces."""

from __future__ import annotations

import io
from pathlib import Path

from killpoint import protocol as p
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.model import AtPoint, Finding, GoldenRun, Incarnation, Job, RunOutcome, Verdict
from killpoint.harness.reporting.html_report import Slots, render_html
from killpoint.harness.reporting.report import (CALL_ORDER, call_points, coverage_legend, coverage_points, no_call_row,
                                                write_coverage)
from killpoint.harness.reporting.summary import summarise
from tests.helpers import ROOT

GRAPH = load_scenario(ROOT / "scenarios" / "frameworks" / "langgraph_graph_sync.toml")
CALLS = GRAPH.plan.call_ids
# What the LangGraph StateGraph workload announces, call after call (measured: its golden run's incarnations.json).
STEP_ORDER = (p.STEP_ENTERED, p.AFTER_EFFECT, p.STEP_RETURNED, p.STEP_RECORDED)
STEPS = tuple(f"{call}:{point}" for call in CALLS for point in STEP_ORDER)


def golden(points: tuple[str, ...]) -> GoldenRun:
    return GoldenRun(Path("runs/golden"), {}, {}, points, 0.5)


def killed_at(index: int, at: str, valid: bool) -> RunOutcome:
    """A run killed at ``at`` in its first incarnation, then finishing; failing when not ``valid``."""
    call, _, point = at.rpartition(":")
    verdict = Verdict(True) if valid else Verdict(False, (Finding("verify-before-replay", "re-run blindly", call=call),))
    first = Incarnation(0, 100, None, killed_at=at, points=STEPS[:STEPS.index(at) + 1])
    return RunOutcome(Job(index, (AtPoint(point, call),)), Path(f"runs/run-{index:05d}"), verdict,
                      (first, Incarnation(1, 101, 0, points=STEPS[STEPS.index(at) + 1:])), f"kp1.token{index}", 0.1)


def coverage_text(points: tuple[str, ...], outcomes: list[RunOutcome]) -> list[str]:
    out = io.StringIO()
    write_coverage(GRAPH, golden(points), outcomes, out)
    return out.getvalue().splitlines()


def test_the_call_order_keeps_each_kind_in_the_order_its_calls_reach_it():
    assert sorted(CALL_ORDER) == sorted({*p.CALL_POINTS, *p.STEP_POINTS, *p.SEAM_POINTS}), \
        "every call point once, no other"
    assert [point for point in CALL_ORDER if point in p.CALL_POINTS] == list(p.CALL_POINTS)
    assert [point for point in CALL_ORDER if point in STEP_ORDER] == list(STEP_ORDER)
    assert [point for point in CALL_ORDER if point in p.SEAM_POINTS] == list(p.SEAM_POINTS)


def test_an_agent_gets_its_seams_as_columns_and_a_legend_for_them():
    seams = tuple(f"{call}:{point}" for call in CALLS for point in p.SEAM_POINTS) + (p.MODEL_REQUEST, p.MODEL_REPLY)
    assert coverage_points(golden(seams)) == p.SEAM_POINTS  # it announces no recovery point
    assert no_call_row(golden(seams)) == "(answer)" and no_call_row(golden(STEPS)) == "(recovery)"
    assert coverage_legend(coverage_points(golden(seams))).startswith(
        "coverage: kills that landed at each crash point, per incarnation. m_ is model_, t_ is tool_, st_ is store_\n")


def test_an_agent_that_names_no_store_is_not_shown_a_store_column_it_could_never_reach():
    seams = tuple(f"{call}:{point}" for call in CALLS for point in p.SEAM_POINTS if point != p.STORE_RESULT)
    assert coverage_points(golden(seams)) == tuple(point for point in p.SEAM_POINTS if point != p.STORE_RESULT)
    assert "st_ is store_" not in coverage_legend(coverage_points(golden(seams)))


def test_a_protocol_runtime_gets_the_protocol_columns():
    reference = tuple(f"{call}:{point}" for call in CALLS for point in p.CALL_POINTS)
    assert coverage_points(golden(reference)) == (*p.CALL_POINTS, *p.RECOVERY_POINTS)


def test_a_framework_workload_gets_its_step_points_in_the_order_a_step_reaches_them():
    assert coverage_points(golden(STEPS)) == (*STEP_ORDER, *p.RECOVERY_POINTS)
    lines = coverage_text(STEPS, [killed_at(0, "c2:step_recorded", True), killed_at(1, "c3:step_entered", True)])
    assert lines[:4] == [
        "coverage: kills that landed at each crash point, per incarnation. a_ is after_, s_ is step_",
        "  (s_entered: step_entered); N+M: N kills at the point, M timed or event kills just after it",
        "coverage, incarnation 0 (before any kill):",
        f"  {'':<10}" + "".join(f"{heading:>12}" for heading in
                                ("s_entered", "a_effect", "s_returned", "s_recorded", "a_decisions", "a_verify"))]
    assert {line.split()[0]: line.split()[1:] for line in lines[4:]} == {
        "c2": [".", ".", ".", "1", ".", "."], "c3": ["1", ".", ".", ".", ".", "."]}
    assert not any("never reached" in line for line in lines), "no protocol point is expected of a framework"


def test_never_reached_names_only_points_of_the_kind_the_runtime_announces():
    missing = tuple(point for point in STEPS if point != "c2:step_recorded")
    assert coverage_text(missing, [])[-1] == "  never reached by the crash-free run (not counted): c2:step_recorded"

    no_finish = tuple(f"{call}:{point}" for call in CALLS for point in p.CALL_POINTS if point != p.BEFORE_FINISHED)
    assert call_points(golden(no_finish)) == p.CALL_POINTS, "a protocol point no call reached still has its column"
    assert coverage_text(no_finish, [])[-1] == ("  never reached by the crash-free run (not counted): "
                                                "c1:before_finished, c2:before_finished, c3:before_finished, "
                                                "c4:before_finished")


def test_a_runtime_announcing_no_point_of_its_own_is_shown_only_the_fake_tools_after_effect():
    effects = tuple(f"{call}:{p.AFTER_EFFECT}" for call in CALLS)
    assert coverage_points(golden(effects)) == (p.AFTER_EFFECT, *p.RECOVERY_POINTS)
    assert not any("never reached" in line for line in coverage_text(effects, []))


def test_the_timeline_places_step_points_and_ledger_records_in_each_call_band():
    slots = Slots(CALLS, call_points(golden(STEPS)))
    recovery = len(p.RECOVERY_POINTS)
    assert [slots.of(point) for point in STEPS[:5]] == [recovery, recovery + 1, recovery + 2, recovery + 3, recovery + 4]
    assert slots.of("after_decisions") == 0 and slots.of("c2:before_started") is None
    assert slots.count == recovery + len(CALLS) * len(STEP_ORDER)
    # invoked is written as the step is entered, a probe before its effect
    assert slots.ledger("c2", p.LEDGER_INVOKED) == slots.of("c2:step_entered")
    assert slots.ledger("c2", p.LEDGER_EFFECT) == slots.of("c2:after_effect")
    assert slots.ledger("c2", p.LEDGER_PROBE) == slots.of("c2:after_effect") - 0.5

    protocol = Slots(CALLS, p.CALL_POINTS)
    assert protocol.ledger("c2", p.LEDGER_INVOKED) == protocol.of("c2:after_started")
    assert protocol.ledger("c2", p.LEDGER_PROBE) == protocol.of("c2:before_started") - 0.5


def test_the_html_report_maps_and_draws_a_framework_runs_step_points():
    runs = [killed_at(0, "c2:step_recorded", False), killed_at(1, "c1:step_returned", True)]
    html = render_html(GRAPH, golden(STEPS), runs, summarise(golden(STEPS), runs, 1.0))
    heat = html[html.index("<h2>Coverage</h2>"):html.index("<h2>Failing runs")]
    assert "<th>step_entered</th><th>after_effect</th><th>step_returned</th><th>step_recorded</th>" in heat
    assert p.BEFORE_STARTED not in heat and p.AFTER_FINISHED not in heat
    assert "title='c2:step_recorded, incarnation 0: 1 kill(s), 1 in failing runs'" in heat
    timeline = html[html.index("<svg"):html.index("</svg>")]
    drawn = [point for point in STEPS if f"<title>{point}</title></circle>" in timeline]
    assert drawn == list(STEPS), "every step point either incarnation reached is drawn"
    assert "a call's columns: step_entered, after_effect, step_returned, step_recorded" in html
