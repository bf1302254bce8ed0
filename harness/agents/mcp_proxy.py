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

``request``    the call arrived, not yet forwarded: the harness attributes it to a planned call, writes its
               invocation and holds it (``tool_request``); a call the plan does not hold is answered with a tool
               error here, and never reaches the server. Once it is forwarded, the harness holds the server at
               its first open in the world (``tool_opened``, ``first_open``).
``replied``    the server's reply came, not yet delivered (``tool_effect``: an effect line when it succeeded)
``delivered``  the reply was written to the agent (``tool_reply``)

A step the harness holds blocks here until it answers; when the harness kills
the agent instead, the proxy and the server die where they stand.

The recovery rules' VERIFY needs a read-only check of an interrupted call, and
a real server has no ``verify_effect``: the proxy adds it to the server's tool
list (annotated read-only) and answers it itself. ``probe`` asks the harness
which of the server's own read tools checks the call (the scenario's
``[agent.verify]``), the proxy makes that read on the server, and ``probed``
hands its text to the harness, which writes the probe to the ledger and says
whether the effect is there: ``{"effect_found": bool}``, as killpoint's fake
tools answer it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import itertools
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import IO, Any

from killpoint.harness.agents._mcp_messages import VERIFY_TOOL, outcome, text_of, tool_call, tool_result, with_verify
from killpoint.protocol import ENV_MCP_URL

PROXY_PATH = "/proxy"
TIMEOUT_S = 300.0  # a step held at a crash point waits for the harness's answer, as an MCP client's read does
PROBE_ID = "killpoint-probe-"  # the ids of the reads the proxy itself asks the server for


class Proxy:
    """One real server behind one agent: ``from_agent`` runs on the calling thread, ``from_server`` on another."""

    def __init__(self, argv: list[str], url: str, agent_in: IO[bytes], agent_out: IO[bytes]) -> None:
        self.url = url.rstrip("/") + PROXY_PATH
        self.agent_in, self.agent_out = agent_in, agent_out
        self.server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._to_agent = threading.Lock()
        self._pending: dict[str, str] = {}  # the token of each call forwarded, by its JSON-RPC id
        self._listings: set[str] = set()  # the agent's tools/list requests, whose answers gain verify_effect
        self._reads: dict[str, _Read] = {}  # the proxy's own reads for verify_effect, by id
        self._read_ids = itertools.count()
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
        for line in self.agent_in:
            message = _message(line)
            call = tool_call(message)
            if isinstance(message, dict) and message.get("method") == "tools/list" and "id" in message:
                with self._pending_lock:
                    self._listings.add(_key(message["id"]))
            if isinstance(message, list):  # a batch: MCP has none since 2025-06-18, and its calls would go unseen
                self.to_agent(json.dumps({"jsonrpc": "2.0", "id": None, "error": {
                    "code": -32600, "message": "batches are not read: send one message at a time"}}).encode())
            elif call is None:
                self.to_server(line)
            elif call[1] == VERIFY_TOOL:
                self.verify(call[0], call[2])
            else:
                self.call(*call, line)

    def call(self, ident: Any, tool: Any, arguments: Any, line: bytes) -> None:
        answer = self.step("request", {"tool": tool, "arguments": arguments})
        if "refused" in answer:
            self.answer_agent(ident, str(answer["refused"]), failed=True)
            return
        with self._pending_lock:
            self._pending[_key(ident)] = str(answer["token"])
        self.to_server(line)

    def verify(self, ident: Any, arguments: Any) -> None:
        """Answer ``verify_effect`` with the read the harness names, made on the server (see the module's docstring)."""
        answer = self.step("probe", {"arguments": arguments})
        if "refused" in answer:
            self.answer_agent(ident, str(answer["refused"]), failed=True)
            return
        read = _Read()
        with self._pending_lock:
            read_id = f"{PROBE_ID}{next(self._read_ids)}"
            self._reads[read_id] = read
        self.to_server(json.dumps({"jsonrpc": "2.0", "id": read_id, "method": "tools/call", "params": {
            "name": answer["read"]["tool"], "arguments": answer["read"]["arguments"]}}).encode() + b"\n")
        reply = read.reply if read.done.wait(TIMEOUT_S) else {"error": "the server did not answer the read"}
        verdict = self.step("probed", {"token": answer["token"], "text": text_of(reply), **outcome(reply)})
        self.answer_agent(ident, json.dumps({"effect_found": verdict.get("effect_found") is True}), failed=False)

    def from_server(self) -> None:
        assert self.server.stdout is not None
        for line in self.server.stdout:
            message = _message(line)
            pending = read = None
            listing = False
            if isinstance(message, dict) and "method" not in message and "id" in message:
                with self._pending_lock:
                    pending = self._pending.pop(_key(message["id"]), None)
                    read = self._reads.pop(message["id"], None) if isinstance(message["id"], str) else None
                    listing = _key(message["id"]) in self._listings
                    self._listings.discard(_key(message["id"]))
            if read is not None:
                read.reply = message
                read.done.set()
            elif listing:
                listed = with_verify(message)
                self.to_agent(line if listed is None else json.dumps(listed).encode() + b"\n")
            elif pending is None:
                self.to_agent(line)
            else:
                self.step("replied", {"token": pending, **outcome(message)})
                try:
                    self.to_agent(line)
                finally:  # delivered or not (the agent closed its side), the harness waits on it no more
                    self.step("delivered", {"token": pending})

    def to_server(self, line: bytes) -> None:
        assert self.server.stdin is not None
        self.server.stdin.write(line)
        self.server.stdin.flush()

    def answer_agent(self, ident: Any, text: str, *, failed: bool) -> None:
        self.to_agent(json.dumps(tool_result(ident, text, failed=failed)).encode() + b"\n")

    def to_agent(self, line: bytes) -> None:
        with self._to_agent:
            self.agent_out.write(line if line.endswith(b"\n") else line + b"\n")
            self.agent_out.flush()

    def step(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Report one step and wait for the harness's answer (it may hold it, or kill us meanwhile); a refusal
        (the harness's 4xx, saying why) is ``{"refused": why}``, which the agent is answered with."""
        request = urllib.request.Request(f"{self.url}/{name}", data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                answer = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            refusal = _message(error.read())
            return {"refused": refusal.get("error") if isinstance(refusal, dict) else f"the harness said {error}"}
        return answer if isinstance(answer, dict) else {}


@dataclass
class _Read:
    """A read the proxy asked the server for, to answer ``verify_effect``: its reply once it comes."""

    done: threading.Event = field(default_factory=threading.Event)
    reply: dict[str, Any] = field(default_factory=dict)


def _message(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None  # not ours to judge: the server or the agent will say what is wrong with it


def _key(ident: Any) -> str:
    return json.dumps(ident, sort_keys=True)


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
