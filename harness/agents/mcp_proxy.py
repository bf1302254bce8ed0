"""A recording proxy in front of a real stdio MCP server: the agent starts it as its server, and it starts the real one.

    {python} -m killpoint.harness.agents.mcp_proxy -- CMD [ARG...]

An agent whose MCP server is a command it starts is given this one in front of
the real command (with ``$KILLPOINT_MCP_URL`` in the environment it hands the
server, which an MCP client does not pass on by itself). The proxy starts the
real server as its own child, so the server stays in the agent's process tree
and dies with it, as it would without killpoint: a kill mid-call kills the
server mid-call, and what that leaves in the world is what a user's agent
would find. Every message passes through unchanged; each ``tools/call`` and
its reply are also reported to the harness (``POST {KILLPOINT_MCP_URL}/proxy/STEP``),
which keeps the ledger and holds the call at its seams, outside the agent's
tree, so nothing already recorded dies with the proxy:

``request``    the call arrived: the harness attributes it to a planned call and writes its invocation (a call
               the plan does not hold is answered with a tool error here, and never reaches the server)
``forwarded``  the request was written to the server (the ``tool_request`` seam: the server may be mid-effect)
``replied``    the server's reply came, not yet delivered (``tool_effect``: an effect line when it succeeded)
``delivered``  the reply was written to the agent (``tool_reply``)

A step the harness holds blocks here until it answers; when the harness kills
the agent instead, the proxy and the server die where they stand.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from dataclasses import dataclass, field
from typing import IO, Any

from killpoint.protocol import ENV_MCP_URL

PROXY_PATH = "/proxy"
TIMEOUT_S = 300.0  # a step held at a crash point waits for the harness's answer, as an MCP client's read does


@dataclass
class _Pending:
    """A call forwarded to the server whose reply has not come back: its token, and whether ``forwarded`` was
    answered (its reply is reported only after, so the harness sees the steps in order)."""

    token: str
    forwarded: threading.Event = field(default_factory=threading.Event)


class Proxy:
    """One real server behind one agent: ``from_agent`` runs on the calling thread, ``from_server`` on another."""

    def __init__(self, argv: list[str], url: str, agent_in: IO[bytes], agent_out: IO[bytes]) -> None:
        self.url = url.rstrip("/") + PROXY_PATH
        self.agent_in, self.agent_out = agent_in, agent_out
        self.server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._to_agent = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        self._pending_lock = threading.Lock()

    def run(self) -> int:
        replies = threading.Thread(target=self.from_server, name="mcp-proxy-replies", daemon=True)
        replies.start()
        try:
            self.from_agent()
        finally:
            assert self.server.stdin is not None
            self.server.stdin.close()  # the agent closed its side: the server sees end of input, as without us
        replies.join()
        return self.server.wait()

    def from_agent(self) -> None:
        assert self.server.stdin is not None
        for line in self.agent_in:
            message = _message(line)
            call = _tool_call(message)
            if call is None:
                self.server.stdin.write(line)
                self.server.stdin.flush()
                continue
            ident, tool, arguments = call
            answer = self.step("request", {"tool": tool, "arguments": arguments})
            if "refused" in answer:
                self.to_agent(json.dumps({"jsonrpc": "2.0", "id": ident, "result": {
                    "content": [{"type": "text", "text": str(answer["refused"])}], "isError": True}}).encode() + b"\n")
                continue
            pending = _Pending(str(answer["token"]))
            with self._pending_lock:
                self._pending[_key(ident)] = pending
            self.server.stdin.write(line)
            self.server.stdin.flush()
            self.step("forwarded", {"token": pending.token})
            pending.forwarded.set()

    def from_server(self) -> None:
        assert self.server.stdout is not None
        for line in self.server.stdout:
            message = _message(line)
            pending = None
            if isinstance(message, dict) and "method" not in message and "id" in message:
                with self._pending_lock:
                    pending = self._pending.pop(_key(message["id"]), None)
            if pending is None:
                self.to_agent(line)
                continue
            pending.forwarded.wait()
            self.step("replied", {"token": pending.token, **_outcome(message)})
            self.to_agent(line)
            self.step("delivered", {"token": pending.token})

    def to_agent(self, line: bytes) -> None:
        with self._to_agent:
            self.agent_out.write(line if line.endswith(b"\n") else line + b"\n")
            self.agent_out.flush()

    def step(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Report one step and wait for the harness's answer (it may hold it, or kill us meanwhile)."""
        request = urllib.request.Request(f"{self.url}/{name}", data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            answer = json.loads(response.read() or b"{}")
        return answer if isinstance(answer, dict) else {}


def _message(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None  # not ours to judge: the server or the agent will say what is wrong with it


def _tool_call(message: Any) -> tuple[Any, Any, Any] | None:
    """(id, tool, arguments) of a ``tools/call`` request; None for any other message."""
    if not isinstance(message, dict) or message.get("method") != "tools/call" or "id" not in message:
        return None
    params = message.get("params")
    return (message["id"], params.get("name"), params.get("arguments", {})) if isinstance(params, dict) else (
        message["id"], None, None)


def _key(ident: Any) -> str:
    return json.dumps(ident, sort_keys=True)


def _outcome(message: dict[str, Any]) -> dict[str, Any]:
    """Whether the server's reply says the call succeeded, and its error's text where it did not."""
    if "error" in message:
        return {"ok": False, "error": str(message["error"])[:500]}
    result = message.get("result")
    if isinstance(result, dict) and result.get("isError"):
        return {"ok": False, "error": json.dumps(result.get("content"))[:500]}
    return {"ok": True}


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    url = os.environ.get(ENV_MCP_URL)
    if not argv or not url:
        print(f"mcp_proxy: usage: python -m killpoint.harness.agents.mcp_proxy -- CMD [ARG...], started with "
              f"${ENV_MCP_URL} set (an MCP client passes only a few variables to a server; pass this one on)",
              file=sys.stderr)
        return 2
    try:
        return Proxy(argv, url, sys.stdin.buffer, sys.stdout.buffer).run()
    except FileNotFoundError as error:
        print(f"mcp_proxy: cannot start the server {argv[0]!r}: {error.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
