"""world-equals-golden: what is a difference from the crash-free run's world, and what is not.

The crash-free run and a recovery may run a turn's two calls in either order;
the world's bookkeeping (the file history) then lists the same changes in
another order, which is no difference. The same changes in the same files, one
made twice, or a file's text in another order, still are.

Debris (a temporary file a kill left that nothing touched since, and without
which the world is the crash-free run's) is a note naming it and its kill, not
a finding; an extra file no kill left, or one changed since, is a difference.
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


def facts(scenario: Any, golden: dict[str, str], recovered: dict[str, str], *at_kills: dict[str, str] | None) -> Any:
    """What ``world_differs`` reads: a completed black-box run (its last incarnation exited 0), and the world at
    each of its kills."""
    last = SimpleNamespace(killed_at=None, timed_out=False, exit_code=0)
    return Facts(scenario, SimpleNamespace(world=recovered, incarnations=[last], worlds_at_kill=at_kills),
                 SimpleNamespace(world=golden))


def findings(scenario: Any, golden: dict[str, str], recovered: dict[str, str], *at_kills: dict[str, str] | None
             ) -> list[str]:
    return [finding.property for finding in world_differs(facts(scenario, golden, recovered, *at_kills)).findings]


def test_a_parallel_turns_effects_in_another_order_are_the_same_world():
    assert world_differs(facts(REFERENCE, world(C2, C3), world(C3, C2))).findings == []


@pytest.mark.parametrize("recovered", [
    world(C2, C3, C3),                                     # an effect made twice
    world(C2),                                             # an effect never made
    world(C3, C2, files={"files/orders/log.txt": "ordered 2 x tea\nordered 2 x tea\n"}),  # a file differs
], ids=["twice", "never", "a-file"])
def test_a_real_difference_is_still_one(recovered):
    assert findings(REFERENCE, world(C2, C3), recovered) == ["world-equals-golden"]


def test_without_a_parallel_turn_the_order_is_part_of_the_world():
    sequential = replace(REFERENCE, agent={"answer": "Done."})
    assert findings(sequential, world(C2, C3), world(C3, C2)) == ["world-equals-golden"]


TEMPORARY = "files/orders/summary.txt.5f3a.tmp"


def test_a_temporary_file_a_kill_left_is_debris_named_with_its_kill():
    golden = world(C2, C3)
    recovered = {**golden, TEMPORARY: "2 x"}
    judged = world_differs(facts(REFERENCE, golden, recovered, {**FILES}, {**FILES, TEMPORARY: "2 x"}))
    assert judged.findings == []
    assert [note.split(",")[0] for note in judged.notes] == [f"debris: {TEMPORARY}"]
    assert "left by kill 1" in judged.notes[0]


@pytest.mark.parametrize("at_kills", [
    (),                                          # no kill left it: the run made it
    ({**FILES, TEMPORARY: "2"},),                # the kill left other text: something changed it since
    (None,),                                     # the world at the kill is unreadable: nothing excuses it
], ids=["not-left-by-a-kill", "changed-since", "unreadable"])
def test_an_extra_file_no_kill_left_as_it_is_is_a_difference(at_kills):
    golden = world(C2, C3)
    assert findings(REFERENCE, golden, {**golden, TEMPORARY: "2 x"}, *at_kills) == ["world-equals-golden"]


def test_debris_beside_a_real_difference_excuses_nothing():
    golden = world(C2, C3)
    recovered = {**world(C2, C3, C3), TEMPORARY: "2 x"}
    assert findings(REFERENCE, golden, recovered, {**FILES, TEMPORARY: "2 x"}) == ["world-equals-golden"]
