"""Two identical calls of one tool: a probe tells this call's effect from its twin's.

A plan may call a tool twice with the same arguments (two appends of the same
line, two taps on "submit"). When the runtime is killed after the second
call's ``started`` record but before its tool ran, a correct recovery VERIFIES
it (for a NON_IDEMPOTENT or UNKNOWN tool): the probe must not mistake the
first call's effect for the second's, or the redo is skipped and a write is
lost, and the reference runtime fails ``world-equals-golden`` on a false alarm.

The property, for every one of the 96 tools, on calls drawn by
``killpoint.harness.certify.fake_seeds`` in its family's seeded world: run c1 with
arguments A, then

(a) probe(c2, A) answers False whenever running c2 with A would change the
    world: a probe never claims the effect of a call that has not run (when c2
    would change nothing, "present" is harmless: a redo is skipped that would
    have left the world as it is);
(b) once c2 ran and changed the world, probe(c2, A) answers True, except for
    the tools of ``NO_VISIBLE_EFFECT``, where "no effect visible" is the honest
    answer.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from killpoint import protocol as p
from killpoint.fake_tools.world import diff_snapshots
from killpoint.harness.certify.fake_seeds import arguments
from tests.test_fake_tools_replay import CATALOGUE, bench

# The tools whose calls leave no effect a probe could see, and why: they never change the world (checked
# below), so "no effect visible" is the honest answer and a VERIFY's redo is harmless. Every other tool
# leaves a trace stamped with its call id (a history or log entry, a created item, a logged refusal) or
# is a put whose probe compares the value (IDEMPOTENT_WRITE: a redo of an identical put changes nothing).
NO_VISIBLE_EFFECT: dict[str, str] = {
    **{tool: "READ_ONLY: it reads, a call changes nothing" for tool in CATALOGUE.tools
       if CATALOGUE.class_of(tool) == p.READ_ONLY},
    **{tool: "asks the user: the question changes nothing in the world, and is asked again (RETRY)"
       for tool in CATALOGUE.interactive},
}


@pytest.mark.parametrize("tool", sorted(CATALOGUE.tools))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_probe_tells_a_call_from_its_identical_twin(tool: str, data: st.DataObject) -> None:
    args = data.draw(arguments(tool), label="args")
    check_twins(tool, args)


def check_twins(tool: str, args: dict[str, Any]) -> None:
    """Run c1 with ``args``, then c2 with the same ``args``, and judge c2's probe before and after (see above).

    The probe only reads (checked), so c2 runs on the very world the probe judged.
    """
    with bench(CATALOGUE.families[tool]) as seeded:
        seeded.call(tool, args, call="c1")
        first = seeded.world.snapshot()
        claimed_before = seeded.probe(tool, args, call="c2")
        assert seeded.world.snapshot() == first, "the probe changed the world"
        seeded.call(tool, args, call="c2")
        second = seeded.world.snapshot()
        claimed_after = seeded.probe(tool, args, call="c2")
    if tool in NO_VISIBLE_EFFECT:
        assert second == first and not claimed_before and not claimed_after, (
            f"{tool} is listed as leaving no visible effect, but: {diff_snapshots(first, second)}")
    elif second != first:  # when c2 changed nothing, a skipped redo loses nothing, whatever the probe said
        assert claimed_before is False, (
            f"{tool}: before c2 ran, its probe claimed c2's effect (c1's, identical, was there); "
            f"c2 then changed the world: {diff_snapshots(first, second)}")
        assert claimed_after is True, (
            f"{tool}: c2 ran and changed the world, but its probe does not see it: {diff_snapshots(first, second)}")


@pytest.mark.parametrize(("tool", "args"), [
    # issue 12: the demo's append twice; killed at c2:after_started, the content probe skipped c2's redo
    ("append", {"path": "orders/log.txt", "text": "ordered 2 x tea\n"}),
    ("append", {"path": "notes/todo.txt", "text": "milk\n"}),  # the file ends with the text before c1 ran
    # the second delete is refused and logged; killed at c2:after_effect, a probe blind to the refusal
    # made the runtime redo it, doubling the refusal log (world-equals-golden, verify-before-replay)
    ("delete_file", {"path": "notes/todo.txt"}),
    ("copy_move_file", {"source": "inbox/a.txt", "destination": "backup/a.txt", "mode": "move"}),
    # a run that stops at a refused line after a ``>>`` one: unlogged, its VERIFY redid (doubled) the append
    ("code_runner", {"code": "echo x >> notes/log.txt\ncat missing.txt"}),
])
def test_the_twins_that_raised_false_alarms(tool: str, args: dict[str, Any]) -> None:
    check_twins(tool, args)

