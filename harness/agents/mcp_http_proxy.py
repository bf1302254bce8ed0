"""A real MCP server over streamable HTTP, behind the harness: the agent's ``$KILLPOINT_MCP_URL`` leads through it.

A scenario names the server in its ``[agent]`` table::

    [agent.mcp_server]
    command = ["{python}", "server.py", "{world}", "--port", "{port}"]
    url = "http://127.0.0.1:{port}/mcp"

The harness starts it once a run, before the first incarnation, on the run's
world (``{world}``: the world's files; ``{port}``: a free loopback port), in a
session of its own, outside the agent's tree, and stops it when the run ends.
That is how such a server lives: an agent's SIGKILL never reaches it, and it
keeps whatever it holds in memory from one incarnation to the next. Its output
goes to ``mcp-server.log`` in the run's folder.

Every message the agent posts to ``$KILLPOINT_MCP_URL`` is forwarded to the
server with the headers MCP gives meaning to (the session id, the protocol
version), and the server's answer is relayed (status, content type, session
id, body). A ``tools/call`` goes through the same steps as a call through the
stdio proxy (``ToolService.proxied``): attributed and held at ``tool_request``
before it is forwarded, ``tool_effect`` once the server has answered, and
``tool_reply`` once the answer reached the agent. ``verify_effect`` is listed
and answered by the harness with the server's own read (``[agent.verify]``).
Answers to ``tools/list`` and ``tools/call`` reach the agent as JSON, whatever
the server streamed, so the harness reads exactly what it relays.

The server is untrusted. Its answer is bounded (``MAX_ANSWER_BYTES``), and the
whole of it must come within ``CALL_TIMEOUT_S``, or the agent is answered with
a 502 saying which. A server that does not start listening within
``START_DEADLINE_S``, or exits first, is a workload error quoting its log. A
server-to-client stream (``GET``) is not offered: a client then does without
one, as the specification allows.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from killpoint.errors import WorkloadError
from killpoint.harness._safe_files import fresh_file, read_bounded
from killpoint.harness.agents._mcp_messages import VERIFY_TOOL, outcome, text_of, tool_call, tool_result, with_verify
from killpoint.harness.execute._service_sessions import spare_session, unspare_session

if TYPE_CHECKING:
    from killpoint.harness.agents.tool_service import ToolService

MAX_ANSWER_BYTES = 64 << 20
CALL_TIMEOUT_S = 300.0  # one answer, whole: a tool call may take long, never forever
START_DEADLINE_S = 30.0
LOG_NAME = "mcp-server.log"
LOG_TAIL_BYTES = 2000
FORWARDED = ("content-type", "accept", "mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name",
             "authorization", "last-event-id")
RELAYED = ("content-type", "mcp-session-id")
PROBE_ID = "killpoint-probe"
@dataclass(frozen=True)
class Answer:
    """The server's answer to one POST, as relayed to the agent."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def message(self) -> Any:
        """The JSON-RPC message the answer carries: a JSON body, or the last message of an SSE stream (the
        answer to the request closes a stream of the server's own notifications and requests)."""
        content_type = dict(self.headers).get("content-type", "")
        if content_type.startswith("text/event-stream"):
            messages = [_json(data) for data in _event_data(self.body)]
            answers = [message for message in messages if isinstance(message, dict) and "method" not in message]
            return answers[-1] if answers else None
        return _json(self.body)

    def as_json(self, message: Any) -> Answer:
        """This answer with ``message`` as its JSON body."""
        headers = tuple((name, value) for name, value in self.headers if name != "content-type")
        return Answer(self.status, (("content-type", "application/json"), *headers), json.dumps(message).encode())


