"""The effect-once rule judges each VERIFY against the ledger at the kill before it.

Found by ``killpoint hunt`` (seed 2) on the correct reference runtime: a torn
``finished`` makes recovery RETRY an IDEMPOTENT_WRITE (legitimately: its
``started`` snapshot says so), a drift then makes the retry's own ``started``
NON_IDEMPOTENT, a second kill lands after its effect, and the next recovery
VERIFIES it, finds the effect and does not redo it. The whole-ledger count
said "2 effects where the crash-free run leaves 1" — a schedule no compliant
runtime could pass. The literal tests pin the rule; the integration tests run
both runtimes through that very schedule with real kills.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from killpoint import protocol as p
from killpoint.catalogue import REFERENCE_CATALOGUE, load_catalogue
from killpoint.harness.judge.checker import check
from killpoint.harness.judge.evidence import Evidence, JsonLines, Line
from killpoint.harness.layout import CATALOGUE_FILE, DRIFTED_CATALOGUE_FILE
from killpoint.harness.model import GoldenRun, Incarnation, Plan, PlannedCall, Scenario
from tests.helpers import DEMO, ROOT

CATALOGUE = load_catalogue(REFERENCE_CATALOGUE)
ARGS = {"path": "orders/summary.txt", "content": "2 x tea\n"}
PLAN = Plan("t", (PlannedCall("c1", "write_file", ARGS),))
SCENARIO = Scenario("unit", ("true",), PLAN, CATALOGUE)
WORLD = {"files/orders/summary.txt": "2 x tea\n"}
GOLDEN = GoldenRun(Path("golden"), WORLD, {"c1": 1}, (), 0.0)
DRIFT = "write_file=NON_IDEMPOTENT"
# The catalogue files the runner hands a workload under this drift, as read back from the run directory.
HANDED = {CATALOGUE_FILE: CATALOGUE, DRIFTED_CATALOGUE_FILE: CATALOGUE.with_class("write_file", "NON_IDEMPOTENT")}


def lines(source: str, records: list[dict]) -> JsonLines:
    return JsonLines(tuple(Line(source, number, record) for number, record in enumerate(records, start=1)))


def started(attempt: int, tool_class: str) -> dict:
    return {"kind": "started", "op": "t-op1", "call": "c1", "tool": "write_file", "class": tool_class,
            "interactive": False, "attempt": attempt}


def decision(found: str, action: str, incarnation: int) -> dict:
    return {"kind": "decision", "call": "c1", "op": "t-op1", "found": found, "action": action,
            "incarnation": incarnation}


def ledger_record(kind: str, incarnation: int) -> dict:
    value = {"invoked": "write_file", "effect": "file_written", "probe": "effect_present"}[kind]
    return {kind: value, "call": "c1", "tool": "write_file", "incarnation": incarnation, "pid": 100 + incarnation}


FINISHED = {"kind": "finished", "op": "t-op1", "status": p.SUCCEEDED}
# Incarnation 0 ran c1 and journaled finished; the kill tore that finished record off.
FOUND_AT_KILL_0 = [started(1, "IDEMPOTENT_WRITE")]
# Incarnation 1 (handed the drifted catalogue) retried c1 by its snapshot; killed after the retry's effect.
AT_KILL_1 = [*FOUND_AT_KILL_0, decision(p.OUTCOME_UNKNOWN, p.RETRY, 1), started(2, "NON_IDEMPOTENT")]
# Incarnation 2 verifies the retry (its snapshot is now NON_IDEMPOTENT), finds the file written, closes it.
RECOVERY_2 = [decision(p.OUTCOME_UNKNOWN, p.VERIFY, 2), {"kind": "verified", "op": "t-op1", "effect_found": True},
              FINISHED, {"kind": "task", "status": p.COMPLETED}]
LEDGER = [ledger_record("invoked", 0), ledger_record("effect", 0), {"killed": 0, "point": "c1:after_finished/torn:500"},
          ledger_record("invoked", 1), ledger_record("effect", 1), {"killed": 1, "point": "c1:after_effect"},
          ledger_record("probe", 2)]
INCARNATIONS = (
    Incarnation(0, 100, None, "c1:after_finished/torn:500", points=("c1:before_started", "c1:after_started",
                                                                    "c1:after_effect", "c1:after_finished")),
    Incarnation(1, 101, None, "c1:after_effect", points=("after_decisions", "c1:after_started", "c1:after_effect"),
                catalogue_drift=DRIFT),
    Incarnation(2, 102, 0, None, points=("after_decisions", "c1:after_verify"), catalogue_drift=DRIFT),
)


def evidence(recovery: list[dict] = RECOVERY_2, ledger: list[dict] = LEDGER) -> Evidence:
    return Evidence(
        journal=lines("journal.jsonl", AT_KILL_1 + recovery),
        journals_at_kill=(lines("journal-at-kill-0.jsonl", [*FOUND_AT_KILL_0, FINISHED]),
                          lines("journal-at-kill-1.jsonl", AT_KILL_1)),
        ledger=lines("ledger.jsonl", ledger), world=WORLD, incarnations=INCARNATIONS,
        journals_found=(lines("journal-at-kill-0.torn.jsonl", FOUND_AT_KILL_0),
                        lines("journal-at-kill-1.jsonl", AT_KILL_1)),
        catalogues=HANDED)


def test_a_verify_after_a_legitimate_retry_is_not_a_repeated_effect():
    verdict = check(SCENARIO, evidence(), GOLDEN)
    assert verdict.valid is True, verdict.findings


def test_a_verify_that_redoes_an_effect_already_there_is_caught_at_its_own_kill():
    redone = [*LEDGER, ledger_record("invoked", 2), ledger_record("effect", 2)]
    verdict = check(SCENARIO, evidence(ledger=redone), GOLDEN)
    assert verdict.properties == ("verify-before-replay",)
    (finding,) = verdict.findings
    assert finding.kill == "c1:after_effect"
    assert "had 2 effect record(s) at the kill" in finding.message and "added 1 more" in finding.message
    assert len(finding.evidence) == 3  # the two effects before the kill and the repeat


def test_a_verify_may_complete_an_effect_that_never_happened():
    """Killed after started but before the tool: the VERIFY finds nothing and redoes it, once."""
    at_kill = [started(1, "NON_IDEMPOTENT")]
    recovery = [decision(p.OUTCOME_UNKNOWN, p.VERIFY, 1), {"kind": "verified", "op": "t-op1", "effect_found": False},
                started(2, "NON_IDEMPOTENT"), FINISHED, {"kind": "task", "status": p.COMPLETED}]
    ledger = [{"killed": 0, "point": "c1:after_started"}, ledger_record("probe", 1), ledger_record("invoked", 1),
              ledger_record("effect", 1)]
    catalogue = CATALOGUE.with_class("write_file", "NON_IDEMPOTENT")
    run = Evidence(lines("journal.jsonl", at_kill + recovery), (lines("journal-at-kill-0.jsonl", at_kill),),
                   lines("ledger.jsonl", ledger), WORLD,
                   (Incarnation(0, 100, None, "c1:after_started", points=("c1:before_started", "c1:after_started")),
                    Incarnation(1, 101, 0, None, points=("after_decisions", "c1:after_verify"))),
                   catalogues={CATALOGUE_FILE: catalogue})
    scenario = Scenario("unit", ("true",), PLAN, catalogue)
    assert check(scenario, run, GOLDEN).valid is True
    doubled = [*ledger, ledger_record("invoked", 1), ledger_record("effect", 1)]
    run_doubled = replace(run, ledger=lines("ledger.jsonl", doubled))
    assert "verify-before-replay" in check(scenario, run_doubled, GOLDEN).properties


def test_a_succeeded_calls_finding_does_not_blame_its_class():
    at_kill = [started(1, "IDEMPOTENT_WRITE"), FINISHED]
    recovery = [decision(p.SUCCEEDED, p.RETRY, 1), {"kind": "task", "status": p.COMPLETED}]
    run = Evidence(lines("journal.jsonl", at_kill + recovery), (lines("journal-at-kill-0.jsonl", at_kill),),
                   lines("ledger.jsonl", [ledger_record("invoked", 0), ledger_record("effect", 0),
                                          {"killed": 0, "point": "c1:after_finished"}]), WORLD,
                   (Incarnation(0, 100, None, "c1:after_finished"),
                    Incarnation(1, 101, 0, None, points=("after_decisions",))), catalogues=HANDED)
    (finding,) = [f for f in check(SCENARIO, run, GOLDEN).findings if f.property == "succeeded-not-replayed"]
    assert "the journal says it SUCCEEDED" in finding.message
    assert "IDEMPOTENT_WRITE" not in finding.message


RUNTIMES = {
    "reference": "{python} -m killpoint.scenarios.reference_runtime",
    "standalone": f"{{python}} {ROOT / 'scenarios' / 'standalone' / 'runtime.py'}",
}


@pytest.mark.integration
@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
def test_both_runtimes_pass_the_schedule_hunt_found(killpoint, tmp_path, runtime):
    """Two identical writes, a torn finished, a drift, and a second kill after the retry's effect: real SIGKILLs."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"task_id": "hunt", "calls": [
        {"call_id": "c1", "tool": "write_file", "args": ARGS}, {"call_id": "c2", "tool": "write_file", "args": ARGS}]}))
    result = killpoint("run", "--workload", RUNTIMES[runtime], "--plan", plan,
                       "--kill-at", "c1:after_finished/torn:500", "--kill-at", "c1:after_effect",
                       "--drift", DRIFT)
    assert result.exit_code == 0, result.out + result.err
    assert "1 passed, 0 failed" in result.out


