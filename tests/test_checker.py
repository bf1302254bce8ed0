"""The checker as a pure function, on literal journals and ledgers (no process runs here)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest

from killpoint import protocol as p
from killpoint.catalogue import REFERENCE_CATALOGUE, load_catalogue
from killpoint.harness.judge import checker
from killpoint.harness.judge.checker import check, expected_action
from killpoint.harness.judge.evidence import Evidence, JsonLines, Line
from killpoint.harness.layout import CATALOGUE_FILE
from killpoint.harness.model import Finding, GoldenRun, Incarnation, Plan, PlannedCall, Scenario

CATALOGUE = load_catalogue(REFERENCE_CATALOGUE)
PLAN = Plan("t", (PlannedCall("c1", "read_file", {"path": "a"}), PlannedCall("c2", "append", {"path": "a", "text": "x"}),
                  PlannedCall("c3", "ask_user", {"question": "ok?"})))
SCENARIO = Scenario("unit", ("true",), PLAN, CATALOGUE)
WORLD = {"files/a": "x"}
GOLDEN = GoldenRun(Path("golden"), WORLD, {"c2": 1}, (), 0.0)


def started(call: str, tool: str, attempt: int = 1, **overrides: object) -> dict:
    record = {"kind": "started", "op": f"t-op{call[1:]}", "call": call, "tool": tool,
              "class": CATALOGUE.class_of(tool), "interactive": CATALOGUE.is_interactive(tool), "attempt": attempt}
    return {**record, **overrides}


def finished(call: str, status: str = p.SUCCEEDED) -> dict:
    return {"kind": "finished", "op": f"t-op{call[1:]}", "status": status}


def decision(call: str, found: str, action: str, incarnation: int = 1) -> dict:
    return {"kind": "decision", "call": call, "op": f"t-op{call[1:]}", "found": found, "action": action,
            "incarnation": incarnation}


def lines(source: str, records: list[dict]) -> JsonLines:
    return JsonLines(tuple(Line(source, number, record) for number, record in enumerate(records, start=1)))


def invoked(call: str, tool: str, incarnation: int) -> dict:
    return {"invoked": tool, "call": call, "incarnation": incarnation, "pid": 100 + incarnation}


def effect(call: str, tool: str, incarnation: int) -> dict:
    return {"effect": "done", "call": call, "tool": tool, "incarnation": incarnation, "pid": 100 + incarnation}


# A correct run: killed at c2:after_effect; recovery VERIFIES c2, finds the effect, goes on.
AT_KILL = [started("c1", "read_file"), finished("c1"), started("c2", "append")]
RECOVERY = [decision("c1", p.SUCCEEDED, p.SKIP), decision("c2", p.OUTCOME_UNKNOWN, p.VERIFY),
            decision("c3", p.NOT_STARTED, p.SKIP), {"kind": "verified", "op": "t-op2", "effect_found": True},
            finished("c2"), started("c3", "ask_user"), finished("c3"), {"kind": "task", "status": "COMPLETED"}]
LEDGER = [invoked("c1", "read_file", 0), invoked("c2", "append", 0), effect("c2", "append", 0),
          {"killed": 0, "point": "c2:after_effect"},
          {"probe": "effect_present", "call": "c2", "tool": "append", "incarnation": 1, "pid": 101},
          invoked("c3", "ask_user", 1)]
INCARNATIONS = (Incarnation(0, 100, None, "c2:after_effect"),
                Incarnation(1, 101, 0, None, points=("after_decisions", "c2:after_verify")))


def evidence(*, at_kill=AT_KILL, recovery=RECOVERY, ledger=LEDGER, world=WORLD, incarnations=INCARNATIONS) -> Evidence:
    return Evidence(lines("journal.jsonl", at_kill + recovery), (lines("journal-at-kill-0.jsonl", at_kill),),
                    lines("ledger.jsonl", ledger), world, incarnations, catalogues={CATALOGUE_FILE: CATALOGUE})


def swap(records: list[dict], old: dict, new: dict) -> list[dict]:
    assert old in records
    return [new if record == old else record for record in records]


def test_a_correct_recovery_passes():
    verdict = check(SCENARIO, evidence(), GOLDEN)
    assert verdict.valid is True, verdict.findings


@pytest.mark.parametrize(("found", "tool_class", "interactive", "action"), [
    (p.SUCCEEDED, p.NON_IDEMPOTENT, False, p.SKIP), (p.FAILED, p.READ_ONLY, False, p.SKIP),
    (p.NOT_STARTED, p.UNKNOWN, False, p.SKIP), (p.OUTCOME_UNKNOWN, p.READ_ONLY, False, p.RETRY),
    (p.OUTCOME_UNKNOWN, p.IDEMPOTENT_WRITE, False, p.RETRY), (p.OUTCOME_UNKNOWN, p.NON_IDEMPOTENT, False, p.VERIFY),
    (p.OUTCOME_UNKNOWN, p.UNKNOWN, False, p.VERIFY), (p.OUTCOME_UNKNOWN, p.NON_IDEMPOTENT, True, p.RETRY),
])
def test_decision_matrix_table(found, tool_class, interactive, action):
    assert expected_action(found, tool_class, interactive) == action


def test_every_status_and_class_has_an_action():
    """All 32 cells: a settled or unstarted call is SKIP whatever its class; an interrupted one goes by its
    class (recovery-rules.md's matrix), except that a question is asked again."""
    by_class = {p.READ_ONLY: p.RETRY, p.IDEMPOTENT_WRITE: p.RETRY, p.NON_IDEMPOTENT: p.VERIFY, p.UNKNOWN: p.VERIFY}
    assert set(by_class) == set(p.CLASSES)
    for tool_class, interactive in itertools.product(p.CLASSES, (False, True)):
        for found in (p.SUCCEEDED, p.FAILED, p.NOT_STARTED):
            assert expected_action(found, tool_class, interactive) == p.SKIP, (found, tool_class, interactive)
        want = p.RETRY if interactive else by_class[tool_class]
        assert expected_action(p.OUTCOME_UNKNOWN, tool_class, interactive) == want, (tool_class, interactive)


def test_succeeded_decided_retry_is_rule_1():
    recovery = swap(RECOVERY, decision("c1", p.SUCCEEDED, p.SKIP), decision("c1", p.SUCCEEDED, p.RETRY))
    ledger = LEDGER + [invoked("c1", "read_file", 1)]
    verdict = check(SCENARIO, evidence(recovery=recovery, ledger=ledger), GOLDEN)
    assert verdict.valid is False
    assert verdict.properties[0] == "succeeded-not-replayed"
    assert all(finding.call == "c1" and finding.kill == "c2:after_effect" for finding in verdict.findings)
    decided = [f for f in verdict.findings if "decided RETRY" in f.message]
    assert decided and decided[0].evidence[-1].startswith("journal.jsonl:4:")
    replayed = [f for f in verdict.findings if "ran again 1 time(s) after the kill" in f.message]
    assert replayed and replayed[0].evidence == ("journal-at-kill-0.jsonl:2: " + '{"kind": "finished", "op": "t-op1", "status": "SUCCEEDED"}',
                                                 "ledger.jsonl:7: " + '{"call": "c1", "incarnation": 1, "invoked": "read_file", "pid": 101}')


def test_non_idempotent_retried_is_rule_2_and_its_double_effect_rule_3():
    recovery = [decision("c1", p.SUCCEEDED, p.SKIP), decision("c2", p.OUTCOME_UNKNOWN, p.RETRY),
                decision("c3", p.NOT_STARTED, p.SKIP), started("c2", "append", attempt=2), finished("c2"),
                started("c3", "ask_user"), finished("c3"), {"kind": "task", "status": "COMPLETED"}]
    ledger = LEDGER[:4] + [invoked("c2", "append", 1), effect("c2", "append", 1), invoked("c3", "ask_user", 1)]
    verdict = check(SCENARIO, evidence(recovery=recovery, ledger=ledger, world={"files/a": "xx"}), GOLDEN)
    assert verdict.properties == ("interrupted-action", "verify-before-replay", "world-equals-golden")
    assert ("append is NON_IDEMPOTENT (the class its started record snapshots, from the catalogue given to "
            "incarnation 0) so the rules say VERIFY") in verdict.findings[0].message
    assert any("had 1 effect record(s) at the kill, where the crash-free run leaves 1, and the recovery added 1 more"
               in f.message for f in verdict.findings)


def test_interrupted_question_must_be_asked_again():
    at_kill = AT_KILL + [finished("c2"), started("c3", "ask_user")]
    recovery = [decision("c1", p.SUCCEEDED, p.SKIP), decision("c2", p.SUCCEEDED, p.SKIP),
                decision("c3", p.OUTCOME_UNKNOWN, p.VERIFY), {"kind": "verified", "op": "t-op3", "effect_found": False},
                started("c3", "ask_user", attempt=2), finished("c3"), {"kind": "task", "status": "COMPLETED"}]
    ledger = LEDGER[:3] + [invoked("c3", "ask_user", 0), {"killed": 0, "point": "c3:after_effect"},
                           {"probe": "effect_present", "call": "c3", "tool": "ask_user", "incarnation": 1, "pid": 101},
                           invoked("c3", "ask_user", 1)]
    verdict = check(SCENARIO, evidence(at_kill=at_kill, recovery=recovery, ledger=ledger), GOLDEN)
    assert verdict.properties == ("interrupted-action",)
    assert "the user-interaction family" in verdict.findings[0].message


def test_verify_that_replays_without_a_probe_is_rule_3():
    ledger = swap(LEDGER, LEDGER[4], invoked("c2", "append", 1))
    verdict = check(SCENARIO, evidence(ledger=ledger), GOLDEN)
    assert "verify-before-replay" in verdict.properties


def test_failed_operation_replayed_is_rule_4():
    at_kill = [started("c1", "read_file"), finished("c1", p.FAILED), started("c2", "append")]
    recovery = swap(RECOVERY, decision("c1", p.SUCCEEDED, p.SKIP), decision("c1", p.FAILED, p.SKIP))
    ledger = LEDGER + [invoked("c1", "read_file", 1)]
    verdict = check(SCENARIO, evidence(at_kill=at_kill, recovery=recovery, ledger=ledger), GOLDEN)
    assert verdict.properties == ("failed-not-replayed",)


def test_not_started_call_decided_retry_is_rule_4():
    recovery = swap(RECOVERY, decision("c3", p.NOT_STARTED, p.SKIP), decision("c3", p.NOT_STARTED, p.RETRY))
    verdict = check(SCENARIO, evidence(recovery=recovery), GOLDEN)
    assert verdict.properties == ("failed-not-replayed",)


def test_crashing_recovery_and_unfinished_task_are_liveness():
    incarnations = (INCARNATIONS[0], Incarnation(1, 101, 1, None, stderr_tail="KeyError: 'op'"))
    verdict = check(SCENARIO, evidence(recovery=RECOVERY[:3], incarnations=incarnations), GOLDEN)
    assert verdict.properties == ("liveness",)
    messages = " | ".join(f.message for f in verdict.findings)
    assert "incarnation 1 exited with code 1 on its own; stderr ends: KeyError: 'op'" in messages
    assert "the task did not complete within 2 incarnations" in messages


def test_world_differing_from_golden_is_rule_5_with_a_diff():
    verdict = check(SCENARIO, evidence(world={"files/a": "y"}), GOLDEN)
    assert verdict.properties == ("world-equals-golden",)
    assert "changed files/a:" in verdict.findings[0].evidence


def test_tool_run_before_started_was_durable_is_write_ahead():
    verdict = check(SCENARIO, evidence(at_kill=AT_KILL[:2]), GOLDEN)
    assert "write-ahead" in verdict.properties
    assert "before its started record was durable" in " ".join(f.message for f in verdict.findings)


def test_finished_without_the_tool_running_is_write_ahead():
    ledger = [record for record in LEDGER if record != invoked("c1", "read_file", 0)]
    verdict = check(SCENARIO, evidence(ledger=ledger), GOLDEN)
    assert verdict.properties == ("write-ahead",)
    assert "the ledger shows its tool never ran" in verdict.findings[0].message


@pytest.mark.parametrize(("record", "message"), [
    (started("c1", "read_file", **{"class": "NON_IDEMPOTENT"}), "snapshots class NON_IDEMPOTENT"),
    (started("c1", "read_file", op="t-op2"), "op id t-op2 is used for calls c1 and c2"),
])
def test_malformed_journal_is_named(record, message):
    at_kill = [record, finished("c1") if "op" not in record or record["op"] == "t-op1" else {"kind": "x"},
               started("c2", "append")]
    verdict = check(SCENARIO, evidence(at_kill=at_kill), GOLDEN)
    assert "journal-well-formed" in verdict.properties
    assert any(message in finding.message for finding in verdict.findings)


def test_missing_decision_is_named():
    verdict = check(SCENARIO, evidence(recovery=RECOVERY[1:]), GOLDEN)
    assert verdict.properties == ("journal-well-formed",)
    assert "wrote no decision for c1" in verdict.findings[0].message


def test_ill_typed_record_is_reported_and_left_out():
    broken = swap(RECOVERY, decision("c3", p.NOT_STARTED, p.SKIP), {**decision("c3", p.NOT_STARTED, p.SKIP), "call": ["c3"]})
    verdict = check(SCENARIO, evidence(recovery=broken), GOLDEN)
    assert verdict.error is None and verdict.valid is False
    assert "journal.jsonl:6: decision record with call=['c3']; not trusted" in verdict.findings[0].message


def test_a_checker_bug_makes_its_rule_unknown_and_keeps_the_other_rules_findings():
    """Old: one exception gave Verdict(None, ()) and threw every finding away."""
    def broken(facts):
        raise RuntimeError("bug in the checker")

    judgements = tuple(replace(judgement, judge=broken) if "liveness" in judgement.finds else judgement
                       for judgement in checker.JUDGEMENTS)
    verdict = check(SCENARIO, evidence(), GOLDEN, judgements)
    assert verdict.valid is None
    assert verdict.error == "checker error, so liveness cannot be judged: RuntimeError: bug in the checker"
    failing = check(SCENARIO, evidence(world={"files/a": "xx"}), GOLDEN, judgements)
    assert failing.valid is False and failing.properties == ("world-equals-golden",)
    assert "not judged: liveness: checker error: RuntimeError: bug in the checker" in failing.notes
    statuses = {result.rule: result.status for result in failing.rules}
    assert statuses["liveness"] == "unknown" and statuses["world-equals-golden"] == "failed"
    assert statuses["write-ahead"] == "passed"


def test_a_rule_is_a_property_called_by_one_name_in_results_findings_and_json():
    """A CI script reading verdict.json finds each finding's property among the rules, failed, under that name."""
    assert set(checker.RULES) == set(checker.PROPERTIES)
    assert set(checker.BLACK_BOX_RULES) < set(checker.PROPERTIES)
    recovery = swap(RECOVERY, decision("c1", p.SUCCEEDED, p.SKIP), decision("c1", p.SUCCEEDED, p.RETRY))
    verdict = check(SCENARIO, evidence(recovery=recovery, world={"files/a": "xx"}), GOLDEN)
    shape = verdict.to_json()
    assert [finding["property"] for finding in shape["findings"]] == ["succeeded-not-replayed", "world-equals-golden"]
    assert list(shape["rules"]) == list(checker.RULES)
    assert {rule for rule, result in shape["rules"].items() if result["status"] == "failed"} == set(verdict.properties)


def test_a_finding_naming_a_property_its_judgement_does_not_judge_is_a_checker_error():
    """A judgement that strays would fail a rule whose other judgements' evidence was never asked for."""
    def stray(facts):
        return [Finding("liveness", "found by the world's judgement")]

    judgements = tuple(replace(judgement, judge=stray) if "world-equals-golden" in judgement.finds else judgement
                       for judgement in checker.JUDGEMENTS)
    verdict = check(SCENARIO, evidence(), GOLDEN, judgements)
    assert verdict.valid is None and not verdict.findings
    assert verdict.error == ("checker error, so world-equals-golden cannot be judged: InternalError: stray found "
                             "liveness, which it does not judge")


def test_attempts_must_count_up_from_one():
    recovery = [decision("c1", p.SUCCEEDED, p.SKIP), decision("c2", p.OUTCOME_UNKNOWN, p.VERIFY),
                decision("c3", p.NOT_STARTED, p.SKIP), {"kind": "verified", "op": "t-op2", "effect_found": False},
                started("c2", "append", attempt=3), finished("c2"), started("c3", "ask_user"), finished("c3"),
                {"kind": "task", "status": "COMPLETED"}]
    ledger = LEDGER[:5] + [invoked("c2", "append", 1), invoked("c3", "ask_user", 1)]
    verdict = check(SCENARIO, evidence(recovery=recovery, ledger=ledger), GOLDEN)
    assert verdict.properties == ("journal-well-formed",)
    assert "started record of c2 says attempt 3, expected 2" in verdict.findings[0].message
