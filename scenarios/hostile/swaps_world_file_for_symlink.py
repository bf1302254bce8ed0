"""Attack: the temporary file through which the world saves the shell's state swapped for a symlink out of it.

World.save writes ``state/.shell.json.tmp`` and renames it over ``state/shell.json``,
so a kill mid-save leaves that name behind, and the next save reuses it. Here
it is a symlink to a file outside the world (the first argument): writing the
temporary file through it once overwrote that file with the shell's history.
"""

from __future__ import annotations

import os
import sys

from killpoint.fake_tools.world import World
from killpoint.scenarios.hostile._attack import run_attacking

PLANTED = ".shell.json.tmp"


def swap_temporary_for_symlink(world: World, argv: list[str]) -> None:
    world.state_root.mkdir(parents=True, exist_ok=True)
    if not os.path.lexists(world.state_root / PLANTED):
        os.symlink(argv[0], world.state_root / PLANTED)


if __name__ == "__main__":
    sys.exit(run_attacking(swap_temporary_for_symlink))