@pytest.mark.integration
@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
def test_a_retry_a_drift_made_unsafe_is_noted_not_failed(killpoint, tmp_path, runtime):
    """Found by hunt (standalone, seed 1): incarnation 1 is told append is READ_ONLY, starts c4 under that snapshot
    and is killed after its effect; the RETRY the rules then require appends twice. The world cannot equal the
    crash-free one, and no runtime is to blame; the run passes with a note saying why."""
    result = killpoint("run", DEMO, "--workload", RUNTIMES[runtime], "--drift", "append=READ_ONLY",
                       "--kill-at", "c1:before_started", "--kill-at", "c4:after_effect",
                       "--json", tmp_path / "report.json")
    assert result.exit_code == 0, result.out + result.err
    (run,) = json.loads((tmp_path / "report.json").read_text())["runs"]
    assert any("the drifted one given to incarnation 1 called it READ_ONLY" in note for note in run["notes"])


@pytest.mark.integration
def test_a_drift_excuses_only_the_retry_it_forced(killpoint, tmp_path):
    """The same drift, but a runtime that also replays a SUCCEEDED call is still caught."""
    result = killpoint("run", DEMO, "--workload", "{python} -m killpoint.scenarios.mutants.replays_succeeded",
                       "--drift", "append=READ_ONLY", "--kill-at", "c1:before_started", "--kill-at", "c4:after_effect")
    assert result.exit_code == 1 and "[succeeded-not-replayed]" in result.out, result.out
