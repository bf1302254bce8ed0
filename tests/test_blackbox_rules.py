"""The black-box rules on hand-built evidence: a store's durable states, a ledger and a world (no process runs)."""

from __future__ import annotations

from dataclasses import replace

from killpoint import protocol as p
from killpoint.harness.judge.blackbox import NO_PROBE_HINT
from killpoint.harness.judge.checker import BLACK_BOX_RULES, check
from killpoint.harness.judge.evidence import Evidence
from killpoint.harness.judge.stores import DurableState, StepRecord, store_table
from killpoint.harness.layout import CATALOGUE_FILE, DRIFTED_CATALOGUE_FILE
from killpoint.harness.model import Incarnation
from tests.test_checker import CATALOGUE, GOLDEN, SCENARIO, WORLD, effect, invoked, lines

BLACK_BOX = replace(SCENARIO, journal=store_table({"format": "killpoint"}))
PROBE_C2 = {"probe": "effect_present", "call": "c2", "tool": "append", "incarnation": 1, "pid": 101}


def store(*records: tuple[str, str], records_start: bool = True, completed: bool | None = None) -> DurableState:
    return DurableState({call: StepRecord(call, status, f"store row of {call} {status}") for call, status in records},
                        records_start, completed)


ALL_DONE = store(("c1", p.SUCCEEDED), ("c2", p.SUCCEEDED), ("c3", p.SUCCEEDED), completed=True)
# A correct run: killed at c2:after_effect; the recovery probes c2, finds its effect, and goes on with c3.
AT_KILL = store(("c1", p.SUCCEEDED), ("c2", p.RUNNING))
LEDGER = [invoked("c1", "read_file", 0), invoked("c2", "append", 0), effect("c2", "append", 0),
          {"killed": 0, "point": "c2:after_effect"}, PROBE_C2, invoked("c3", "ask_user", 1)]
INCARNATIONS = (Incarnation(0, 100, None, "c2:after_effect"), Incarnation(1, 101, 0, None))


def evidence(*, at_kill=AT_KILL, ledger=LEDGER, final=ALL_DONE, golden=ALL_DONE, world=WORLD,
             incarnations=INCARNATIONS, found=None, catalogues=None, unreadable=None) -> Evidence:
    return Evidence(lines("journal.jsonl", []), (lines("journal-at-kill-0.jsonl", []),), lines("ledger.jsonl", ledger),
                    world, incarnations, catalogues=catalogues or {CATALOGUE_FILE: CATALOGUE},
                    unreadable=unreadable or {}, stores_at_kill=(at_kill,) if at_kill is not None else (),
                    stores_found=(found,), store_final=final, golden_store_final=golden)


def by_property(verdict) -> dict[str, list]:
    found: dict[str, list] = {}
    for finding in verdict.findings:
        found.setdefault(finding.property, []).append(finding)
    return found


def test_a_correct_recovery_passes_black_box_and_says_how_it_was_judged():
    verdict = check(BLACK_BOX, evidence(), GOLDEN)
    assert verdict.valid is True, verdict.findings
    assert verdict.notes[0] == "judged black-box from killpoint"
    assert [result.rule for result in verdict.rules] == list(BLACK_BOX_RULES)
    # no decision records or killpoint journal to judge
    assert {"interrupted-action", "journal-well-formed"}.isdisjoint(result.rule for result in verdict.rules)


def test_a_recorded_success_run_again_breaks_skip_quoting_the_row_and_the_replay():
    ledger = [*LEDGER, invoked("c1", "read_file", 1)]
    (finding,) = check(BLACK_BOX, evidence(ledger=ledger), GOLDEN).findings
    assert (finding.property, finding.call, finding.kill) == ("succeeded-not-replayed", "c1", "c2:after_effect")
    assert "c1 was recorded SUCCEEDED in the store at the kill, yet its tool read_file ran again 1 time(s)" in finding.message
    assert finding.evidence == ("store-at-kill-0: store row of c1 SUCCEEDED",
                                'ledger.jsonl:7: {"call": "c1", "incarnation": 1, "invoked": "read_file", "pid": 101}')


def test_a_recorded_failure_run_again_breaks_failed_not_replayed():
    at_kill = store(("c1", p.FAILED), ("c2", p.RUNNING))
    verdict = check(BLACK_BOX, evidence(at_kill=at_kill, ledger=[*LEDGER, invoked("c1", "read_file", 1)]), GOLDEN)
    assert list(by_property(verdict)) == ["failed-not-replayed"]


