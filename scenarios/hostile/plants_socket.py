"""Attack: a Unix socket in the world; open() on it fails (ENXIO), and the harness's snapshot once crashed on it."""

from __future__ import annotations

import os
import socket
import sys

from killpoint.fake_tools.world import World
from killpoint.scenarios.hostile._attack import run_attacking

PLANTED = "notes/socket"


def plant_socket(world: World, argv: list[str]) -> None:
    folder, name = os.path.split(world.files_root / PLANTED)
    if os.path.lexists(world.files_root / PLANTED):
        return
    here = os.getcwd()
    os.chdir(folder)  # a relative name: the world's absolute path may pass the 108 bytes a socket address holds
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.bind(name)  # the file stays after the socket is closed
    finally:
        os.chdir(here)


if __name__ == "__main__":
    sys.exit(run_attacking(plant_socket))
