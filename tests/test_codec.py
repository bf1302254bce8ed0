"""The one codec of what a run persists: each value read back from JSON is the value written, a kill is parsed
once, and a shape this killpoint does not know is refused by every reader, naming its version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from killpoint.errors import ConfigError
from killpoint.harness.codec import SCHEMA, Undecodable
from killpoint.harness.model import (FAILED, PASSED, TIMEOUT, UNKNOWN, Drift, Finding, Incarnation, Job, RuleResult,
                                     RunOutcome, Verdict, parse_kill)
from killpoint.harness.reporting.show import read_verdict

KILLS = ("c3:after_effect", "after_decisions", "c3:after_started+", "@0.0342", "c3:after_started@0.0012",
         "ledger:effect:c3", "c3:after_effect/now", "c2:after_started/torn:500", "c3:after_effect/power",
         "c3:after_effect/power:op:7")
TEXT = st.text(max_size=12)


@st.composite
def verdicts(draw: st.DrawFn) -> Verdict:
    """A verdict as ``checker.check`` makes one: failed exactly when it has findings, valid as its rules merge."""
    statuses = draw(st.lists(st.sampled_from((PASSED, FAILED, UNKNOWN)), min_size=1, max_size=4))
    rules = tuple(RuleResult(f"rule-{number}", status, None if status == PASSED else draw(TEXT))
                  for number, status in enumerate(statuses))
    valid = False if FAILED in statuses else None if UNKNOWN in statuses else True
    findings = tuple(Finding(draw(TEXT), draw(TEXT), draw(st.none() | TEXT), draw(st.none() | st.sampled_from(KILLS)),
                             tuple(draw(st.lists(TEXT, max_size=2)))) for _ in range(draw(st.integers(1, 3)))
                     ) if valid is False else ()
    return Verdict(valid, findings, tuple(draw(st.lists(TEXT, max_size=2))), draw(TEXT) if valid is None else None,
                   rules)


@st.composite
def outcomes(draw: st.DrawFn) -> RunOutcome:
    schedule = tuple(parse_kill(text) for text in draw(st.lists(st.sampled_from(KILLS), max_size=3)))
    landed = draw(st.integers(0, len(schedule)))
    incarnations = [Incarnation(number, 100 + number, None, str(schedule[number]), points=("c1:before_started",),
                                seconds=0.25, kill_latency_s=draw(st.none() | st.just(0.001)))
                    for number in range(landed)]
    timed_out = draw(st.booleans())
    incarnations.append(Incarnation(landed, 100 + landed, None if timed_out else 0, TIMEOUT if timed_out else None,
                                    timed_out=timed_out, seconds=1.5, escaped=tuple(draw(st.lists(TEXT, max_size=1))),
                                    storage_s=draw(st.none() | st.just(0.5))))
    job = Job(draw(st.integers(0, 10_000)), schedule, draw(st.none() | st.integers(0, 2**32)),
              draw(st.none() | st.just(Drift("append", "UNKNOWN"))))
    return RunOutcome(job, Path(f"runs/run-{job.index:05d}"), draw(verdicts()), tuple(incarnations), "kp1.token",
                      draw(st.floats(0, 1000)), draw(st.integers(0, landed)))


def through_json(value: dict) -> dict:
    return json.loads(json.dumps(value))


@given(outcomes())
def test_a_run_reads_back_as_the_value_written(outcome):
    entry = through_json(outcome.to_json())
    assert entry["schema"] == SCHEMA
    assert RunOutcome.from_json(entry) == outcome
    assert Incarnation.all_from_json(entry["incarnations"]) == outcome.incarnations


def test_a_kill_is_read_from_its_text_once():
    incarnation = Incarnation(0, 100, None, "c2:after_started/torn:500")
    assert incarnation.kill is incarnation.kill == parse_kill("c2:after_started/torn:500")
    assert "kill" not in incarnation.to_json()  # what was read is no field of the record


def outcome_entry(**changes: object) -> dict:
    verdict = Verdict(True, rules=(RuleResult("liveness", PASSED),))
    killed = Incarnation(0, 100, None, "c3:after_effect")
    outcome = RunOutcome(Job(0, (parse_kill("c3:after_effect"),)), Path("run-00000"), verdict,
                         (killed, Incarnation(1, 101, 0)), "kp1.token", 1.0)
    return {**through_json(outcome.to_json()), **changes}


def test_a_run_written_before_the_schema_was_recorded_reads_as_version_1():
    entry = outcome_entry()
    del entry["schema"]
    assert RunOutcome.from_json(entry).result == "passed"


def test_a_run_written_before_rule_results_were_recorded_is_read_with_none(tmp_path):
    """verdict.json held no rules before 2026-12-01: killpoint show reads such a run directory all the same."""
    entry = outcome_entry()
    del entry["schema"], entry["rules"], entry["shared_incarnations"]
    (tmp_path / "verdict.json").write_text(json.dumps(entry))
    judged = read_verdict(tmp_path / "verdict.json")
    assert judged.verdict.rules == () and judged.result == "passed" and judged.shared == 0


@pytest.mark.parametrize("schema", [2, "1", None, 1.0])
def test_a_shape_this_killpoint_does_not_know_is_refused_naming_its_version(tmp_path, schema):
    with pytest.raises(Undecodable) as refused:
        RunOutcome.from_json(outcome_entry(schema=schema))
    assert refused.value.problems == (f"schema: {schema!r}, but this killpoint reads version 1: read it with the "
                                      f"killpoint that wrote it",)
    (tmp_path / "verdict.json").write_text(json.dumps(outcome_entry(schema=schema)))
    with pytest.raises(ConfigError, match="schema: .*, but this killpoint reads version 1"):
        read_verdict(tmp_path / "verdict.json")


@pytest.mark.parametrize(("changes", "named"), [
    ({"outcome": "failed"}, "outcome: says failed, but its verdict and incarnations make it passed"),
    ({"valid": False}, "valid: false, but its rules (liveness passed) make it true"),
    ({"schedule": ["c3:nowhere!"]}, "schedule: 'c3:nowhere!' is no kill"),
    ({"seconds": -1}, "seconds: -1 is not a number of seconds"),
    ({"shared_incarnations": 3}, "shared_incarnations: 3 is not a whole number from 0 to the run's 2 incarnations"),
    ({"incarnations": [{"number": 0}]}, "incarnations: entry 0 has no"),
    ({"rules": {"liveness": {"status": "fine"}}}, "rules.liveness: "),
    ({"findings": [{"property": "x"}]}, "findings[0].message: missing"),
])
def test_a_run_at_odds_with_itself_is_refused_naming_the_field(changes, named):
    with pytest.raises(Undecodable) as refused:
        RunOutcome.from_json(outcome_entry(**changes))
    assert any(named in problem for problem in refused.value.problems), refused.value.problems