def test_an_interrupted_non_idempotent_call_rerun_without_a_probe_is_at_least_once_with_its_effect_count():
    """Killed after the effect: the ledger's count is split at the kill, one before it and the repeat after."""
    ledger = [*LEDGER[:4], invoked("c2", "append", 1), effect("c2", "append", 1), invoked("c3", "ask_user", 1)]
    (finding,) = check(BLACK_BOX, evidence(ledger=ledger), GOLDEN).findings
    assert (finding.property, finding.call) == ("verify-before-replay", "c2")
    assert finding.message == (
        "at-least-once: c2 (append, NON_IDEMPOTENT) was re-executed after the kill without a read-only check; its "
        "effect is in the ledger 2 time(s), 1 before the kill and 1 after it (the crash-free run: 1); " + NO_PROBE_HINT)
    assert finding.evidence[0] == "store-at-kill-0: store row of c2 RUNNING"
    assert sum('"effect"' in quoted for quoted in finding.evidence) == 2


def test_a_call_interrupted_with_no_store_record_is_judged_from_its_invoked_line():
    """A framework records a step only once it returned: the ledger's invoked line says it was under way.

    The finding says the store holds no record of it and quotes that absence,
    with what the store does hold, before the ledger lines.
    """
    at_kill = store(("c1", p.SUCCEEDED), records_start=False)
    ledger = [*LEDGER[:4], invoked("c2", "append", 1), effect("c2", "append", 1), invoked("c3", "ask_user", 1)]
    verdict = check(BLACK_BOX, evidence(at_kill=at_kill, ledger=ledger), GOLDEN)
    assert [finding.property for finding in verdict.findings] == ["verify-before-replay"]
    assert any("records a step only once it returns" in note for note in verdict.notes)
    (finding,) = verdict.findings
    assert finding.message == (
        "at-least-once: c2 (append, NON_IDEMPOTENT) was re-executed after the kill without a read-only check; the "
        "store the recovery started from (store-at-kill-0) holds no record of c2: only the ledger's invoked line says "
        "it was under way; its effect is in the ledger 2 time(s), 1 before the kill and 1 after it (the crash-free "
        "run: 1); " + NO_PROBE_HINT)
    assert finding.evidence[:2] == (
        "store-at-kill-0: no record of c2 (it holds 1 record(s): c1 SUCCEEDED)",
        'ledger.jsonl:2: {"call": "c2", "incarnation": 0, "invoked": "append", "pid": 100}')


def test_a_record_lost_from_the_store_the_recovery_found_is_named_in_that_copy():
    """A fault after the kill cut c2's record: the finding names the copy the recovery started from, not the one
    at the kill, as the store that holds no record of it."""
    ledger = [*LEDGER[:3], {"killed": 0, "point": "c2:after_effect", "torn": 500}, invoked("c2", "append", 1),
              effect("c2", "append", 1), invoked("c3", "ask_user", 1)]
    incarnations = (Incarnation(0, 100, None, "c2:after_effect/torn:500"), INCARNATIONS[1])
    verdict = check(BLACK_BOX, evidence(found=store(("c1", p.SUCCEEDED)), ledger=ledger, incarnations=incarnations),
                    GOLDEN)
    (finding,) = verdict.findings
    assert finding.property == "verify-before-replay"
    assert ("the store the recovery started from (store-at-kill-0.found) holds no record of c2: only the ledger's "
            "invoked line says it was under way; its effect is in the ledger 2 time(s), 1 before the kill and 1 after "
            "it (the crash-free run: 1); ") in finding.message
    assert finding.evidence[0] == "store-at-kill-0.found: no record of c2 (it holds 1 record(s): c1 SUCCEEDED)"


def test_a_completed_step_the_power_loss_took_from_the_store_is_named_with_the_record_the_kill_left():
    """The kill left c2 SUCCEEDED in the store, the power loss dropped that commit, and the recovery ran c2 again:
    the finding says the store had it as the kill left it, and quotes that row."""
    ledger = [*LEDGER[:3], {"killed": 0, "point": "c2:step_recorded/power"}, invoked("c2", "append", 1),
              effect("c2", "append", 1), invoked("c3", "ask_user", 1)]
    incarnations = (Incarnation(0, 100, None, "c2:step_recorded/power"), INCARNATIONS[1])
    # A store that records a step once it returns (DBOS): write-ahead's started half is not judged from it.
    verdict = check(BLACK_BOX, evidence(at_kill=store(("c1", p.SUCCEEDED), ("c2", p.SUCCEEDED), records_start=False),
                                        found=store(("c1", p.SUCCEEDED), records_start=False), ledger=ledger,
                                        incarnations=incarnations), GOLDEN)
    (finding,) = verdict.findings
    assert finding.property == "verify-before-replay"
    assert ("holds no record of c2: only the ledger's invoked line says it was under way; yet the store as the kill "
            "left it (store-at-kill-0) held it SUCCEEDED: the fault after the kill (a power loss, a torn tail) lost "
            "that record; ") in finding.message
    assert finding.evidence[:2] == ("store-at-kill-0.found: no record of c2 (it holds 1 record(s): c1 SUCCEEDED)",
                                    "store row of c2 SUCCEEDED")


