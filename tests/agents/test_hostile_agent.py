"""A hostile agent against the services the harness runs for it (docs/security.md, "an agent's HTTP requests").

In an ``[agent]`` scenario the harness serves the scripted model and the tool service on loopback HTTP, in its
own process (root in CI), and the tool service writes the run's ledger and world. The agent is the workload: it
may send anything, plant anything in the world and the run directory it is told of, leave orphans behind, and
talk to the rendezvous socket. Each test builds one attack for real against services stood up in-process and
asserts the safe outcome: a 4xx answer (never a dropped connection with a traceback on the harness's stderr),
a bounded record, nothing written outside the world, no harness thread held past a deadline, and the real
agent still answered afterwards.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from killpoint.client import parse_json_lines
from killpoint.fake_tools.world import seed_world
from killpoint.harness.agents import _loopback, tool_service
from killpoint.harness.agents._loopback import LoopbackServer
from killpoint.harness.agents._wire_openai_responses import Responses
from killpoint.harness.agents.model_endpoint import MAX_BODY_BYTES, ModelEndpoint
from killpoint.harness.agents.script import Script
from killpoint.harness.agents.services import EXCHANGES_FILE, AgentServices
from killpoint.harness.agents.tool_service import ToolService
from killpoint.harness.execute.rendezvous import RendezvousServer
from killpoint.harness.judge.stores._agent_seams import SEAMS_FILE
from killpoint.harness.model import AtPoint
from tests.agents.scripted import PLAN as MODEL_PLAN
from tests.agents.scripted import chat_tools, responses_tools

pytestmark = pytest.mark.hostile

TOOLS_PLAN: dict[str, Any] = {"task_id": "t", "calls": [
    {"call_id": "c1", "tool": "read_file", "args": {"path": "notes.txt"}},
    {"call_id": "c2", "tool": "append", "args": {"path": "log.txt", "text": "one\n"}},
]}
APPEND_ARGS: dict[str, Any] = TOOLS_PLAN["calls"][1]["args"]
CHAT: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "go"}], "tools": chat_tools()}
VICTIM_TEXT = "a host file the harness must never touch\n"
DEADLINE_S = 5.0


# -- helpers -----------------------------------------------------------------------------------------------------

def port_of(server: LoopbackServer) -> int:
    port = urllib.parse.urlsplit(server.url).port
    assert port is not None
    return port


def request_bytes(server: LoopbackServer, method: str, path: str, body: bytes = b"",
                  headers: dict[str, str] | None = None, *, length: bool = True) -> bytes:
    """One raw HTTP/1.1 request under the server's secret prefix (``length``: with a Content-Length)."""
    lines = [f"{method} /{server.secret}{path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if length:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def exchange_raw(server: LoopbackServer, data: bytes, *, quiet_s: float = 1.0) -> bytes:
    """Send ``data`` on one connection and read until the server closes it, or it stays silent ``quiet_s``."""
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=DEADLINE_S) as client:
        client.sendall(data)
        received = b""
        client.settimeout(quiet_s)
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while chunk := client.recv(65536):
                received += chunk
    return received


def responses(received: bytes) -> tuple[list[int], bytes]:
    """The statuses of the whole responses at the start of ``received`` (each framed by its Content-Length), and
    the bytes after them: what the server wrote that no response frames."""
    found: list[int] = []
    while (match := re.match(rb"HTTP/1\.[01] (\d{3}) [^\r]*\r\n(.*?)\r\n\r\n", received, re.S)) is not None:
        length = re.search(rb"(?im)^content-length: *(\d+)", match[2])
        if length is None:
            break
        found.append(int(match[1]))
        received = received[match.end() + int(length[1]):]
    return found, received


def statuses(received: bytes) -> list[int]:
    """The status of every response in ``received`` (a status line follows the body before it directly)."""
    return [int(status) for status in re.findall(rb"HTTP/1\.[01] (\d{3}) ", received)]


def post_json(url: str, body: bytes | dict[str, Any], timeout: float = DEADLINE_S) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def post_model(endpoint: ModelEndpoint, path: str, body: bytes | dict[str, Any],
               timeout: float = DEADLINE_S) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", port_of(endpoint), timeout=timeout)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    connection.request("POST", f"/{endpoint.secret}{path}", data, {"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def ledger_lines(path: Path) -> list[dict[str, Any]]:
    return [record for _, record in parse_json_lines(path.read_bytes()).records] if path.exists() else []


def wait_for(condition: Callable[[], bool], deadline_s: float = DEADLINE_S) -> bool:
    """Poll ``condition`` until it holds or the deadline passes; whether it held."""
    ends = time.monotonic() + deadline_s
    while time.monotonic() < ends:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def no_traceback(capsys: pytest.CaptureFixture[str]) -> str:
    """What the harness printed on stderr (socketserver prints a handler's uncaught exception there)."""
    return capsys.readouterr().err


