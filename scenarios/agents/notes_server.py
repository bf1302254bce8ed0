"""A small MCP server over streamable HTTP (the SDK's MCPServer) on a folder: notes to write, append and read.

    python -m killpoint.scenarios.agents.notes_server WORLD --port PORT [--json]

serves, at ``http://127.0.0.1:PORT/mcp``:

- ``write_note(path, text)``: writes PATH whole (a replay changes nothing more: IDEMPOTENT_WRITE);
- ``append_note(path, line)``: appends a line to PATH (a replay appends it again: NON_IDEMPOTENT);
- ``read_note(path)``: PATH's text, or "" when there is none (READ_ONLY): the read that verifies an append.

Answers are SSE streams with a session id, as the SDK's server gives by default (``--json``: JSON answers).
It outlives the agents that call it, as a server reached over HTTP does.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp_types import ToolAnnotations

from mcp.server.mcpserver import MCPServer


def serve(world: Path, port: int, json_response: bool) -> None:
    server = MCPServer("notes")

    def inside(path: str) -> Path:
        target = (world / path).resolve()
        if world not in target.parents:
            raise ValueError(f"{path!r} is outside the world")
        return target

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True))
    def write_note(path: str, text: str) -> str:
        """Write PATH whole."""
        inside(path).write_text(text)
        return "written"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False))
    def append_note(path: str, line: str) -> str:
        """Append a line to PATH."""
        with inside(path).open("a") as note:
            note.write(line + "\n")
        return "appended"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def read_note(path: str) -> str:
        """PATH's text ("" when there is none)."""
        target = inside(path)
        return target.read_text() if target.is_file() else ""

    server.run("streamable-http", port=port, json_response=json_response)


if __name__ == "__main__":
    serve(Path(sys.argv[1]).resolve(), int(sys.argv[sys.argv.index("--port") + 1]), "--json" in sys.argv)