def test_a_rerun_after_a_kill_at_step_entered_does_not_say_the_effect_ran_before_the_kill():
    """Killed at step_entered, before the step's effect: the one effect in the ledger is the re-run's.

    The verdict is the same (no probe before a VERIFY), but the count is said
    as all after the kill, with the point that puts the kill before the effect.
    """
    at_kill = store(("c1", p.SUCCEEDED), records_start=False)
    ledger = [invoked("c1", "read_file", 0), invoked("c2", "append", 0), {"killed": 0, "point": "c2:step_entered"},
              invoked("c2", "append", 1), effect("c2", "append", 1), invoked("c3", "ask_user", 1)]
    incarnations = (Incarnation(0, 100, None, "c2:step_entered"), INCARNATIONS[1])
    (finding,) = check(BLACK_BOX, evidence(at_kill=at_kill, ledger=ledger, incarnations=incarnations), GOLDEN).findings
    assert (finding.property, finding.call, finding.kill) == ("verify-before-replay", "c2", "c2:step_entered")
    assert finding.message == (
        "at-least-once: c2 (append, NON_IDEMPOTENT) was re-executed after the kill without a read-only check; the "
        "store the recovery started from (store-at-kill-0) holds no record of c2: only the ledger's invoked line says "
        "it was under way; its effect is in the ledger 1 time(s), 0 before the kill and 1 after it (the crash-free "
        "run: 1); the kill came at step_entered, before the incarnation it killed could make the effect; "
        + NO_PROBE_HINT)
    assert "happened" not in finding.message
    assert finding.evidence[0] == "store-at-kill-0: no record of c2 (it holds 1 record(s): c1 SUCCEEDED)"
    empty = check(BLACK_BOX, evidence(at_kill=store(records_start=False), ledger=ledger, incarnations=incarnations),
                  GOLDEN)
    assert [finding.evidence[0] for finding in empty.findings] == ["store-at-kill-0: no record of c2 (it holds no "
                                                                   "record at all)"]


def test_a_kill_before_another_calls_effect_or_after_a_point_is_not_said_to_precede_this_ones():
    """Only a kill at this call's own point before its effect proves the killed incarnation made none of it.

    ``c2:after_started+`` is the first point after it, which may be after the
    effect; there the ledger's split is all that is said.
    """
    at_kill = store(("c1", p.SUCCEEDED), ("c2", p.RUNNING), ("c3", p.RUNNING))
    for killed_at in ("c3:after_started", "c2:after_started+"):
        ledger = [invoked("c1", "read_file", 0), invoked("c2", "append", 0), {"killed": 0, "point": killed_at},
                  invoked("c2", "append", 1), effect("c2", "append", 1), invoked("c3", "ask_user", 1)]
        incarnations = (Incarnation(0, 100, None, killed_at), INCARNATIONS[1])
        (finding,) = check(BLACK_BOX, evidence(at_kill=at_kill, ledger=ledger, incarnations=incarnations),
                           GOLDEN).findings
        assert finding.call == "c2" and "0 before the kill and 1 after it (the crash-free run: 1)" in finding.message
        assert "the kill came at" not in finding.message


def test_a_rerun_that_left_no_effect_says_the_ledger_holds_none():
    ledger = [*LEDGER[:2], {"killed": 0, "point": "c2:after_started"}, invoked("c2", "append", 1),
              invoked("c3", "ask_user", 1)]
    incarnations = (Incarnation(0, 100, None, "c2:after_started"), INCARNATIONS[1])
    (finding,) = check(BLACK_BOX, evidence(ledger=ledger, incarnations=incarnations), GOLDEN).findings
    assert "; its effect is not in the ledger (the crash-free run: 1); no read-only probe" in finding.message
    assert finding.evidence[0] == "store-at-kill-0: store row of c2 RUNNING"