@pytest.fixture
def world(tmp_path: Path) -> Path:
    seed_world(tmp_path / "world", {"notes.txt": "tea\n"}, {})
    return tmp_path / "world"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside the world and the run, standing for a host file."""
    path = tmp_path / "host" / "victim.txt"
    path.parent.mkdir()
    path.write_text(VICTIM_TEXT)
    return path


@pytest.fixture
def tools(world: Path, tmp_path: Path) -> Iterator[ToolService]:
    (tmp_path / "ledger.jsonl").touch()
    with ToolService(TOOLS_PLAN, world, tmp_path / "ledger.jsonl") as served:
        served.begin(0)
        yield served


def model_request(endpoint: ModelEndpoint, **extra: str) -> bytes:
    body = json.dumps(CHAT).encode()
    return request_bytes(endpoint, "POST", "/v1/chat/completions", body, {"Content-Type": "application/json", **extra})


# -- who may reach the services, and how a request is framed ------------------------------------------------------

@pytest.mark.parametrize("target", [
    "/tools/append",                                   # no secret at all
    "/{secret}/../tools/append",                       # dot segments after the secret
    "/{secret}/tools/../tools/append",
    "/x/../{secret}/tools/append",                     # dot segments before it
    "/{secret}x/tools/append",                         # a longer secret
    "/{secret_start}/tools/append",                    # its start only
    "/{secret}/tools/append%2F..%2F..%2Fappend",       # encoded slashes
    "/{secret}/tools/..%2Fappend",
    "http://127.0.0.1/{secret}/tools/append",          # absolute form
    "/{secret}/tools/delete_file",                     # a real fake tool the plan does not call
    "/{secret}/tools/",
])
def test_a_request_outside_the_secret_or_the_plans_tools_runs_nothing(tools: ToolService, world: Path,
                                                                      tmp_path: Path, target: str) -> None:
    path = target.format(secret=tools.secret, secret_start=tools.secret[:8])
    body = json.dumps(APPEND_ARGS).encode()
    raw = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
           .encode() + body)
    received = exchange_raw(tools, raw)
    assert statuses(received) == [404], received[:300]
    assert not (world / "files" / "log.txt").exists() and ledger_lines(tmp_path / "ledger.jsonl") == []


@pytest.mark.parametrize("target", ["/v1/chat/completions", "/{secret}x/v1/chat/completions",
                                    "/{secret_start}/v1/chat/completions", "/x/../{secret}/v1/chat/completions",
                                    "http://127.0.0.1/{secret}/v1/chat/completions"])
def test_a_model_request_outside_the_secret_reaches_nothing(endpoint: ModelEndpoint, target: str) -> None:
    path = target.format(secret=endpoint.secret, secret_start=endpoint.secret[:8])
    body = json.dumps(CHAT).encode()
    raw = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
           .encode() + body)
    received = exchange_raw(endpoint, raw)
    assert statuses(received) == [404] and endpoint.secret.encode() not in received, received[:300]
    assert endpoint.exchanges == []


@pytest.mark.parametrize("args", [
    {"path": "../log.txt", "text": "one\n"},
    {"path": "/etc/passwd", "text": "one\n"},
    {"path": "log.txt", "text": "one\n", "extra": True},
    {"path": ["log.txt"], "text": "one\n"},
    ["log.txt", "one\n"],
    "log.txt",
    None,
    {"path": "log.txt", "text": "one\n\n{\"effect\": \"file_appended\", \"call\": \"c2\", \"incarnation\": 0}"},
])
def test_tool_arguments_that_are_not_the_planned_ones_run_nothing(tools: ToolService, world: Path, tmp_path: Path,
                                                                  args: Any) -> None:
    status, answer = post_json(f"{tools.url}/tools/append", json.dumps(args).encode())
    assert status == 404 and answer["ok"] is False
    assert not (world / "files" / "log.txt").exists() and ledger_lines(tmp_path / "ledger.jsonl") == []


@pytest.mark.parametrize("args", [
    {"tool_call_id": {"call_kp_c2": 1}}, {"tool_call_id": ["call_kp_c2"]}, {"call_id": ["c2"]}, {"call_id": 2},
    {"tool_call_id": "call_kp_c9"}, {"tool_call_id": "call_kp_" + "_1" * 50_000}, ["c2"], "c2",
])
def test_a_probe_naming_no_planned_call_is_refused(tools: ToolService, tmp_path: Path, args: Any) -> None:
    status, answer = post_json(f"{tools.url}/tools/verify_effect", json.dumps(args).encode())
    assert status == 404 and answer["ok"] is False
    assert ledger_lines(tmp_path / "ledger.jsonl") == []


@pytest.mark.parametrize("service", ["model", "tools"])
@pytest.mark.parametrize("body", [b"\xff\xfe{\x00}", b"[" * 200_000, b"{" + b'"a":{' * 100_000])
def test_a_body_not_utf8_or_nested_past_the_parser_gets_a_400(endpoint: ModelEndpoint, tools: ToolService,
                                                              capsys: pytest.CaptureFixture[str], service: str,
                                                              body: bytes) -> None:
    status = (post_model(endpoint, "/v1/chat/completions", body)[0] if service == "model" else
              post_json(f"{tools.url}/tools/append", body)[0])
    assert status == 400
    assert "Traceback" not in no_traceback(capsys)


@pytest.mark.parametrize("service", ["model", "tools"])
@pytest.mark.parametrize("length", ["\xb2", "\xb9", "1\xb3", "-1", "+5", "0x10", " 1 2 "])
def test_a_content_length_that_is_no_whole_number_is_refused_not_a_crash(
        endpoint: ModelEndpoint, tools: ToolService, capsys: pytest.CaptureFixture[str], service: str,
        length: str) -> None:
    """Headers are decoded as Latin-1, where ² ¹ ³ are "digits" to str.isdigit but not to int()."""
    server: LoopbackServer = endpoint if service == "model" else tools
    path = "/v1/chat/completions" if service == "model" else "/tools/append"
    raw = request_bytes(server, "POST", path, b"{}", {"Content-Length": length, "Connection": "close"}, length=False)
    received = exchange_raw(server, raw)
    assert [status // 100 for status in statuses(received)] == [4], received[:300]
    assert "Traceback" not in no_traceback(capsys)


def test_a_tool_body_past_the_bound_is_refused_before_it_is_read(tools: ToolService) -> None:
    raw = request_bytes(tools, "POST", "/tools/append", headers={"Content-Length": str(tool_service.MAX_BODY_BYTES + 1)},
                        length=False)
    started = time.monotonic()
    received = exchange_raw(tools, raw)
    assert statuses(received) == [413] and time.monotonic() - started < 2


@pytest.mark.parametrize("service", ["model", "tools"])
def test_a_chunked_request_is_refused_and_its_body_never_read_as_another_request(
        endpoint: ModelEndpoint, tools: ToolService, world: Path, tmp_path: Path, service: str) -> None:
    """A chunked body must not be taken for an empty one (a tool request of ``{}``) and then parsed as the next
    request on the connection: the connection desynchronises and the harness answers bytes it never framed."""
    server: LoopbackServer = endpoint if service == "model" else tools
    path = "/v1/chat/completions" if service == "model" else "/tools/append"
    inner = json.dumps(CHAT if service == "model" else APPEND_ARGS).encode()
    chunk = b"%x\r\n%s\r\n0\r\n\r\n" % (len(inner), inner)
    received = exchange_raw(server, request_bytes(server, "POST", path, chunk, {"Transfer-Encoding": "chunked"},
                                                  length=False))
    answered, unframed = responses(received)
    assert len(answered) == 1 and answered[0] in (400, 411, 501) and unframed == b"", received[:800]
    assert not (world / "files" / "log.txt").exists() and ledger_lines(tmp_path / "ledger.jsonl") == []


def test_pipelined_requests_are_answered_once_each_in_order(endpoint: ModelEndpoint, tools: ToolService) -> None:
    model = exchange_raw(endpoint, model_request(endpoint) * 3 + model_request(endpoint, Connection="close"))
    tool = exchange_raw(tools, request_bytes(tools, "POST", "/tools/read_file", json.dumps({"path": "notes.txt"})
                                             .encode()) * 2
                        + request_bytes(tools, "POST", "/tools/append", json.dumps(APPEND_ARGS).encode(),
                                        {"Connection": "close"}))
    assert statuses(model) == [200] * 4 and statuses(tool) == [200] * 3
    assert [exchange["outcome"] for exchange in endpoint.exchanges] == ["answered"] * 4


def test_nothing_the_agent_sends_reaches_a_response_header(endpoint: ModelEndpoint, tools: ToolService) -> None:
    for server, path in ((endpoint, "/v1/x%0d%0aSet-Cookie:%20evil=1"), (tools, "/tools/x%0d%0aSet-Cookie:%20evil=1"),
                         (tools, "/openapi.json%0d%0aSet-Cookie:%20evil=1")):
        received = exchange_raw(server, request_bytes(server, "POST", path, b"{}", {"Connection": "close"}))
        head = received.split(b"\r\n\r\n", 1)[0].lower()
        assert b"evil" not in head and b"set-cookie" not in head, head


# -- slow, idle and many connections -----------------------------------------------------------------------------

def _trickle(server: LoopbackServer, head: bytes, drip: bytes, *, interval: float, limit: float) -> float | None:
    """Send ``head``, then ``drip`` a byte every ``interval``: how long until the server dropped (or answered) the
    connection, or None if it still waited for more after ``limit`` seconds."""
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=DEADLINE_S) as client:
        started = time.monotonic()
        client.sendall(head)
        for byte in drip:
            if time.monotonic() - started > limit:
                return None
            readable, _, _ = select.select([client], [], [], interval)
            if readable:
                return time.monotonic() - started
            try:
                client.send(bytes([byte]))
            except OSError:
                return time.monotonic() - started
    return None


@pytest.fixture
def short_timeout_servers(world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[
        dict[str, LoopbackServer]]:
    """Both services with a 0.4 s socket timeout (30 s in a run), so a deadline shows in a fast test."""
    monkeypatch.setattr(tool_service, "IO_TIMEOUT_S", 0.4)
    (tmp_path / "ledger.jsonl").touch()
    with ModelEndpoint(Script.from_plan(MODEL_PLAN), io_timeout=0.4) as endpoint, \
            ToolService(TOOLS_PLAN, world, tmp_path / "ledger.jsonl") as served:
        served.begin(0)
        yield {"model": endpoint, "tools": served}


@pytest.mark.parametrize("service", ["model", "tools"])
def test_a_connection_that_sends_nothing_is_dropped_at_the_timeout(short_timeout_servers: dict[str, LoopbackServer],
                                                                   service: str) -> None:
    server = short_timeout_servers[service]
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=DEADLINE_S) as client:
        started = time.monotonic()
        assert client.recv(4096) == b""
    assert time.monotonic() - started < 3


@pytest.mark.parametrize("service", ["model", "tools"])
@pytest.mark.parametrize("part", ["headers", "body"])
def test_a_request_trickled_a_byte_at_a_time_is_dropped_at_a_deadline(
        short_timeout_servers: dict[str, LoopbackServer], service: str, part: str) -> None:
    """Slowloris: every byte comes before the socket timeout, so a timeout per read never fires; the request
    as a whole must have a deadline, or one connection holds a harness thread (and its run) forever."""
    server = short_timeout_servers[service]
    path = "/v1/chat/completions" if service == "model" else "/tools/append"
    if part == "headers":
        head, drip = f"POST /{server.secret}{path} HTTP/1.1\r\nX-Pad: ".encode(), b"a" * 10_000
    else:
        head = request_bytes(server, "POST", path, headers={"Content-Length": "10000"}, length=False)
        drip = b" " * 10_000
    dropped = _trickle(server, head, drip, interval=0.1, limit=3.0)
    assert dropped is not None and dropped < 2.0, f"still reading a trickled request after {dropped or 3.0:.1f}s"


IDLE_CONNECTIONS = 300
HANDLER_THREADS_CAP = 128  # far more than an agent's parallel requests; a fixed cap keeps a flood from the harness


@contextlib.contextmanager
def idle_connections(server: LoopbackServer, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections that send nothing, opened one at a time: the servers listen with a backlog of 5, and
    a connect the kernel drops past it is retried a second later, which would make the test slow, not the attack."""
    opened: list[socket.socket] = []
    try:
        for _ in range(count):
            threads = threading.active_count()
            opened.append(socket.create_connection(("127.0.0.1", port_of(server)), timeout=DEADLINE_S))
            accepted_by = time.monotonic() + 0.01  # a server that caps its threads may never start one
            while threading.active_count() <= threads and time.monotonic() < accepted_by:
                time.sleep(0.0002)
        yield opened
    finally:
        for connection in opened:
            connection.close()


