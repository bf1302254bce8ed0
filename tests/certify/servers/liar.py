"""A small MCP server (stdio, on the SDK's MCPServer) that lies about one tool: the tests certify it.

``python liar.py WORLD`` serves five tools on the folder WORLD:

- ``append_note`` claims ``idempotentHint: true`` but appends a line to
  ``notes.txt`` on every call: a replay writes the line twice (REFUTED).
- ``set_value`` writes ``values/KEY`` whole, and says it is idempotent: it is (CONFIRMED).
- ``delete_note`` says it is not idempotent, but deleting twice leaves what deleting once does (CONSERVATIVE).
- ``fetch_page`` says ``openWorldHint: true``: certify skips it unless ``--allow-network`` (it never fetches).
- ``toggle_logging``, like server-everything's ``toggle-simulated-logging``, turns a setting held in the
  server's memory on, and the next call off: the world never shows it, so its silence is no evidence of
  READ_ONLY (INCONCLUSIVE, never CONSERVATIVE with READ_ONLY supported).

``--exit-at-once`` exits before reading anything, ``--silent`` reads and never answers:
the servers that do not start and that never answer ``initialize``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Literal

from mcp_types import ToolAnnotations

from mcp.server.mcpserver import MCPServer


def serve(world: Path) -> None:
    server = MCPServer("liar")

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True, destructive_hint=False,
 open_world_hint=False))
    def append_note(text: str) -> str:
        """Append a line to notes.txt (and claim a replay is harmless)."""
        with (world / "notes.txt").open("a") as notes:
            notes.write(text + "\n")
        return "noted"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True, destructive_hint=True,
 open_world_hint=False))
    def set_value(key: Literal["volume", "brightness"], value: str) -> str:
        """Set values/KEY to VALUE (the whole file, so a replay changes nothing)."""
        (world / "values").mkdir(exist_ok=True)
        (world / "values" / key).write_text(value)
        return "set"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False, destructive_hint=True,
 open_world_hint=False))
    def delete_note(path: str) -> str:
        """Delete a file of the world; a missing one is already deleted."""
        target = (world / path).resolve()
        if world.resolve() not in target.parents:
            raise ValueError(f"{path!r} is outside the world")
        target.unlink(missing_ok=True)
        return "deleted"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True))
    def fetch_page(url: str) -> str:
        """Would fetch a page: certify must not run it without --allow-network."""
        (world / "fetched.txt").write_text(url)
        return "fetched"

    logging = {"on": False}  # the server's memory: no file of the world holds it

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False, destructive_hint=False,
 open_world_hint=False))
    def toggle_logging() -> str:
        """Turn simulated logging on if it is off, else off: a replay undoes the call, and no file shows either."""
        logging["on"] = not logging["on"]
        return f"simulated logging {'on' if logging['on'] else 'off'}"

    server.run("stdio")


def main() -> None:
    if "--exit-at-once" in sys.argv:
        sys.exit(3)
    if "--silent" in sys.argv:
        sys.stdin.read()  # never answers; ends when its stdin closes (or it is killed)
        time.sleep(3600)
    serve(Path(sys.argv[1]).resolve())


if __name__ == "__main__":
    main()
