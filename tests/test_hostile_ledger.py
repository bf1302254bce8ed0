"""Unreadable ledger lines: the one a kill can leave is judged without, any other makes the ledger's rules unknown.

A kill can cut a fake tool's append short. The nemesis closes that fragment
with a newline before its marker, and the marker says so (``closed_line``):
the one unreadable line an honest run leaves, and it holds no whole record,
since each tool record is written whole with its newline. Any other line that
does not parse may be junk with a tool's whole record glued on after it;
judged without it, a correct runtime was accused ("its tool never ran") and a
blind replay hidden. The ledgers here are literal bytes, read back from a run
directory as the checker reads a real run.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from killpoint import protocol as p
from killpoint.client import encode_record
from killpoint.harness.faults import nemesis
from killpoint.harness.model import Incarnation, Verdict
from tests.test_checker import AT_KILL, GOLDEN, INCARNATIONS, LEDGER, decision, effect, finished, invoked, started
from tests.test_checker_guards import correct_run, status

pytestmark = pytest.mark.hostile

KILL = {p.LEDGER_KILLED: 0, "point": "c2:after_effect"}
CLOSING_KILL = {**KILL, "closed_line": True}  # as the nemesis marks a kill after closing a fragment
BEFORE, AFTER = LEDGER[:3], LEDGER[4:]  # what incarnation 0 and incarnation 1 appended, around the kill
JUNK = b"~junk~"
# The rules only judgements reading the ledger judge (journal-well-formed is judged on the ledger's kills too).
LEDGER_RULES = ("succeeded-not-replayed", "interrupted-action", "verify-before-replay", "failed-not-replayed",
                "write-ahead")


def ledger(*parts: dict | bytes) -> bytes:
    """A ledger's bytes: each dict a record as the fake tools write it, each bytes written as it is."""
    return b"".join(encode_record(part) if isinstance(part, dict) else part for part in parts)


def glued(*records: dict) -> bytes:
    """Each tool record glued onto junk, as a workload writing an unterminated fragment before each leaves it."""
    return b"".join(encode_record(record) if p.LEDGER_KILLED in record else JUNK + encode_record(record)
                    for record in records)


def assert_ledger_rules_unknown(verdict: Verdict, line: int) -> None:
    assert verdict.valid is None and not verdict.findings, verdict
    for rule in LEDGER_RULES:
        state, reason = status(verdict, rule)
        assert state == "unknown" and f"ledger.jsonl:{line}: " in reason, (rule, reason)
        assert "no kill leaves such a line, and a tool's record may be glued onto it" in reason, reason
    assert status(verdict, "journal-well-formed")[0] == "unknown"  # its decisions are judged at the ledger's kills
    for rule in ("liveness", "world-equals-golden"):  # they read no ledger
        assert status(verdict, rule)[0] == "passed", rule


@pytest.mark.parametrize("fragment", [b'{"call":"c2","effe', b"{", b'{"note": "half a rec', b'{"call":"c\xe2\x82'])
def test_a_record_a_kill_cut_short_is_left_out_and_the_run_judged_as_before(tmp_path, fragment):
    verdict = correct_run(tmp_path, ledger=ledger(*BEFORE, fragment + b"\n", CLOSING_KILL, *AFTER))
    assert verdict.valid is True, verdict
    assert any(note.startswith("ledger line left out: ledger.jsonl:4: ") for note in verdict.notes), verdict.notes


def test_the_nemesis_marks_the_fragment_it_closes_so_the_run_is_judged(tmp_path):
    """The marker as ``mark_kill`` writes it, not as this file spells it."""
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(ledger(*BEFORE, b'{"call":"c2","effe'))
    nemesis.mark_kill(path, 0, None)
    marked = path.read_bytes().replace(b'"point":"timeout"', b'"point":"c2:after_effect"')
    verdict = correct_run(tmp_path / "run", ledger=marked + ledger(*AFTER))
    assert verdict.valid is True, verdict


def test_a_replay_after_a_record_a_kill_cut_short_still_fails(tmp_path):
    replayed = [invoked("c2", "append", 1), *AFTER[1:]]  # c2 run again with no probe first
    verdict = correct_run(tmp_path, ledger=ledger(*BEFORE, b'{"call":"c3","inv\n', CLOSING_KILL, *replayed))
    assert verdict.valid is False and "verify-before-replay" in verdict.properties, verdict


def test_junk_glued_before_every_record_makes_the_ledgers_rules_unknown_not_a_finding(tmp_path):
    """Judged on what was left, the correct run failed write-ahead: "the ledger shows its tool never ran"."""
    assert_ledger_rules_unknown(correct_run(tmp_path, ledger=glued(*LEDGER)), line=1)