def test_a_flood_of_idle_connections_does_not_stop_the_real_agent_being_answered(endpoint: ModelEndpoint,
                                                                                  tools: ToolService) -> None:
    with idle_connections(endpoint, IDLE_CONNECTIONS), idle_connections(tools, IDLE_CONNECTIONS):
        started = time.monotonic()
        assert post_model(endpoint, "/v1/chat/completions", CHAT)[0] == 200
        assert post_json(f"{tools.url}/tools/read_file", {"path": "notes.txt"})[0] == 200
        assert time.monotonic() - started < 3


def test_a_flood_of_idle_connections_does_not_hold_a_harness_thread_each(endpoint: ModelEndpoint) -> None:
    """ThreadingHTTPServer starts a thread per connection, with no cap: thousands of idle connections (each held
    30 s, forever when trickled) are thousands of threads in the harness, until it cannot start its own."""
    before = threading.active_count()
    with idle_connections(endpoint, IDLE_CONNECTIONS):
        # Answered in the order accepted: once this is, every idle connection before it was accepted too.
        assert post_model(endpoint, "/v1/chat/completions", CHAT)[0] == 200
        grown = threading.active_count() - before
    assert grown <= HANDLER_THREADS_CAP, f"{IDLE_CONNECTIONS} idle connections hold {grown} harness threads"