def test_a_rerun_after_a_probe_elsewhere_drops_the_hint_but_not_the_finding():
    ledger = [*LEDGER[:4], invoked("c2", "append", 1), PROBE_C2, invoked("c3", "ask_user", 1)]
    (finding,) = check(BLACK_BOX, evidence(ledger=ledger), GOLDEN).findings
    assert finding.message.startswith("at-least-once: c2") and "no read-only probe" not in finding.message


def test_a_probe_then_an_extra_effect_is_still_a_repeat():
    ledger = [*LEDGER[:5], invoked("c2", "append", 1), effect("c2", "append", 1), invoked("c3", "ask_user", 1)]
    (finding,) = check(BLACK_BOX, evidence(ledger=ledger), GOLDEN).findings
    assert finding.property == "verify-before-replay" and "an effect that had already happened was repeated" in finding.message


def test_an_interrupted_read_or_question_may_simply_run_again():
    """RETRY calls (READ_ONLY, interactive) re-run with no probe: no finding, the false-alarm guard."""
    at_kill = store(("c1", p.RUNNING))
    ledger = [invoked("c1", "read_file", 0), {"killed": 0, "point": "c1:after_effect"}, invoked("c1", "read_file", 1),
              invoked("c2", "append", 1), effect("c2", "append", 1), invoked("c3", "ask_user", 1)]
    assert check(BLACK_BOX, evidence(at_kill=at_kill, ledger=ledger), GOLDEN).valid is True
    at_kill = store(("c1", p.SUCCEEDED), ("c2", p.SUCCEEDED), ("c3", p.RUNNING))
    ledger = [invoked("c1", "read_file", 0), invoked("c2", "append", 0), effect("c2", "append", 0),
              invoked("c3", "ask_user", 0), {"killed": 0, "point": "c3:after_started"}, invoked("c3", "ask_user", 1)]
    assert check(BLACK_BOX, evidence(at_kill=at_kill, ledger=ledger), GOLDEN).valid is True


def test_a_tool_run_with_no_record_where_the_store_records_starts_breaks_write_ahead():
    at_kill = store(("c1", p.SUCCEEDED))
    (finding,) = check(BLACK_BOX, evidence(at_kill=at_kill), GOLDEN).findings
    assert (finding.property, finding.call) == ("write-ahead", "c2")
    assert finding.evidence == ('ledger.jsonl:2: {"call": "c2", "incarnation": 0, "invoked": "append", "pid": 100}',)


def test_a_store_that_records_no_start_is_not_held_to_write_ahead_and_says_so():
    verdict = check(BLACK_BOX, evidence(at_kill=store(("c1", p.SUCCEEDED), records_start=False)), GOLDEN)
    assert verdict.valid is True, verdict.findings
    assert any(note.startswith("write-ahead's started half is not judged: the store (killpoint)")
               for note in verdict.notes)


def test_a_call_the_crash_free_run_recorded_and_this_run_lost_is_liveness():
    final = store(("c1", p.SUCCEEDED), ("c2", p.RUNNING), completed=False)
    findings = by_property(check(BLACK_BOX, evidence(final=final), GOLDEN))["liveness"]
    messages = [finding.message for finding in findings]
    assert ("c2's run was lost after the crash: the crash-free run's store records it SUCCEEDED, this run's final "
            "store holds it RUNNING") in messages
    assert any(message.startswith("c3's run was lost after the crash") and "holds no record of it" in message
               for message in messages)
    assert "the store does not say the task finished, as the crash-free run's does" in messages
    lost_c3 = next(finding for finding in findings if finding.call == "c3")
    assert lost_c3.evidence[0] == "golden store-final: store row of c3 SUCCEEDED"


def test_a_last_incarnation_that_does_not_exit_0_did_not_complete():
    incarnations = (INCARNATIONS[0], replace(INCARNATIONS[1], exit_code=3))
    messages = [finding.message for finding in check(BLACK_BOX, evidence(incarnations=incarnations), GOLDEN).findings]
    assert "incarnation 1 exited with code 3 on its own" in messages
    assert "the task did not complete within 2 incarnations: the last did not exit 0" in messages


def test_the_world_is_held_to_the_crash_free_run_once_the_last_incarnation_exits_0():
    verdict = check(BLACK_BOX, evidence(world={"files/a": "xx"}), GOLDEN)
    assert list(by_property(verdict)) == ["world-equals-golden"]


