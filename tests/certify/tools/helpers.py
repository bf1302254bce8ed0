"""A Python tool that starts a helper process of its own, to prove a kill in the fork server reaches it too."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any


def spawn_then_write(world: Path, args: dict[str, Any]) -> None:
    """Start a helper in a session of its own (out of the tool's process group), note its pid, then write."""
    helper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    (world / "helper.pid").write_text(f"{helper.pid}\n")
    (world / "done.txt").write_text("done\n")


NO_ARGUMENTS = {"type": "object", "properties": {}, "additionalProperties": False}
spawn_then_write.schema = NO_ARGUMENTS  # type: ignore[attr-defined]