def _json(text: str | bytes) -> Any:
    """``text`` as JSON; None when it is not (the server's garbage is relayed as it came, and judged a failure)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _event_data(body: bytes) -> list[str]:
    """The ``data`` of each event of an SSE stream (its lines joined, as the format says)."""
    found = []
    for event in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        lines = [line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
        if lines:
            found.append(b"\n".join(lines).decode("utf-8", "replace"))
    return found


class HttpServer:
    """The real server of one run: started on its world once the run begins, stopped when it ends."""

    def __init__(self, table: Mapping[str, Any], world: Path, log: Path) -> None:
        self.table, self.world, self.log = table, world, log
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> None:
        """Start it and wait until it listens; WorkloadError quoting its log if it exits first, or never listens."""
        port = _free_port()
        words = {"{world}": str(self.world), "{port}": str(port), "{python}": sys.executable}
        argv = [_filled(word, words) for word in self.table["command"]]
        self.url = _filled(self.table["url"], words)
        fd = fresh_file(self.log)
        try:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, cwd=self.world,
                                            start_new_session=True, env={"PATH": os.environ.get("PATH", ""),
                                                                         "LANG": "C.UTF-8", "HOME": str(self.world)})
        except OSError as error:
            raise WorkloadError(f"the scenario's MCP server {argv[0]!r} cannot start: {error.strerror}") from None
        finally:
            os.close(fd)
        spare_session(self.process.pid)  # it holds the run's world by design: no escaped process of the agent's
        target = urlsplit(self.url)
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise WorkloadError(f"the scenario's MCP server exited with {self.process.returncode} before it "
                                    f"listened on {self.url}; its log ends with:\n{self.log_tail()}")
            with contextlib.suppress(OSError), socket.create_connection((target.hostname, target.port or 80), 1):
                return
            time.sleep(0.05)
        raise WorkloadError(f"the scenario's MCP server did not listen on {self.url} within {START_DEADLINE_S:g}s; "
                            f"its log ends with:\n{self.log_tail()}")

    def forward(self, method: str, body: bytes, headers: Mapping[str, str]) -> Answer:
        """One request to the server and its whole answer, bounded in size and time; a 502 saying why if not."""
        target = urlsplit(self.url)
        deadline = time.monotonic() + CALL_TIMEOUT_S
        connection = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=CALL_TIMEOUT_S)
        try:
            connection.request(method, target.path or "/", body=body, headers={
                **{name: value for name, value in headers.items() if name.lower() in FORWARDED}, "Connection": "close"})
            response = connection.getresponse()
            chunks, size = [], 0
            while chunk := response.read1(1 << 16):
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_ANSWER_BYTES or time.monotonic() > deadline:
                    return _bad_gateway(f"the MCP server's answer passed {MAX_ANSWER_BYTES} bytes" if size >
                                        MAX_ANSWER_BYTES else f"the MCP server took over {CALL_TIMEOUT_S:g}s to answer")
            relayed = tuple((name.lower(), value) for name, value in response.getheaders() if name.lower() in RELAYED)
            return Answer(response.status, relayed, b"".join(chunks))
        except (OSError, http.client.HTTPException, ValueError) as error:  # ValueError: a header the agent forged
            return _bad_gateway(f"the MCP server at {self.url} did not answer: {error!r}")
        finally:
            connection.close()

    def log_tail(self) -> str:
        try:
            return read_bounded(self.log)[-LOG_TAIL_BYTES:].decode("utf-8", "replace")
        except OSError as error:
            return f"(its log cannot be read: {error.strerror})"

    def close(self) -> None:
        """SIGKILL its whole session, and reap it."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        unspare_session(self.process.pid)


def serve(service: ToolService, server: HttpServer, message: Any, body: bytes, headers: Mapping[str, str],
          send: Callable[[Answer], None]) -> None:
    """Answer one message the agent posted, through ``server`` (see the module's docstring)."""
    call = tool_call(message)
    if isinstance(message, list):  # a batch: MCP has none since 2025-06-18, and its calls would go unseen
        send(_json_answer({"jsonrpc": "2.0", "id": None, "error": {
            "code": -32600, "message": "batches are not read: send one message at a time"}}, 400))
    elif call is not None and call[1] == VERIFY_TOOL:
        _verify(service, server, call, headers, send)
    elif call is not None:
        _call(service, server, call, body, headers, send)
    elif isinstance(message, dict) and message.get("method") == "tools/list":
        answer = server.forward("POST", body, headers)
        listed = with_verify(answer.message())
        send(answer if listed is None else answer.as_json(listed))
    else:
        send(server.forward("POST", body, headers))


def _call(service: ToolService, server: HttpServer, call: tuple[Any, Any, Any], body: bytes,
          headers: Mapping[str, str], send: Callable[[Answer], None]) -> None:
    ident, tool, arguments = call
    answer = _step(service, "request", {"tool": tool, "arguments": arguments})
    if "refused" in answer:
        send(_json_answer(tool_result(ident, str(answer["refused"]), failed=True)))
        return
    token = answer["token"]
    relayed = server.forward("POST", body, headers)
    message = relayed.message()
    _step(service, "replied", {"token": token, **outcome(message)})
    send(relayed if message is None else relayed.as_json(message))
    _step(service, "delivered", {"token": token})


def _verify(service: ToolService, server: HttpServer, call: tuple[Any, Any, Any], headers: Mapping[str, str],
            send: Callable[[Answer], None]) -> None:
    ident, _, arguments = call
    answer = _step(service, "probe", {"arguments": arguments})
    if "refused" in answer:
        send(_json_answer(tool_result(ident, str(answer["refused"]), failed=True)))
        return
    read = {"jsonrpc": "2.0", "id": PROBE_ID, "method": "tools/call",
            "params": {"name": answer["read"]["tool"], "arguments": answer["read"]["arguments"]}}
    reply = server.forward("POST", json.dumps(read).encode(), headers).message()
    verdict = _step(service, "probed", {"token": answer["token"], "text": text_of(reply), **outcome(reply)})
    send(_json_answer(tool_result(ident, json.dumps({"effect_found": verdict.get("effect_found") is True}),
                                  failed=False)))


def _step(service: ToolService, step: str, body: dict[str, Any]) -> dict[str, Any]:
    """One of the tool service's proxy steps, taken in the harness itself: its answer."""
    answered: dict[str, Any] = {}
    service.proxied(step, body, lambda status, reply: answered.update(reply))
    return answered


def _json_answer(message: dict[str, Any], status: int = 200) -> Answer:
    return Answer(status, (("content-type", "application/json"),), json.dumps(message).encode())


def _bad_gateway(why: str) -> Answer:
    return _json_answer({"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": why}}, 502)


def _filled(word: str, words: Mapping[str, str]) -> str:
    for name, value in words.items():
        word = word.replace(name, value)
    return word


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
