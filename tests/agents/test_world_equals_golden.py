"""world-equals-golden: what is a difference from the crash-free run's world, and what is not.

The crash-free run and a recovery may run a turn's two calls in either order;
the world's bookkeeping (the file history) then lists the same changes in
another order, which is no difference. The same changes in the same files, one
made twice, or a file's text in another order, still are.

Debris (the file a real server was held opening when a kill landed, as that
kill left it and unchanged since, without which the world is the crash-free
run's) is a note naming it and its kill, not a finding; any other extra file,
or one changed since, is a difference, and an unreadable world at a kill
leaves the rule unknown.
"""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.judge.evidence import MissingEvidence, WorldAtKill
from killpoint.harness.judge.properties import Facts, world_differs
from tests.helpers import ROOT

REFERENCE = load_scenario(ROOT / "scenarios" / "agents" / "reference_agent.toml")  # turns [["c1"], ["c2", "c3"]]
C2 = {"op": "write_file", "path": "orders/summary.txt", "ref": "c2"}
C3 = {"op": "append", "path": "orders/log.txt", "ref": "c3"}
FILES = {"files/orders/summary.txt": "2 x tea\n", "files/orders/log.txt": "ordered 2 x tea\n"}


def world(*changes: dict[str, str], files: dict[str, str] | None = None) -> dict[str, str]:
    return {**FILES, **(files or {}), "state/file_history.json": json.dumps({"changes": list(changes), "log": []})}


def facts(scenario: Any, golden: dict[str, str], recovered: dict[str, str], *at_kills: WorldAtKill | None) -> Any:
    """What ``world_differs`` reads: a completed black-box run (its last incarnation exited 0), and the world at
    each of its kills."""
    last = SimpleNamespace(killed_at=None, timed_out=False, exit_code=0)
    return Facts(scenario, SimpleNamespace(world=recovered, incarnations=[last], worlds_at_kill=at_kills),
                 SimpleNamespace(world=golden))


def findings(scenario: Any, golden: dict[str, str], recovered: dict[str, str], *at_kills: WorldAtKill | None
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


def at_kill(files: dict[str, str], opened: str | None = None) -> WorldAtKill:
    return WorldAtKill({**FILES, **files}, opened)


def test_the_file_a_server_was_held_opening_at_a_kill_is_debris_named_with_its_kill():
    golden = world(C2, C3)
    recovered = {**golden, TEMPORARY: ""}
    judged = world_differs(facts(REFERENCE, golden, recovered, at_kill({}), at_kill({TEMPORARY: ""}, TEMPORARY)))
    assert judged.findings == []
    assert [note.split(",")[0] for note in judged.notes] == [f"debris: {TEMPORARY}"]
    assert "left by kill 1" in judged.notes[0]


@pytest.mark.parametrize("at_kills", [
    (),                                                          # no kill at all
    (at_kill({TEMPORARY: ""}),),                                 # a kill left it, but held no open of it
    (at_kill({TEMPORARY: ""}, TEMPORARY), at_kill({})),          # gone at a later kill: made again since
    (at_kill({TEMPORARY: ""}, TEMPORARY), at_kill({TEMPORARY: "2"})),  # changed at a later kill
    (at_kill({TEMPORARY: "2"}, TEMPORARY),),                     # other text at the kill than at the end
    (at_kill({TEMPORARY: ""}, "files/other.tmp"),),              # the held open was another file's
], ids=["no-kill", "not-held-open", "gone-since", "changed-since", "other-text", "another-file"])
def test_an_extra_file_that_is_not_what_a_kill_held_open_is_a_difference(at_kills):
    golden = world(C2, C3)
    assert findings(REFERENCE, golden, {**golden, TEMPORARY: ""}, *at_kills) == ["world-equals-golden"]


def test_a_repeated_effect_a_later_kill_saw_is_no_debris():
    """A blind retry's second order, present at a later kill: only the file held open at a kill is excused."""
    golden = {**FILES, "files/order-1": "tea"}
    recovered = {**golden, "files/order-2": "tea"}
    at_kills = (at_kill({"files/order-1": "tea"}), at_kill({"files/order-1": "tea", "files/order-2": "tea"}))
    assert findings(REFERENCE, golden, recovered, *at_kills) == ["world-equals-golden"]


def test_an_unreadable_world_at_a_kill_leaves_the_rule_unknown_not_failed():
    golden = world(C2, C3)
    with pytest.raises(MissingEvidence, match="a world at a kill could not be read"):
        world_differs(facts(REFERENCE, golden, {**golden, TEMPORARY: ""}, None))


def test_a_runtime_that_is_no_agent_keeps_no_world_at_its_kills_and_an_extra_file_is_a_difference():
    """Only an agent's tools can be real servers: a protocol runtime's kills record no world, and judge as before."""
    golden = world(C2, C3)
    protocol_runtime = replace(REFERENCE, agent=None)
    assert findings(protocol_runtime, golden, {**golden, TEMPORARY: ""}, None) == ["world-equals-golden"]


def test_debris_beside_a_real_difference_excuses_nothing():
    golden = world(C2, C3)
    recovered = {**world(C2, C3, C3), TEMPORARY: ""}
    assert findings(REFERENCE, golden, recovered, at_kill({TEMPORARY: ""}, TEMPORARY)) == ["world-equals-golden"]
