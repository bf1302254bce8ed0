"""world-equals-golden for an agent whose model asks for calls side by side: their effects' order is the agent's.

The crash-free run and a recovery may run a turn's two calls in either order;
the world's bookkeeping (the file history) then lists the same changes in
another order, which is no difference. The same changes in the same files, one
made twice, or a file's text in another order, still are.
"""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.judge.properties import Facts, world_differs
from tests.helpers import ROOT

REFERENCE = load_scenario(ROOT / "scenarios" / "agents" / "reference_agent.toml")  # turns [["c1"], ["c2", "c3"]]
C2 = {"op": "write_file", "path": "orders/summary.txt", "ref": "c2"}
C3 = {"op": "append", "path": "orders/log.txt", "ref": "c3"}
FILES = {"files/orders/summary.txt": "2 x tea\n", "files/orders/log.txt": "ordered 2 x tea\n"}


def world(*changes: dict[str, str], files: dict[str, str] | None = None) -> dict[str, str]:
    return {**FILES, **(files or {}), "state/file_history.json": json.dumps({"changes": list(changes), "log": []})}


def facts(scenario: Any, golden: dict[str, str], recovered: dict[str, str]) -> Any:
    """What ``world_differs`` reads: a completed black-box run (its last incarnation exited 0)."""
    last = SimpleNamespace(killed_at=None, timed_out=False, exit_code=0)
    return Facts(scenario, SimpleNamespace(world=recovered, incarnations=[last]), SimpleNamespace(world=golden))


def test_a_parallel_turns_effects_in_another_order_are_the_same_world():
    assert world_differs(facts(REFERENCE, world(C2, C3), world(C3, C2))) == []


@pytest.mark.parametrize("recovered", [
    world(C2, C3, C3),                                     # an effect made twice
    world(C2),                                             # an effect never made
    world(C3, C2, files={"files/orders/log.txt": "ordered 2 x tea\nordered 2 x tea\n"}),  # a file differs
], ids=["twice", "never", "a-file"])
def test_a_real_difference_is_still_one(recovered):
    assert [finding.property for finding in world_differs(facts(REFERENCE, world(C2, C3), recovered))] == [
        "world-equals-golden"]


def test_without_a_parallel_turn_the_order_is_part_of_the_world():
    sequential = replace(REFERENCE, agent={"answer": "Done."})
    assert world_differs(facts(sequential, world(C2, C3), world(C3, C2)))
