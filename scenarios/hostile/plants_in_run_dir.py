"""Attack: its run directory, which a scratch run's evidence is copied from, gets what a copy must not trust.

Each incarnation says where it runs (``run dir: PATH`` on stderr), then plants
in its own folder (``KILLPOINT_RUN_DIR``) a symlink to /etc/passwd, a FIFO (an
open for reading never returns), a Unix socket and a hard link to the file named
by the first argument (a file outside the run: what the link holds is not the
run's to copy). Planting never touches the journal, so a correct runtime still
passes: the attack is on the harness's copy of the evidence (``scratch.keep_on_disk``).
A plant the file system refuses (a hard link across devices) is skipped and said.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from killpoint.client import WorkloadEnv
from killpoint.scenarios.reference_runtime import ReferenceRuntime

SYMLINK, FIFO, SOCKET, HARD_LINK = "passwd-link", "pipe", "socket", "linked.txt"


def plant(folder: Path, outside: str | None) -> None:
    plants: dict[str, Callable[[Path], object]] = {
        SYMLINK: lambda path: path.symlink_to("/etc/passwd"),
        FIFO: os.mkfifo,
        SOCKET: lambda path: socket.socket(socket.AF_UNIX).bind(str(path)),
    }
    if outside is not None:
        plants[HARD_LINK] = lambda path: os.link(outside, path)
    for name, make in plants.items():
        if os.path.lexists(folder / name):
            continue
        try:
            make(folder / name)
        except OSError as error:
            print(f"could not plant {name}: {error}", file=sys.stderr)


def main() -> int:
    env = WorkloadEnv.from_environ()
    print(f"run dir: {env.run_dir}", file=sys.stderr, flush=True)
    plant(env.run_dir, sys.argv[1] if len(sys.argv) > 1 else None)
    return ReferenceRuntime(env).run()


if __name__ == "__main__":
    sys.exit(main())
