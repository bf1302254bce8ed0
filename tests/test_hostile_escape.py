"""A process that escaped its incarnation makes the run unknown, whatever else the evidence says."""

from __future__ import annotations

import dataclasses
import json

import pytest

from killpoint.harness.judge.checker import check
from killpoint.harness.judge.evidence import read_incarnations
from tests.test_checker import GOLDEN, INCARNATIONS, LEDGER, SCENARIO, evidence

pytestmark = pytest.mark.hostile

ESCAPED = "pid 4242 (python escapee.py) held fd 3 workload/escapee.log"


@pytest.mark.parametrize("ledger", [LEDGER, [record for record in LEDGER if "killed" not in record]],
                         ids=["passing", "marker-lost"])
def test_an_escaped_process_makes_every_rule_unknown_and_is_named(ledger):
    killed, recovered = INCARNATIONS
    verdict = check(SCENARIO, evidence(ledger=ledger, incarnations=(
        killed, dataclasses.replace(recovered, escaped=(ESCAPED,)))), GOLDEN)
    assert verdict.valid is None and verdict.findings == ()
    assert f"incarnation 1's {ESCAPED}" in verdict.error and verdict.error.startswith("evidence untrusted")
    assert all(rule.status == "unknown" and ESCAPED in rule.reason for rule in verdict.rules)


def test_the_escaped_are_read_back_from_incarnations_json(tmp_path):
    path = tmp_path / "incarnations.json"
    path.write_text(json.dumps([{**INCARNATIONS[0].to_json(), "points": [], "leftovers": [], "protocol_problems": [],
                                 "escaped": [ESCAPED]}]))
    (incarnation,), problem = read_incarnations(path)
    assert problem is None and incarnation.escaped == (ESCAPED,)
