"""A small MCP server (stdio, on the SDK's MCPServer) that writes by temporary file and rename: the tests certify it.

``python atomic.py WORLD`` serves three tools on the folder WORLD over stdio, each claiming ``idempotentHint: true``;
``python atomic.py WORLD --http PORT`` serves them over streamable HTTP at ``http://127.0.0.1:PORT/mcp`` instead
(answers as SSE streams and a session id, as the SDK does by default; ``--json`` for JSON answers, ``--stateless``
for no session), so ``certify --mcp`` and ``certify --mcp-url`` can be compared on one server:

- ``save_file`` writes PATH whole through ``PATH.<hex>.tmp`` and a rename, as the npm filesystem server's
  ``write_file`` does. A kill before the rename leaves the temporary file, which the replay (another
  ``<hex>``) does not remove: debris, not a repeated effect. Replayed, the file is as one call leaves it
  (CONFIRMED, the debris reported apart).
- ``append_line`` appends a line to PATH, through a temporary file and a rename too: a replay appends it
  again (REFUTED, however it writes).
- ``locked_save`` takes ``PATH.lock`` (``O_CREAT|O_EXCL``, as git takes ``index.lock``), writes PATH whole,
  and removes the lock. A kill while it holds the lock leaves it, and every later call fails on it: the
  replay fails (REFUTED, the leftover counted because it makes the replay fail).
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from mcp_types import ToolAnnotations

from mcp.server.mcpserver import MCPServer

IDEMPOTENT = ToolAnnotations(read_only_hint=False, idempotent_hint=True, destructive_hint=True, open_world_hint=False)


def serve(world: Path, argv: list[str]) -> None:
    server = MCPServer("atomic")

    def inside(path: str) -> Path:
        target = (world / path).resolve()
        if world not in target.parents:
            raise ValueError(f"{path!r} is outside the world")
        return target

    def replace_whole(target: Path, content: str) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f"{target.name}.{secrets.token_hex(8)}.tmp")
        temporary.write_text(content)
        os.replace(temporary, target)

    @server.tool(annotations=IDEMPOTENT)
    def save_file(path: str, content: str) -> str:
        """Write PATH whole (a temporary file renamed over it)."""
        replace_whole(inside(path), content)
        return "saved"

    @server.tool(annotations=IDEMPOTENT)
    def append_line(path: str, text: str) -> str:
        """Append a line to PATH (a temporary file renamed over it; and claim a replay is harmless)."""
        target = inside(path)
        old = target.read_text() if target.is_file() else ""
        replace_whole(target, old + text + "\n")
        return "appended"

    @server.tool(annotations=IDEMPOTENT)
    def locked_save(path: str, content: str) -> str:
        """Write PATH whole under PATH.lock; a lock already there is another writer's, so the call fails."""
        target = inside(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = target.with_name(target.name + ".lock")
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            raise ValueError(f"{lock.name} exists: another writer holds it (remove it if none does)") from None
        target.write_text(content)
        lock.unlink()
        return "saved"

    if "--http" in argv:
        server.run("streamable-http", port=int(argv[argv.index("--http") + 1]), json_response="--json" in argv,
                   stateless_http="--stateless" in argv, max_request_body_size=64 << 20)  # the 4 MiB writes
    else:
        server.run("stdio")


if __name__ == "__main__":
    serve(Path(sys.argv[1]).resolve(), sys.argv[2:])