def test_a_streamed_reply_to_a_client_that_never_reads_frees_its_thread_at_the_timeout() -> None:
    """The Responses API echoes ``instructions`` in its events, so an agent can make its reply large, then never
    read it: the write must end at the socket timeout, and the reply not count as delivered."""
    seen: list[str] = []
    with ModelEndpoint(Script.from_plan(MODEL_PLAN), hook=lambda point, calls, _: seen.append(point),
                       io_timeout=0.5) as endpoint:
        body = json.dumps({"model": "m", "input": "go", "instructions": "x" * (12 << 20), "tools": responses_tools(),
                           "stream": True}).encode()
        client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.settimeout(DEADLINE_S)
        try:
            client.connect(("127.0.0.1", port_of(endpoint)))
            client.sendall(request_bytes(endpoint, "POST", "/v1/responses", body, {"Content-Type": "application/json"}))
            assert wait_for(lambda: bool(endpoint.exchanges)
                            and "reply not delivered" in str(endpoint.exchanges[-1].get("outcome")), 8.0), \
                endpoint.exchanges[-1].get("outcome") if endpoint.exchanges else None
        finally:
            client.close()
    assert seen == ["model_request"]  # never model_reply: the agent does not have the reply


# -- what one request can make the harness hold or compute ---------------------------------------------------------

def test_a_flood_of_requests_keeps_the_exchanges_to_the_bound(tools: ToolService,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_loopback, "MAX_EXCHANGES", 50)
    body = request_bytes(tools, "POST", "/tools/nothing", b"{}")
    exchange_raw(tools, body * 199 + request_bytes(tools, "POST", "/tools/nothing", b"{}", {"Connection": "close"}))
    assert len(tools.exchanges) == 50


EXCHANGE_BYTES_CAP = 16_000  # the excerpts (500 and 2,000 characters each) and a few short fields


