"""A torn tail cuts killpoint's journal.jsonl: asking it of a runtime judged from its own store is bad input."""

from __future__ import annotations

import dataclasses

import pytest

from killpoint.errors import ConfigError
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.frontends.spec import build_spec
from killpoint.harness.judge.stores import store_table
from tests.helpers import DEMO

OWN_STORE = store_table({"format": "json", "path": "tasks/{task_id}.json", "records": "operations",
                         "fields": {"call": "llmCallId", "status": "status"}, "status": {"SUCCEEDED": ["SUCCEEDED"]}})


@pytest.mark.parametrize("choices", [{"exhaustive": True, "torn_tail": True},
                                     {"kill_at": ["c2:after_started/torn:500"]}], ids=["--torn-tail", "/torn:N"])
def test_a_tear_of_a_store_killpoint_does_not_tear_names_the_flag_and_the_store(choices, tmp_path):
    scenario = dataclasses.replace(load_scenario(DEMO), journal=OWN_STORE)
    with pytest.raises(ConfigError) as refused:
        build_spec(scenario, runs_dir=tmp_path, **choices)
    flag = "--torn-tail" if "torn_tail" in choices else "--kill-at c2:after_started/torn:500"
    assert str(refused.value).startswith(f"{flag}: ")
    assert "journal.format = 'json'" in str(refused.value)


@pytest.mark.parametrize("journal", [None, store_table({"format": "killpoint"})], ids=["white-box", "black-box killpoint journal"])
def test_a_tear_of_killpoints_own_journal_is_accepted(journal, tmp_path):
    scenario = dataclasses.replace(load_scenario(DEMO), journal=journal)
    assert build_spec(scenario, runs_dir=tmp_path, exhaustive=True, torn_tail=True).scenario.journal == journal
