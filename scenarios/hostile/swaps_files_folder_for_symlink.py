"""Attack: the world's ``files/`` folder swapped for a symlink to a folder outside the world (the first argument).

World.path checked that a path resolves below ``files/`` resolved, which the
outside folder then is: every tool worked on it. The original folder is kept
in the world as ``files.moved``.
"""

from __future__ import annotations

import os
import sys

from killpoint.fake_tools.world import World
from killpoint.scenarios.hostile._attack import run_attacking


def swap_files_for_symlink(world: World, argv: list[str]) -> None:
    if not world.files_root.is_symlink():
        os.rename(world.files_root, world.root / "files.moved")
        os.symlink(argv[0], world.files_root, target_is_directory=True)


if __name__ == "__main__":
    sys.exit(run_attacking(swap_files_for_symlink))
