"""step_saving as a name the harness knows: a kill spelled at it parses, the coverage columns show it where the
crash-free run reached it (LangGraph's checkpointer) and not where it did not (DBOS records a step on the step's
own call), and a finding of a kill at an earlier step's saver point that landed inside a later step says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from killpoint import protocol as p
from killpoint.harness.judge.checker import check
from killpoint.harness.model import AtPoint, GoldenRun, Incarnation, parse_kill
from killpoint.harness.reporting.report import call_points
from tests.test_blackbox_rules import BLACK_BOX, INCARNATIONS, evidence, store
from tests.test_checker import GOLDEN, effect, invoked

CALLS = ("c1", "c2", "c3", "c4")
DBOS_ORDER = (p.STEP_ENTERED, p.AFTER_EFFECT, p.STEP_RETURNED, p.STEP_RECORDED)
LANGGRAPH_ORDER = (p.STEP_ENTERED, p.AFTER_EFFECT, p.STEP_RETURNED, p.STEP_SAVING, p.STEP_RECORDED)


def golden(order: tuple[str, ...]) -> GoldenRun:
    return GoldenRun(Path("runs/golden"), {}, {}, tuple(f"{call}:{point}" for call in CALLS for point in order), 0.5)


@pytest.mark.parametrize("text", ["c3:step_saving", "c3:step_saving/now"])
def test_a_kill_at_step_saving_parses(text):
    kill = parse_kill(text)
    assert isinstance(kill, AtPoint) and (kill.point, kill.call) == (p.STEP_SAVING, "c3")
    assert kill.now is text.endswith("/now")


def test_step_saving_comes_between_a_steps_return_and_its_record():
    assert p.STEP_POINTS == (p.STEP_ENTERED, p.STEP_RETURNED, p.STEP_SAVING, p.STEP_RECORDED)
    assert p.STEP_SAVING in p.ALL_POINTS


def test_the_coverage_columns_show_step_saving_where_the_crash_free_run_reached_it():
    assert call_points(golden(LANGGRAPH_ORDER)) == LANGGRAPH_ORDER


def test_a_framework_with_no_saver_of_its_own_is_not_shown_step_saving_as_missing():
    assert call_points(golden(DBOS_ORDER)) == DBOS_ORDER


# -- a kill at an earlier step's saver point that landed inside a later step (black-box rules, hand-built) ----


def at_least_once_after(killed_at: str, ledger: list[dict]) -> str:
    """The one finding's message when the plan's c1 (read_file) and c2 (append) ran in incarnation 0 as ``ledger``
    says, the store at the kill recorded c1 only, and incarnation 1 re-ran c2 with no probe."""
    after = [invoked("c2", "append", 1), effect("c2", "append", 1), invoked("c3", "ask_user", 1)]
    incarnations = (Incarnation(0, 100, None, killed_at), INCARNATIONS[1])
    at_kill = store(("c1", p.SUCCEEDED), records_start=False)
    (finding,) = check(BLACK_BOX, evidence(at_kill=at_kill, ledger=[*ledger, *after], incarnations=incarnations),
                       GOLDEN).findings
    assert (finding.property, finding.call, finding.kill) == ("verify-before-replay", "c2", killed_at)
    return finding.message


@pytest.mark.parametrize("point", [p.STEP_SAVING, p.STEP_RECORDED])
@pytest.mark.parametrize("now", ["", "/now"])
def test_a_finding_of_a_kill_at_the_previous_steps_saver_point_says_it_landed_inside_the_next_step(point, now):
    """LangGraph announces c1's saving and record from its saver's thread while c2 already runs: c2's invoked
    line is before the kill's marker, and the finding (c2's, under a kill naming c1) says so."""
    killed_at = f"c1:{point}{now}"
    ledger = [invoked("c1", "read_file", 0), invoked("c2", "append", 0), effect("c2", "append", 0),
              {"killed": 0, "point": killed_at}]
    message = at_least_once_after(killed_at, ledger)
    assert message.startswith(
        "at-least-once: c2 (append, NON_IDEMPOTENT) was re-executed after the kill without a read-only check; the kill "
        f"at c1:{point} landed inside the next step, c2: its invoked line (ledger.jsonl:2) precedes the kill; the "
        "store the recovery started from (store-at-kill-0) holds no record of c2"), message
    assert "1 before the kill and 1 after it" in message


@pytest.mark.parametrize("killed_at", ["c2:step_saving", "c2:step_recorded", "c1:step_returned", "c1:after_effect"])
def test_no_landed_inside_is_said_of_the_killed_steps_own_finding_or_of_a_point_on_the_steps_own_thread(killed_at):
    """The kill's own step, or a point the step's own thread announces: the kill is where it says it is."""
    ledger = [invoked("c1", "read_file", 0), invoked("c2", "append", 0), effect("c2", "append", 0),
              {"killed": 0, "point": killed_at}]
    assert "landed inside" not in at_least_once_after(killed_at, ledger)
