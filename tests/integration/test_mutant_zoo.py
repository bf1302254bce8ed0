"""Detection power: every mutant of the zoo is caught, by its cheapest mode, with the
property its bug breaks named in the first failing run."""

from __future__ import annotations

import json
import tempfile

import pytest

from killpoint.harness.schedules.hunt import hunt
from killpoint.scenarios.mutants import zoo
from tests.helpers import ROOT

ZOO = zoo()


def test_the_zoo_has_fifteen_kinds_of_bug():
    assert len(ZOO) >= 15
    assert len({mutant.bug for mutant in ZOO}) == len(ZOO)
    assert len({mutant.caught_by for mutant in ZOO}) >= 6  # the bugs break different rules


@pytest.mark.parametrize("mutant", ZOO, ids=[mutant.name for mutant in ZOO])
def test_mutant_is_caught_with_its_property_named(killpoint, tmp_path, mutant):
    result = killpoint("run", ROOT / "scenarios" / f"{mutant.scenario}.toml", *mutant.caught_with,
                       "--workload", mutant.workload, "-x", "--json", tmp_path / "report.json")
    assert result.exit_code == 1, result.out[-2000:]
    failing = [run for run in json.loads((tmp_path / "report.json").read_text())["runs"] if run["valid"] is False]
    assert mutant.caught_by in {finding["property"] for finding in failing[0]["findings"]}, failing[0]["findings"]


def test_a_hunt_that_catches_a_mutant_keeps_the_evidence_of_the_shrunk_run(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mutant = next(mutant for mutant in ZOO if mutant.name == "retry_non_idempotent")
    result = hunt([ROOT / "scenarios" / "demo.toml"], mutant.workload, tmp_path / "out", max_examples=300, seed=1)
    found = result.found
    assert found is not None
    assert found.evidence.parent.parent == tmp_path and (found.evidence / "ledger.jsonl").is_file()
    assert found.scenario_file == tmp_path / "out" / "hunt-found.toml" and found.scenario_file.is_file()
    # The same evidence as `killpoint run`'s: a verdict.json whose token replays the shrunk scenario file.
    verdict = json.loads((found.evidence / "verdict.json").read_text())
    assert (verdict["outcome"], verdict["token"]) == ("failed", found.token)
    assert {finding["property"] for finding in verdict["findings"]} == set(found.verdict.properties)