def test_one_tool_exchange_is_bounded_whatever_the_tool_name(tools: ToolService) -> None:
    """The tool name is kept whole: 10,000 kept exchanges of a 64 KiB name are 640 MiB of harness memory."""
    name = "t" * 60_000
    status, _ = post_json(f"{tools.url}/tools/{name}", {})
    size = len(json.dumps(tools.exchanges[-1]))
    assert status == 404 and size <= EXCHANGE_BYTES_CAP, f"one exchange keeps {size} bytes"


@pytest.mark.parametrize("path", ["calls", "probes"])
def test_one_named_call_exchange_is_bounded_whatever_its_call_id_and_op(tools: ToolService, path: str) -> None:
    """A runtime names its call and op: kept whole, a 1 MiB id in each of 10,000 exchanges is 10 GiB."""
    big = "c" * (1 << 20)
    status, _ = post_json(f"{tools.url}/{path}/append", {"call": big, "args": APPEND_ARGS,
                                                         **({"op": big} if path == "calls" else {})})
    size = len(json.dumps(tools.exchanges[-1]))
    assert status == 200 and size <= EXCHANGE_BYTES_CAP, f"one exchange keeps {size} bytes"


@pytest.mark.parametrize("attack", ["previous_response_id", "offered_tools", "unanswered_tool_calls"])
def test_one_model_exchange_is_bounded_whatever_the_error_quotes(endpoint: ModelEndpoint, attack: str) -> None:
    """An error message quoting what the agent sent is kept whole in the exchange: 10,000 of them at up to
    16 MiB each."""
    big = "x" * 2_000_000
    body: dict[str, Any]
    if attack == "previous_response_id":
        path, body = "/v1/responses", {"model": "m", "input": "go", "previous_response_id": big}
    elif attack == "offered_tools":
        path = "/v1/chat/completions"
        body = {**CHAT, "tools": [{"type": "function", "function": {"name": f"{big[:1000]}{index}"}}
                                  for index in range(2_000)]}
    else:
        path = "/v1/chat/completions"
        body = {"model": "m", "messages": [{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": [
            {"id": f"{big[:1000]}{index}", "function": {"name": "f", "arguments": "{}"}} for index in range(2_000)]}]}
    status, _ = post_model(endpoint, path, body)
    size = len(json.dumps(endpoint.exchanges[-1]))
    assert status == 400 and size <= EXCHANGE_BYTES_CAP, f"one exchange keeps {size} bytes"


def test_chained_previous_response_ids_cannot_grow_a_conversation_past_the_body_bound(
        endpoint: ModelEndpoint) -> None:
    """Each request is bounded (16 MiB), but ``previous_response_id`` rebuilds the conversation it continues:
    chained, the conversation the harness keeps, scans and hashes on every request grows without bound. Here
    1 MiB a request; past 16 requests the conversation held for one request is past the body bound."""
    pad = "p" * (1 << 20)
    previous: str | None = None
    accepted = 0
    answers = {"call_kp_c1": "order A1: 2 boxes", "call_kp_c2": "charged", "call_kp_c3": "sent"}
    pending: list[str] = []
    for _ in range(20):
        items: list[dict[str, Any]] = [{"type": "function_call_output", "call_id": ident, "output": answers[ident]}
                                       for ident in pending]
        items.append({"role": "user", "content": pad})
        body: dict[str, Any] = {"model": "m", "input": items, "tools": responses_tools()}
        if previous is not None:
            body["previous_response_id"] = previous
        status, reply = post_model(endpoint, "/v1/responses", body, timeout=10)
        if status != 200:
            break
        accepted += 1
        previous = reply["id"]
        pending = [item["call_id"] for item in reply["output"] if item["type"] == "function_call"]
    kept = cast(Responses, endpoint.apis["/v1/responses"])._kept
    largest = max(sum(len(getattr(event, "text", "")) for event in conversation) for conversation in kept.values())
    assert largest <= MAX_BODY_BYTES, f"{accepted} chained requests; one conversation kept holds {largest} characters"


def tool_results_body(count: int) -> bytes:
    """A Messages request of ``count`` tool_use blocks, then ``count`` tool_result blocks answering none of them."""
    uses = [{"type": "tool_use", "id": f"u{index:07d}", "name": "x", "input": {}} for index in range(count)]
    results = [{"type": "tool_result", "tool_use_id": f"r{index:07d}", "content": "x"} for index in range(count)]
    return json.dumps({"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": "go"}, {"role": "assistant", "content": uses},
        {"role": "user", "content": results}]}).encode()


def test_the_anthropic_tool_result_check_is_not_quadratic(endpoint: ModelEndpoint) -> None:
    """``_check_results`` looks each tool_result id up in a list: n results against n tool_uses is n² string
    compares. 14,000 of each (2 MB) takes seconds; the 16 MiB bound allows ~120,000 (minutes of a harness
    core, per request, any number at once).

    Timed against a tenth as many ids, in turns, the best of three each, so the machine's load divides out:
    ten times the ids take about ten times as long when the check is linear (0.5 s against 0.06 s at load 5,
    where a bound of 1 s on the larger alone was most of the way to failing), 171 times when the ids before
    were a list again (7.6 s)."""
    small, large = tool_results_body(1_400), tool_results_body(14_000)
    best = {len(small): float("inf"), len(large): float("inf")}
    for _ in range(3):
        for body in (small, large):
            started = time.monotonic()
            status, _ = post_model(endpoint, "/v1/messages", body, timeout=60)
            best[len(body)] = min(best[len(body)], time.monotonic() - started)
            assert status == 400
    assert best[len(large)] < 25 * best[len(small)], \
        f"10 times the ids took {best[len(large)] / best[len(small)]:.0f} times as long ({best[len(large)]:.2f}s)"


