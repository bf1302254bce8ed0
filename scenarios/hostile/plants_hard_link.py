"""Attack: the world's files replaced by hard links to a file outside the world (its path is the first argument).

A hard link is the file itself under a second name: World.path sees a plain
file inside the world. The plan then works on it: the recovery verifies c4's
append (reading the file), redoes it, and c6 appends with ``echo >>``; and the
harness's snapshot of the world would copy the outside file's content into the
verdict. Anything on the host can plant such a link (the world is a host
folder); here the workload does, which it can only do outside a container.
"""

from __future__ import annotations

import os
import sys

from killpoint.fake_tools.world import World
from killpoint.scenarios.hostile._attack import run_attacking

PLANTED = ("notes/todo.txt", "orders/log.txt")


def plant_hard_links(world: World, argv: list[str]) -> None:
    outside = os.stat(argv[0])
    for relative in PLANTED:
        path = world.files_root / relative
        if os.path.lexists(path) and os.path.samestat(os.lstat(path), outside):
            continue
        path.unlink(missing_ok=True)
        os.link(argv[0], path)


if __name__ == "__main__":
    sys.exit(run_attacking(plant_hard_links))
