"""The checker never crashes on evidence: garbage, truncated, reordered and duplicated
journals and ledgers all yield a verdict (a finding, or a pass), and no internal error."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from killpoint.harness.judge.checker import PROPERTIES, check
from killpoint.harness.judge.evidence import JsonLines, Line
from killpoint.harness.judge.validate import ledger_problem
from tests.test_checker import AT_KILL, GOLDEN, LEDGER, RECOVERY, SCENARIO, evidence

pytestmark = pytest.mark.hostile  # the bad-input fuzz of the hostile-input suite (docs/security.md)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
FIELDS = ["kind", "op", "call", "tool", "class", "interactive", "attempt", "status", "found", "action",
          "incarnation", "effect_found", "invoked", "effect", "probe", "killed", "point"]


@st.composite
def mangled(draw: st.DrawFn, records: list[dict]) -> list[dict]:
    """Records with some dropped, duplicated, reordered, cut short, or with fields replaced by garbage."""
    records = [dict(record) for record in records]
    for _ in range(draw(st.integers(0, 6))):
        if not records:
            break
        index = draw(st.integers(0, len(records) - 1))
        move = draw(st.sampled_from(["drop", "duplicate", "swap", "garble", "delete_field", "insert"]))
        if move == "drop":
            records.pop(index)
        elif move == "duplicate":
            records.insert(index, dict(records[index]))
        elif move == "swap":
            other = draw(st.integers(0, len(records) - 1))
            records[index], records[other] = records[other], records[index]
        elif move == "garble":
            records[index][draw(st.sampled_from(FIELDS))] = draw(JSON_VALUES)
        elif move == "delete_field" and records[index]:
            records[index].pop(draw(st.sampled_from(sorted(records[index]))))
        else:
            records.insert(index, draw(st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES, max_size=5)))
    if draw(st.booleans()):
        records = records[: draw(st.integers(0, len(records)))]
    return records


def as_lines(source: str, records: list[dict]) -> JsonLines:
    return JsonLines(tuple(Line(source, number, record) for number, record in enumerate(records, start=1)))


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(mangled(AT_KILL), mangled(AT_KILL + RECOVERY), mangled(LEDGER))
@example([], [], [])
@example(AT_KILL, AT_KILL + RECOVERY, [{"killed": 0}] * 3)
@example(AT_KILL, AT_KILL + RECOVERY, LEDGER)
def test_checker_always_gives_a_verdict(at_kill, journal, ledger):
    """A verdict whose findings name a known property and quote only lines that are really in the evidence."""
    sources = {"journal.jsonl": journal, "journal-at-kill-0.jsonl": at_kill, "ledger.jsonl": ledger}
    damaged = replace(evidence(), journal=as_lines("journal.jsonl", journal),
                      journals_at_kill=(as_lines("journal-at-kill-0.jsonl", at_kill),),
                      ledger=as_lines("ledger.jsonl", ledger))
    verdict = check(SCENARIO, damaged, GOLDEN)
    markers = [record["killed"] for record in ledger if "killed" in record and ledger_problem(record) is None]
    if markers == [0]:  # the one kill made has its one trusted marker: the run is judged, never an internal error
        assert verdict.error is None, verdict.error
    else:  # a lost or forged marker: the rules that split the ledger at the kills are unknown, and never a pass
        assert verdict.valid is not True, verdict
        results = {result.rule: result for result in verdict.rules}
        assert results["write-ahead"].status == "unknown", results
        assert "a marker was lost or forged" in (results["write-ahead"].reason or ""), results
        assert verdict.valid is False or verdict.error.startswith("evidence missing"), verdict
    quotable = {line.quote() for source, records in sources.items() for line in as_lines(source, records).lines}
    for finding in verdict.findings:
        assert finding.property in PROPERTIES, finding
        assert set(finding.evidence) <= quotable, finding  # the world is never damaged here, so no world diffs
    if (at_kill, journal, ledger) == (AT_KILL, AT_KILL + RECOVERY, LEDGER):
        assert verdict.valid is True, verdict.findings  # undamaged evidence of a correct recovery