# -- requests the model endpoint must refuse, not crash on -----------------------------------------------------------

def test_an_unhashable_tool_call_id_gets_a_400_not_a_traceback(endpoint: ModelEndpoint,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    body = {**CHAT, "messages": [{"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": ["x"],
                                                                     "content": "?"}]}
    received = exchange_raw(endpoint, request_bytes(endpoint, "POST", "/v1/chat/completions", json.dumps(body).encode(),
                                                    {"Connection": "close"}))
    assert statuses(received) == [400], received[:300]
    assert "Traceback" not in no_traceback(capsys)


def test_a_probe_result_nested_past_the_parser_gets_a_400_not_a_traceback(endpoint: ModelEndpoint,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The script reads a probe's verdict with json.loads, catching ValueError only: deep nesting raises
    RecursionError."""
    def call(ident: str, name: str, arguments: str) -> dict[str, Any]:
        return {"id": ident, "type": "function", "function": {"name": name, "arguments": arguments}}

    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [call("call_kp_c1", "lookup_order", '{"order_id": "A1"}')]},
        {"role": "tool", "tool_call_id": "call_kp_c1", "content": "interrupted"},
        {"role": "assistant", "tool_calls": [call("call_kp_c1_verify", "verify_effect",
                                                  '{"tool_call_id": "call_kp_c1"}')]},
        {"role": "tool", "tool_call_id": "call_kp_c1_verify", "content": "[" * 100_000},
    ]
    received = exchange_raw(endpoint, request_bytes(endpoint, "POST", "/v1/chat/completions",
                                                    json.dumps({**CHAT, "messages": messages}).encode(),
                                                    {"Connection": "close"}))
    assert statuses(received) == [400], received[:300]
    assert "Traceback" not in no_traceback(capsys)


@pytest.mark.parametrize("depth", [900, 960, 980, 990])
@pytest.mark.parametrize("field", ["metadata", "tools", "instructions_list"])
def test_a_body_nested_near_the_parsers_limit_is_answered(endpoint: ModelEndpoint,
                                                          capsys: pytest.CaptureFixture[str], depth: int,
                                                          field: str) -> None:
    """The Responses API echoes ``metadata`` and ``tools`` in its reply: what parsed may be too deep to write."""
    nested = "[" * depth + "]" * depth
    extra = (f'"metadata": {{"k": {nested}}}' if field == "metadata" else
             f'"tools": [{nested}]' if field == "tools" else f'"instructions": {nested}')
    body = f'{{"model": "m", "input": "go", {extra}}}'.encode()
    received = exchange_raw(endpoint, request_bytes(endpoint, "POST", "/v1/responses", body, {"Connection": "close"}))
    assert len(statuses(received)) == 1, received[:300]
    assert "Traceback" not in no_traceback(capsys)


# -- what the agent plants in the world and the run directory ------------------------------------------------------

def append(tools: ToolService, form: str) -> tuple[int, Any]:
    """The planned append, as an agent asks for it (by its arguments) or as a protocol runtime does (naming it)."""
    if form == "agent":
        return post_json(f"{tools.url}/tools/append", APPEND_ARGS)
    return post_json(f"{tools.url}/calls/append", {"call": "c2", "op": "t-op2", "args": APPEND_ARGS})


REQUEST_FORMS = pytest.mark.parametrize("form", ["agent", "runtime"], ids=["tools-by-arguments", "calls-by-id"])


@REQUEST_FORMS
@pytest.mark.parametrize("plant", ["file_symlink", "folder_symlink", "state_symlink", "fifo", "hard_link"])
def test_what_the_agent_plants_in_the_world_is_never_followed(tools: ToolService, world: Path, victim: Path,
                                                               plant: str, form: str) -> None:
    files = world / "files"
    if plant == "file_symlink":
        (files / "log.txt").symlink_to(victim)
    elif plant == "folder_symlink":
        (world / "files").rename(world / "files.real")
        (world / "files").symlink_to(victim.parent, target_is_directory=True)
        (victim.parent / "log.txt").write_text(VICTIM_TEXT)
    elif plant == "state_symlink":
        (world / "state" / "file_history.json").symlink_to(victim)
    elif plant == "fifo":
        os.mkfifo(files / "log.txt")
    else:
        os.link(victim, files / "log.txt")
    started = time.monotonic()
    status, answer = append(tools, form)
    assert time.monotonic() - started < 3
    assert status == 200 and answer["ok"] is False, answer
    assert victim.read_text() == VICTIM_TEXT and sorted(os.listdir(victim.parent)) in (
        ["victim.txt"], ["log.txt", "victim.txt"])
    if plant == "folder_symlink":
        assert (victim.parent / "log.txt").read_text() == VICTIM_TEXT


@REQUEST_FORMS
def test_a_world_folder_the_agent_swapped_for_a_symlink_is_never_followed(tools: ToolService, world: Path,
                                                                          tmp_path: Path, form: str) -> None:
    """The agent is told the world's path and may replace it: O_NOFOLLOW guards only the last name opened, so
    ``world/files`` is reached through a ``world`` that is a symlink, and the harness (root) writes there."""
    elsewhere = tmp_path / "host-folder"
    seed_world(elsewhere, {}, {})
    world.rename(tmp_path / "world.moved")
    world.symlink_to(elsewhere, target_is_directory=True)
    append(tools, form)
    written = sorted(str(path.relative_to(elsewhere)) for path in elsewhere.rglob("*") if path.is_file())
    assert written == [], f"the tool service wrote {written} through the swapped world"


@REQUEST_FORMS
def test_a_ledger_the_agent_swapped_for_a_symlink_is_never_followed(tools: ToolService, tmp_path: Path,
                                                                    victim: Path, form: str) -> None:
    """The agent is told the ledger's path; replaced by a symlink, the next incarnation's ``begin`` opens it
    with O_CREAT and no O_NOFOLLOW, and every ledger line lands in the host file."""
    ledger = tmp_path / "ledger.jsonl"
    dangling = tmp_path / "host" / "created-by-the-harness"
    ledger.unlink()
    ledger.symlink_to(victim)
    tools.freeze()
    with contextlib.suppress(Exception):  # refusing the swapped ledger is safe; writing through it is not
        tools.begin(1)
        append(tools, form)
    tools.freeze()
    ledger.unlink()
    ledger.symlink_to(dangling)
    with contextlib.suppress(Exception):
        tools.begin(2)
    assert victim.read_text() == VICTIM_TEXT, "the ledger lines went through the agent's symlink to a host file"
    assert not dangling.exists(), "begin created the file the agent's dangling symlink names"


def test_a_ledger_the_agent_swapped_for_a_fifo_does_not_hang_the_next_incarnation(tools: ToolService,
                                                                                 tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    ledger.unlink()
    os.mkfifo(ledger)
    tools.freeze()
    errors: list[BaseException] = []

    def begin() -> None:
        try:
            tools.begin(1)
        except Exception as error:  # refusing the FIFO is safe; waiting on it forever is not
            errors.append(error)

    beginning = threading.Thread(target=begin, daemon=True)
    beginning.start()
    returned = wait_for(lambda: not beginning.is_alive(), 2.0)
    if not returned:  # release the harness's thread: a reader opens the FIFO
        reader = os.open(ledger, os.O_RDONLY | os.O_NONBLOCK)
        beginning.join(DEADLINE_S)
        os.close(reader)
    assert returned, "ToolService.begin blocked opening a FIFO the agent left as the ledger"


@pytest.mark.parametrize("plant", ["file", "folder"])
def test_the_seams_record_is_never_written_through_a_planted_symlink(world: Path, tmp_path: Path, victim: Path,
                                                                    plant: str) -> None:
    """The agent knows the run directory (the parent of its own) and may plant ``store-at-kill-N`` there before
    the kill; ``AgentServices.save`` makes the folder with exist_ok and writes with ``write_text``."""
    (tmp_path / "ledger.jsonl").touch()
    run_dir = tmp_path / "run"
    folder = run_dir / "store-at-kill-0"
    if plant == "file":
        folder.mkdir(parents=True)
        (folder / EXCHANGES_FILE).symlink_to(victim)
        (folder / SEAMS_FILE).symlink_to(victim)
    else:
        run_dir.mkdir()
        folder.symlink_to(victim.parent, target_is_directory=True)
    services = AgentServices.start(TOOLS_PLAN, world, tmp_path / "ledger.jsonl", None)
    try:
        services.begin(0)
        post_json(f"{services.tools.url}/tools/append", APPEND_ARGS)
        with contextlib.suppress(Exception):  # refusing to write there is safe; writing through it is not
            services.save(folder)
    finally:
        services.close()
    assert victim.read_text() == VICTIM_TEXT and os.listdir(victim.parent) == ["victim.txt"]


@pytest.mark.parametrize(("tool", "area", "content"), [
    ("append", "latency", "not json"),
    ("append", "latency", "[" * 100_000),
    ("append", "latency", '{"append": Infinity}'),
    ("append", "latency", '{"append": 1e300}'),
    ("append", "file_history", '{"changes": 5}'),
    ("verify_effect", "file_history", '{"changes": 5}'),
    ("verify_effect", "file_history", "not json"),
])
def test_a_state_area_the_agent_corrupted_gets_an_answer_not_a_traceback(
        tools: ToolService, world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], tool: str, area: str,
        content: str) -> None:
    """The world's state areas are the agent's to write; a tool that then raises past ``REFUSALS`` (JSON errors,
    TypeError, OverflowError from time.sleep) ends the harness's handler thread: no answer, a traceback."""
    (world / "state" / f"{area}.json").write_text(content)
    args = APPEND_ARGS if tool == "append" else {"call_id": "c2"}
    body = json.dumps(args).encode()
    received = exchange_raw(tools, request_bytes(tools, "POST", f"/tools/{tool}", body, {"Connection": "close"}))
    assert len(statuses(received)) == 1, f"no answer: {received[:200]!r}"
    assert "Traceback" not in no_traceback(capsys)


def test_a_latency_the_agent_planted_cannot_outlast_the_freeze(tools: ToolService, world: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``state/latency.json`` makes a tool sleep inside the acting window; the agent sets it to hours, calls the
    tool, and the harness's ``strike`` then waits FREEZE_DEADLINE_S (60 s) and raises TimeoutError: the run
    ends in a traceback. Here the deadline is 1 s and the latency 3 s."""
    monkeypatch.setattr(tool_service, "FREEZE_DEADLINE_S", 1.0)
    (world / "state" / "latency.json").write_text('{"append": 3}')
    def call() -> None:
        with contextlib.suppress(Exception):
            post_json(f"{tools.url}/tools/append", APPEND_ARGS)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    assert wait_for(lambda: tools._acting == 1)
    started = time.monotonic()
    try:
        tools.freeze()
        froze: BaseException | None = None
    except TimeoutError as error:
        froze = error
    took = time.monotonic() - started
    assert wait_for(lambda: tools._acting == 0), "the planted latency still holds the call"  # let it end here
    caller.join(DEADLINE_S)
    assert froze is None and took < 1.0, f"freeze: {froze!r} after {took:.1f}s"


# -- an agent that was killed, or outlived its kill --------------------------------------------------------------

def test_a_request_after_the_strike_acts_on_nothing(tools: ToolService, world: Path, tmp_path: Path) -> None:
    tools.freeze()
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        post_json(f"{tools.url}/tools/append", APPEND_ARGS)
    assert not (world / "files" / "log.txt").exists() and ledger_lines(tmp_path / "ledger.jsonl") == []


def test_an_orphan_of_a_killed_incarnation_cannot_act_in_the_next(tools: ToolService, world: Path,
                                                                  tmp_path: Path) -> None:
    """An orphan the killed agent left (one the escapee hunt does not see: it holds none of the run's files) still
    has the URLs it was handed; the secret is drawn once per run, so its calls act in the next incarnation's name."""
    url_of_killed = tools.url
    tools.freeze()
    tools.begin(1)
    try:
        status = post_json(f"{url_of_killed}/tools/append", APPEND_ARGS)[0]
    except urllib.error.HTTPError as error:
        status = error.code
    except (urllib.error.URLError, ConnectionError, http.client.HTTPException, ValueError):
        status = None
    assert status != 200 and not (world / "files" / "log.txt").exists(), \
        f"the orphan's call ran as incarnation 1's: {ledger_lines(tmp_path / 'ledger.jsonl')}"
    assert post_json(f"{tools.url}/tools/read_file", {"path": "notes.txt"})[0] == 200  # the real agent's


ANNOUNCES_A_SEAM = """
import json, socket, sys
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
    client.settimeout(10)
    client.connect(sys.argv[1])
    client.sendall(json.dumps({"point": "tool_effect", "call": "c2", "op": None, "incarnation": 0}).encode() + b"\\n")
    print(client.recv(64).decode().strip())
"""


@pytest.mark.integration
def test_a_seam_the_agent_announces_itself_kills_nothing() -> None:
    """An ``[agent]`` incarnation is handed $KILLPOINT_CONTROL like any workload: were a seam point taken from
    anyone, the agent could announce ``c2:tool_effect`` before calling the tool and be killed where no effect is,
    a kill the agent placed. Only the harness's own process (its services' SeamClient) announces seams."""
    folder = Path(tempfile.mkdtemp(prefix="kp-hostile-", dir="/tmp"))
    server = RendezvousServer(folder / "control.sock")
    try:
        agent = subprocess.Popen([sys.executable, "-c", ANNOUNCES_A_SEAM, str(folder / "control.sock")],
                                 stdout=subprocess.PIPE, text=True)
        started = time.monotonic()
        served = server.serve(agent.pid, AtPoint("tool_effect", "c2"), started=started, deadline=started + 30)
        answer = agent.communicate(timeout=DEADLINE_S)[0]
        server.drop_connections()
    finally:
        server.close()
        folder.rmdir()
    assert served.hit is None, f"the agent's own announcement was taken for the tool service's: {served.points}"
    assert answer.strip() == "ok" and served.points == []
    assert served.protocol_problems == [f"c2:tool_effect was announced by process {agent.pid}, not by the harness's "
                                        "agent services, which alone announce seams: not a crash point, nothing killed"]


def test_the_real_agent_is_still_answered_after_every_attack(endpoint: ModelEndpoint, tools: ToolService,
                                                             world: Path) -> None:
    """After garbage, truncation and a refused request on the same servers, a well-formed request still works."""
    for server in (endpoint, tools):
        exchange_raw(server, b"\x00\xff garbage\r\n\r\n", quiet_s=0.5)
        exchange_raw(server, request_bytes(server, "POST", "/x", b"{", {"Content-Length": "9"}, length=False),
                     quiet_s=0.2)
    assert post_model(endpoint, "/v1/chat/completions", CHAT)[0] == 200
    assert post_json(f"{tools.url}/tools/append", APPEND_ARGS)[0] == 200
    assert (world / "files" / "log.txt").read_text() == "one\n"

