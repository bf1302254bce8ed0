"""Attack: a FIFO in the world. Opening it to read blocks until a writer comes, and none ever does.

The harness's snapshot of the world once hung in that open() for ever, on every backend.
"""

from __future__ import annotations

import os
import sys

from killpoint.fake_tools.world import World
from killpoint.scenarios.hostile._attack import run_attacking

PLANTED = "notes/pipe"


def plant_fifo(world: World, argv: list[str]) -> None:
    if not os.path.lexists(world.files_root / PLANTED):
        os.mkfifo(world.files_root / PLANTED)


if __name__ == "__main__":
    sys.exit(run_attacking(plant_fifo))
