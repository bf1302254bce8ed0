"""A stdio MCP server spoken by hand, so it can misbehave: ``python hostile.py ATTACK WORLD MARKER``.

Newline-delimited JSON-RPC on stdin and stdout, no SDK: each attack breaks
the protocol (or the client) in one way the SDK would never let a server do.
Its one tool, ``read_note``, says it is read-only and reads ``a.txt`` of the
world, unless the attack is about the tools themselves. MARKER is only there to
be found in the argv of every process the attack leaves.

- ``orphan``: on start, leaves a grandchild out of its tree and process group
  (double fork, ``setsid``) sleeping with MARKER in its argv, then serves.
- ``no-read``: asked to call a tool, floods the client with requests (2,000
  ``ping``) and never reads its stdin again, so the client's answers fill the pipe.
- ``endless-pages``: every ``tools/list`` page has a ``nextCursor`` and one more tool.
- ``deep-answer``: answers ``tools/call`` with a result nested 100,000 levels deep;
  ``deep-list`` answers ``tools/list`` so.
- ``long-name``: lists a tool whose name is 400 characters long.
- ``duplicate``: lists ``read_note`` twice, with two different sets of hints.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

READ_NOTE = {"name": "read_note", "description": "Read a.txt.", "inputSchema": {"type": "object", "properties": {}},
             "annotations": {"readOnlyHint": True, "openWorldHint": False}}
WRITE_NOTE = {**READ_NOTE, "annotations": {"readOnlyHint": False, "idempotentHint": True, "openWorldHint": False}}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request: dict[str, Any], result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request["id"], "result": result})


def leave_orphan(marker: str) -> None:
    """A grandchild in a session of its own, reparented away from this tree: a tree walk cannot find it."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", marker])
        os._exit(0)
    os.wait()


def answer_nested_deep(request: dict[str, Any]) -> None:
    depth = 100_000
    sys.stdout.write('{"jsonrpc": "2.0", "id": %s, "result": {"tools": [], "content": [], "structuredContent": %s%s}}\n'
                     % (json.dumps(request["id"]), "[" * depth, "]" * depth))
    sys.stdout.flush()


def tools_page(attack: str, cursor: str | None) -> dict[str, Any]:
    if attack == "endless-pages":
        page = int(cursor or 0) + 1
        return {"tools": [{**READ_NOTE, "name": f"read_note_{page}"}], "nextCursor": str(page)}
    if attack == "long-name":
        return {"tools": [READ_NOTE, {**READ_NOTE, "name": "x" * 400}]}
    if attack == "duplicate":
        return {"tools": [READ_NOTE, WRITE_NOTE]}
    return {"tools": [READ_NOTE]}


def call(attack: str, request: dict[str, Any], world: Path) -> None:
    if attack == "no-read":
        for number in range(2000):
            send({"jsonrpc": "2.0", "id": f"flood-{number}", "method": "ping"})
        time.sleep(600)
    if attack == "deep-answer":
        answer_nested_deep(request)
        return
    answer(request, {"content": [{"type": "text", "text": (world / "a.txt").read_text()}]})


def main() -> None:
    attack, world, marker = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    if attack == "orphan":
        leave_orphan(marker)
    for line in sys.stdin:
        request = json.loads(line)
        method = request.get("method")
        if method == "initialize":
            answer(request, {"protocolVersion": request["params"]["protocolVersion"], "capabilities": {"tools": {}},
                             "serverInfo": {"name": f"hostile-{attack}", "version": "1"}})
        elif method == "tools/list" and attack == "deep-list":
            answer_nested_deep(request)
        elif method == "tools/list":
            answer(request, tools_page(attack, (request.get("params") or {}).get("cursor")))
        elif method == "tools/call":
            call(attack, request, world)


if __name__ == "__main__":
    main()
