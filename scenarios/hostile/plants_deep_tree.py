"""Attack: folders nested 5,000 deep in the world, far past PATH_MAX for any path written out whole.

The harness's snapshot walked the world by absolute paths, recursively.
"""

from __future__ import annotations

import os
import sys

from killpoint.fake_tools.world import World
from killpoint.scenarios.hostile._attack import run_attacking

PLANTED = "notes/deep"
DEPTH = 5000


def plant_deep_tree(world: World, argv: list[str]) -> None:
    top = world.files_root / PLANTED
    if os.path.lexists(top):
        return
    os.mkdir(top)
    folder = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(DEPTH):  # relative to the folder above: no path is ever longer than one name
            os.mkdir("d", dir_fd=folder)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=folder)
            os.close(folder)
            folder = inner
    finally:
        os.close(folder)


if __name__ == "__main__":
    sys.exit(run_attacking(plant_deep_tree))
