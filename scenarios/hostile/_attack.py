"""What every hostile workload shares: the reference runtime, with one attack on the world before it recovers.

The attack runs at the start of every incarnation after the first, so the
crash-free run (one incarnation) leaves a clean world and the attacked one
differs from it: the harness must survive reading it, and the finding names what
was planted. An attack that finds its work already done (a later recovery) does
nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from killpoint.client import WorkloadEnv
from killpoint.fake_tools.world import World
from killpoint.scenarios.reference_runtime import ReferenceRuntime

# What an attack gets: the world it attacks and the workload's own arguments (e.g. a file outside the world).
Attack = Callable[[World, list[str]], None]


def run_attacking(attack: Attack) -> int:
    """Attack the world if this incarnation recovers, then carry out the plan as the reference runtime does."""
    env = WorkloadEnv.from_environ()
    if env.incarnation > 0:
        attack(World(env.world), sys.argv[1:])
    return ReferenceRuntime(env).run()
