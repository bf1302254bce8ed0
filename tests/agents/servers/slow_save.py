"""A stdio MCP server whose write stops half-way for a while: a kill then leaves its temporary file, every time.

``python slow_save.py WORLD`` serves ``slow_save(path, content)`` on the folder WORLD: it writes
``PATH.<hex>.tmp``, sleeps ``SLOW_S``, and renames it over PATH, as the npm filesystem server's ``write_file``
does without the pause. A kill timed inside the pause (``--kill-at c2:tool_request@0.5``) leaves the temporary
file, and the retry writes another and renames it: debris, the tool's crash-safety, not a repeated effect.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path

from mcp_types import ToolAnnotations

from mcp.server.mcpserver import MCPServer

SLOW_S = 2.0


def serve(world: Path) -> None:
    server = MCPServer("slow-save")

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True, destructive_hint=True))
    def slow_save(path: str, content: str) -> str:
        """Write PATH whole: a temporary file, a pause, and a rename over PATH."""
        target = (world / path).resolve()
        if world not in target.parents:
            raise ValueError(f"{path!r} is outside the world")
        temporary = target.with_name(f"{target.name}.{secrets.token_hex(4)}.tmp")
        temporary.write_text(content)
        time.sleep(SLOW_S)
        os.replace(temporary, target)
        return "saved"

    server.run("stdio")


if __name__ == "__main__":
    serve(Path(sys.argv[1]).resolve())
