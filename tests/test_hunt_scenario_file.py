"""The scenario file hunt writes for a shrunk failure keeps what judges it: a runtime's own store stays its judge."""

from __future__ import annotations

import dataclasses

from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.judge.stores import store_table
from killpoint.harness.schedules.hunt import write_scenario
from tests.helpers import DEMO

JOURNAL = store_table({"format": "killpoint", "path": "journal.jsonl"})


def test_a_black_box_scenario_is_written_with_its_journal_table(tmp_path):
    scenario = dataclasses.replace(load_scenario(DEMO), journal=JOURNAL)
    reread = load_scenario(write_scenario(tmp_path / "found.toml", scenario, "shrunk"))
    assert reread.journal == JOURNAL
    assert reread.plan == scenario.plan


def test_a_white_box_scenario_is_written_without_one(tmp_path):
    assert load_scenario(write_scenario(tmp_path / "found.toml", load_scenario(DEMO), "shrunk")).journal is None