def test_junk_glued_onto_a_blind_replay_does_not_hide_it(tmp_path):
    """Without the replay's lines the ledger passed verify-before-replay."""
    replayed = [invoked("c2", "append", 1), *AFTER[1:]]
    verdict = correct_run(tmp_path, ledger=ledger(*BEFORE, KILL) + glued(*replayed))
    assert verdict.valid is None and status(verdict, "verify-before-replay")[0] == "unknown", verdict


@pytest.mark.parametrize("bytes_", [
    # A tool's record glued onto junk just before the marker: its newline is the tool's, so no kill closed it.
    ledger(*BEFORE[:2]) + JUNK + ledger(BEFORE[2], KILL, *AFTER),
    # The same under a marker that closed a fragment: the fragment is closed, the glued line before it is not.
    ledger(BEFORE[0]) + JUNK + ledger(BEFORE[1], BEFORE[2], b"{\n", CLOSING_KILL, *AFTER),
    # A fragment closed at the kill, then the next incarnation's first record glued onto junk after the marker.
    ledger(*BEFORE, b'{"call":"c2","effe\n', CLOSING_KILL) + JUNK + ledger(*AFTER),
    # A whole line of junk, or of bytes that are not UTF-8, among the records.
    ledger(BEFORE[0], b"garbage\n", *BEFORE[1:], KILL, *AFTER),
    ledger(BEFORE[0], b"\xff\xfe\n", *BEFORE[1:], KILL, *AFTER),
], ids=["glued-before-marker", "glued-above-a-closed-fragment", "glued-after-marker", "junk-line", "not-utf8"])
def test_an_unreadable_line_no_kill_leaves_makes_the_ledgers_rules_unknown(tmp_path, bytes_):
    line = next(number for number, text in enumerate(bytes_.split(b"\n"), start=1)
                if text.startswith((JUNK, b"garbage", b"\xff")))
    assert_ledger_rules_unknown(correct_run(tmp_path, ledger=bytes_), line)


def test_an_unterminated_tail_after_the_last_incarnation_is_left_out_as_before(tmp_path):
    """The bytes after the last newline cannot hold a tool's whole record: each is written with its newline."""
    verdict = correct_run(tmp_path, ledger=ledger(*LEDGER) + JUNK + b'{"call":"c3","inv')
    assert verdict.valid is True, verdict
    assert any("ledger.jsonl ends with an unterminated line, left out" in note for note in verdict.notes)


def test_effects_of_the_crash_free_run_that_cannot_be_counted_leave_a_verify_unknown(tmp_path):
    """Killed before c2's tool ran, the recovery VERIFIES c2, finds no effect and completes it: right, as the
    crash-free run leaves one. Counted from a ledger with a line that does not parse, it left none, and the
    completion was judged a repeat."""
    recovery = [decision("c1", p.SUCCEEDED, p.SKIP), decision("c2", p.OUTCOME_UNKNOWN, p.VERIFY),
                decision("c3", p.NOT_STARTED, p.SKIP), {"kind": "verified", "op": "t-op2", "effect_found": False},
                started("c2", "append", attempt=2), finished("c2"), started("c3", "ask_user"), finished("c3"),
                {"kind": "task", "status": p.COMPLETED}]
    ledger = [invoked("c1", "read_file", 0), {p.LEDGER_KILLED: 0, "point": "c2:after_started"},
              {"probe": "effect_present", "call": "c2", "tool": "append", "incarnation": 1, "pid": 101},
              invoked("c2", "append", 1), effect("c2", "append", 1), invoked("c3", "ask_user", 1)]
    incarnations = (Incarnation(0, 100, None, "c2:after_started"), INCARNATIONS[1])
    run = {"journal": AT_KILL + recovery, "copies": [AT_KILL], "ledger": ledger, "incarnations": incarnations}
    assert correct_run(tmp_path / "counted", **run).valid is True
    uncounted = "the crash-free run's effects cannot be counted: ledger.jsonl:3: not JSON: b'~junk~'"
    verdict = correct_run(tmp_path / "uncounted", **run,
                          golden=replace(GOLDEN, effects_per_call={}, effects_unknown=uncounted))
    assert verdict.valid is None and not verdict.findings, verdict
    assert status(verdict, "verify-before-replay") == ("unknown", f"evidence missing: {uncounted}")


def test_a_replay_with_no_probe_fails_even_when_the_crash_free_runs_effects_cannot_be_counted(tmp_path):
    uncounted = "the crash-free run's effects cannot be counted: ledger.jsonl:3: not JSON: b'~junk~'"
    replayed = [invoked("c2", "append", 1), *AFTER[1:]]
    verdict = correct_run(tmp_path, ledger=ledger(*BEFORE, KILL, *replayed),
                          golden=replace(GOLDEN, effects_per_call={}, effects_unknown=uncounted))
    assert verdict.valid is False and status(verdict, "verify-before-replay")[0] == "failed", verdict
    assert "re-ran its tool with no read-only check" in verdict.findings[-1].message