def test_a_missing_or_unreadable_store_copy_makes_its_rules_unknown_never_a_pass():
    lost = check(BLACK_BOX, evidence(at_kill=None, unreadable={"store-at-kill-0": "store-at-kill-0 is missing"}), GOLDEN)
    assert lost.valid is None and "store-at-kill-0 is missing" in lost.error
    statuses = {result.rule: result.status for result in lost.rules}
    for rule in ("succeeded-not-replayed", "failed-not-replayed", "verify-before-replay", "write-ahead"):
        assert statuses[rule] == "unknown", rule
    no_final = check(BLACK_BOX, evidence(final=None, unreadable={"store-final": "store-final was refused: x"}), GOLDEN)
    assert no_final.valid is None and {result.rule: result.status for result in no_final.rules}["liveness"] == "unknown"


def test_the_torn_store_the_next_incarnation_found_decides_what_it_must_skip():
    """A torn tail cut c1's finished record: the next incarnation found c1 RUNNING, so running it again is right."""
    at_kill = store(("c1", p.SUCCEEDED))
    found = store(("c1", p.RUNNING))
    ledger = [invoked("c1", "read_file", 0), {"killed": 0, "point": "c1:after_finished", "torn": 500},
              invoked("c1", "read_file", 1), invoked("c2", "append", 1), effect("c2", "append", 1),
              invoked("c3", "ask_user", 1)]
    incarnations = (Incarnation(0, 100, None, "c1:after_finished/torn:500"), INCARNATIONS[1])
    verdict = check(BLACK_BOX, evidence(at_kill=at_kill, found=found, ledger=ledger, incarnations=incarnations), GOLDEN)
    assert verdict.valid is True, verdict.findings
    untorn = check(BLACK_BOX, evidence(at_kill=at_kill, ledger=ledger, incarnations=incarnations), GOLDEN)
    assert [finding.property for finding in untorn.findings] == ["succeeded-not-replayed"]


def test_an_interrupted_call_is_judged_by_the_catalogue_of_the_incarnation_that_ran_it():
    """Under drift, c2 started in incarnation 0 (append NON_IDEMPOTENT) stays VERIFY though later ones call it READ_ONLY."""
    drifted = CATALOGUE.with_class("append", p.READ_ONLY)
    catalogues = {CATALOGUE_FILE: CATALOGUE, DRIFTED_CATALOGUE_FILE: drifted}
    incarnations = (INCARNATIONS[0], replace(INCARNATIONS[1], catalogue_drift="append=READ_ONLY"))
    ledger = [*LEDGER[:4], invoked("c2", "append", 1), effect("c2", "append", 1), invoked("c3", "ask_user", 1)]
    verdict = check(BLACK_BOX, evidence(ledger=ledger, catalogues=catalogues, incarnations=incarnations), GOLDEN)
    assert [finding.property for finding in verdict.findings] == ["verify-before-replay"]


def test_a_redo_on_the_word_of_a_probe_an_earlier_incarnation_made_needs_no_new_probe():
    """Killed at c2's request (it reached its tool, did nothing), the next incarnation probes c2 (absent) and is
    killed before the redo; the one after redoes c2 on that probe's word, as nothing ran c2 since. Without the
    probe the same redo is at-least-once (the twin below): a correct agent's depth-2 sweep once failed here."""
    at_kill = store(("c1", p.SUCCEEDED), ("c2", p.RUNNING))
    incarnations = (Incarnation(0, 100, None, "c2:after_started"), Incarnation(1, 101, None, "c2:after_started"),
                    Incarnation(2, 102, 0, None))

    def judged(probed: bool) -> list[str]:
        ledger = [invoked("c1", "read_file", 0), invoked("c2", "append", 0), {"killed": 0, "point": "c2:after_started"},
                  *([PROBE_C2] if probed else []), {"killed": 1, "point": "c2:after_started"},
                  invoked("c2", "append", 2), effect("c2", "append", 2), invoked("c3", "ask_user", 2)]
        found = Evidence(lines("journal.jsonl", []), (lines("journal-at-kill-0.jsonl", []),
                                                      lines("journal-at-kill-1.jsonl", [])),
                         lines("ledger.jsonl", ledger), WORLD, incarnations, catalogues={CATALOGUE_FILE: CATALOGUE},
                         stores_at_kill=(at_kill, at_kill), stores_found=(None, None), store_final=ALL_DONE,
                         golden_store_final=ALL_DONE)
        return [finding.property for finding in check(BLACK_BOX, found, GOLDEN).findings]

    assert judged(probed=True) == []
    assert judged(probed=False) == ["verify-before-replay"]
