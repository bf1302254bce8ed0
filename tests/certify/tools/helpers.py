"""Python tools that start helper processes of their own, to prove a kill in the fork server reaches them too."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any


def spawn_then_write(world: Path, args: dict[str, Any]) -> None:
    """Start a helper in a session of its own (out of the tool's process group), note its pid, then write."""
    helper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    (world / "helper.pid").write_text(f"{helper.pid}\n")
    (world / "done.txt").write_text("done\n")


def orphan_then_write(world: Path, args: dict[str, Any]) -> None:
    """Start a helper out of the tool's tree and session (its parent exits, it calls setsid), wait for its pid, write.

    Neither the tree walk nor the process group reaches it: only the child's cgroup does.
    """
    pid_file = world / "orphan.pid"
    subprocess.run(["sh", "-c", 'setsid sh -c \'echo $$ > "$0"; exec sleep 30\' "$0" &', str(pid_file)], check=True)
    while not (pid_file.exists() and pid_file.read_text().strip()):
        time.sleep(0.01)
    (world / "done.txt").write_text("done\n")


NO_ARGUMENTS = {"type": "object", "properties": {}, "additionalProperties": False}
spawn_then_write.schema = NO_ARGUMENTS  # type: ignore[attr-defined]
orphan_then_write.schema = NO_ARGUMENTS  # type: ignore[attr-defined]
