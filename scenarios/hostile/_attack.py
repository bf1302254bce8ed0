"""What every hostile workload shares: the reference runtime, with one attack on the world before it recovers.

The attack runs at the start of every incarnation after the first, so the
crash-free run (one incarnation) leaves a clean world and the attacked one
differs from it: the harness must survive reading it, and the finding names what
was planted. An attack that finds its work already done (a later recovery) does
nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from killpoint import protocol
from killpoint.client import Rendezvous, WorkloadEnv
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


REAL_SUFFIX = ".real"  # where a swapped-out evidence file is kept


class _SwapsForSymlink(Rendezvous):
    """The rendezvous, swapping an evidence file for a symlink just before incarnation 0 announces ``after_started``."""

    def __init__(self, control_path: str | None, incarnation: int, path: str, target: str) -> None:
        super().__init__(control_path, incarnation)
        self.path, self.target = path, target

    def point(self, point: str, *, call: str | None = None, op: str | None = None) -> None:
        # Not in the crash-free run (its folder is named golden): the session must get as far as a kill.
        if point == protocol.AFTER_STARTED and self.incarnation == 0 and "/golden/" not in self.path:
            os.replace(self.path, self.path + REAL_SUFFIX)
            os.symlink(self.target, self.path)
        super().point(point, call=call, op=op)



def run_swapping_for_symlink(path_of: Callable[[WorkloadEnv], str], *, restore: bool) -> int:
    """Run the reference runtime, swapping the file ``path_of(env)`` for a symlink to ``argv[1]`` at the first kill.

    With ``restore``, a later incarnation first puts the real file back, so
    whatever then harms the outside file is the harness's doing.
    """
    env = WorkloadEnv.from_environ()
    path = path_of(env)
    if restore and os.path.exists(path + REAL_SUFFIX):
        os.replace(path + REAL_SUFFIX, path)
    runtime = ReferenceRuntime(env)
    runtime.rendezvous = _SwapsForSymlink(env.control_path, env.incarnation, path, sys.argv[1])
    return runtime.run()
