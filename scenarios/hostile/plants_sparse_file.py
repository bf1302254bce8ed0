"""Attack: a 500 MB sparse file in the world. It costs no disk, but a reader that takes it whole holds it all.

The harness's snapshot once read it with read_bytes() and then decoded it: 1 GB of harness memory.
"""

from __future__ import annotations

import os
import sys

from killpoint.fake_tools.world import World
from killpoint.scenarios.hostile._attack import run_attacking

PLANTED = "notes/huge.bin"
SIZE = 500 * 1024 * 1024


def plant_sparse_file(world: World, argv: list[str]) -> None:
    if not os.path.lexists(world.files_root / PLANTED):
        with open(world.files_root / PLANTED, "wb") as sparse:
            sparse.truncate(SIZE)


if __name__ == "__main__":
    sys.exit(run_attacking(plant_sparse_file))
