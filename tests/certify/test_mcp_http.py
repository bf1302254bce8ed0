"""``certify --mcp-url``: the HTTP client against servers that misbehave, and the same certificates as ``--mcp``.

The hostile servers are sockets in a thread of the test (no process): each
answers one way, and the client must end in a ServerError or a timed-out call
within its deadline, never a hang. The comparisons start real servers
(integration): tests/certify/servers/atomic.py over stdio and over HTTP.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from killpoint.harness.certify.mcp_client import ServerError
from killpoint.harness.certify.mcp_http import HttpMcp, parse_url
from killpoint.harness.frontends._command import killpoint_command
from tests.helpers import CliResult

ATOMIC = Path(__file__).parent / "servers" / "atomic.py"
DEADLINE_S = 1.0
# How far past the deadline a call may end on a loaded machine: a server that streams forever would never let it end,
# so any bound tells a deadline kept from a hang (2 s failed beside a CPU hog with the suite's other workers).
LATE_S = 9.0
Killpoint = Callable[..., CliResult]
TOOL_ANSWER = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "ok"}], "isError": False}}


def _head(content_type: str, length: int | None = None) -> bytes:
    sized = f"Content-Length: {length}\r\n" if length is not None else ""
    return f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{sized}\r\n".encode()


def _json(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return _head("application/json", len(body)) + body


def _read_request(conn: socket.socket) -> bytes:
    """The request's head and body (by its Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    while len(body) < length:
        body += conn.recv(65536)
    return body


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[socket.socket, bytes], None]], HttpMcp]]:
    """``serve(answer)``: a client of a local socket whose every connection ``answer(conn, body)`` handles."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    threads = []

    def start(answer: Callable[[socket.socket, bytes], None]) -> HttpMcp:
        def loop() -> None:
            listener.settimeout(0.05)
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                with conn:
                    try:
                        answer(conn, _read_request(conn))
                    except OSError:  # the client dropped the connection: it gave up, as it should
                        pass

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        threads.append(thread)
        url = parse_url(f"http://127.0.0.1:{listener.getsockname()[1]}/mcp")
        return HttpMcp(url, call_timeout_s=DEADLINE_S, protocol="stateless")

    yield start
    stop.set()
    for thread in threads:
        thread.join(timeout=5)
    listener.close()


def _silent(conn: socket.socket, body: bytes) -> None:
    time.sleep(DEADLINE_S * 1.5)


def _garbage(conn: socket.socket, body: bytes) -> None:
    conn.sendall(_head("application/json", 9) + b"not json!")


def _not_http(conn: socket.socket, body: bytes) -> None:
    conn.sendall(b"SSH-2.0-OpenSSH\r\n\r\n")


def _endless_head(conn: socket.socket, body: bytes) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * (128 << 10))


def _endless_stream(conn: socket.socket, body: bytes) -> None:
    """An SSE answer that never ends: notifications (never the answer) every 10 ms, past the client's deadline."""
    conn.sendall(_head("text/event-stream"))
    ends = time.monotonic() + DEADLINE_S * 3
    while time.monotonic() < ends:
        conn.sendall(b'event: message\r\ndata: {"jsonrpc": "2.0", "method": "notifications/progress"}\r\n\r\n')
        time.sleep(0.01)


@pytest.mark.parametrize(("answer", "message"), [
    (_silent, "it did not answer server/discover within 1s"),
    (_garbage, "an answer that is not JSON-RPC: 'not json!'"),
    (_not_http, "it answered something that is not HTTP/1.1"),
    (_endless_head, "its HTTP answer's head is longer than 64 KiB"),
    (_endless_stream, "it did not answer server/discover within 1s"),
])
def test_a_server_that_does_not_answer_answers_garbage_or_streams_forever_is_an_error_within_the_deadline(
        serve: Callable[..., HttpMcp], answer: Callable[[socket.socket, bytes], None], message: str) -> None:
    client = serve(answer)
    started = time.monotonic()
    with pytest.raises(ServerError) as raised:
        client.initialize()
    assert message in str(raised.value)
    assert time.monotonic() - started < DEADLINE_S + LATE_S, "the deadline bounds it, whatever the server does"


def test_a_tool_call_whose_sse_answer_never_comes_times_out_at_the_call_timeout(serve: Callable[..., HttpMcp]) -> None:
    client = serve(_endless_stream)
    client.stateless, client.version = True, "2026-07-28"  # negotiated: only the call is under test
    started = time.monotonic()
    call = client.call_tool("save_file", {"path": "a.txt"})
    assert call.timed_out and not call.ok and call.error == f"no answer within {DEADLINE_S:g}s"
    assert time.monotonic() - started < DEADLINE_S + LATE_S


def test_an_sse_answer_after_notifications_and_a_chunked_json_answer_are_read(serve: Callable[..., HttpMcp]) -> None:
    def chunked_sse(conn: socket.socket, body: bytes) -> None:
        events = (b'data: {"jsonrpc": "2.0", "method": "notifications/message"}\n\n'
                  b"data: " + json.dumps(TOOL_ANSWER).encode() + b"\n\n")
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for part in (events[:30], events[30:]):
            conn.sendall(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        conn.sendall(b"0\r\n\r\n")

    client = serve(chunked_sse)
    client.stateless = True
    call = client.call_tool("save_file", {})
    assert (call.ok, call.text, call.timed_out) == (True, "ok", False)


def test_an_http_error_status_is_quoted_and_a_refused_connection_says_nothing_listens(
        serve: Callable[..., HttpMcp]) -> None:
    def too_large(conn: socket.socket, body: bytes) -> None:
        conn.sendall(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 23\r\n\r\nRequest body too large")

    client = serve(too_large)
    with pytest.raises(ServerError, match="it answered server/discover with HTTP 413: 'Request body too large'"):
        client.initialize()
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    with pytest.raises(ServerError, match=f"nothing listens at http://127.0.0.1:{port}/mcp"):
        HttpMcp(parse_url(f"http://127.0.0.1:{port}/mcp"), call_timeout_s=DEADLINE_S).initialize()


# ---------------------------------------------------------------------- real servers
def _table(out: str) -> list[str]:
    """The table's rows without the SECS column (wall time)."""
    rows = [line.split() for line in out.splitlines() if line.startswith(("append_line", "locked_save", "save_file"))]
    return [" ".join(row[:9] + row[10:]) for row in rows if len(row) > 9]


@pytest.mark.integration
@pytest.mark.parametrize("served", [
    ("--mcp-url", "http://127.0.0.1:{port}/mcp"),  # auto: the stateless protocol, JSON answers
    ("--mcp-url", "http://127.0.0.1:{port}/mcp", "--mcp-protocol", "handshake"),  # a session, SSE answers
])
def test_mcp_url_gives_the_same_certificates_as_mcp_for_a_server_that_speaks_both(
        killpoint: Killpoint, tmp_path: Path, served: tuple[str, ...]) -> None:
    common = ("--seed", "0", "--trials", "2", "--tool", "locked_save")
    stdio = killpoint("certify", "--mcp", f"{sys.executable} {ATOMIC} {{world}}", *common, "--out", tmp_path / "stdio")
    http = killpoint("certify", "--mcp", f"{sys.executable} {ATOMIC} {{world}} --http {{port}}", *served, *common,
                     "--out", tmp_path / "http")
    assert stdio.exit_code == http.exit_code == 1, stdio.out + stdio.err + http.out + http.err
    assert _table(http.out) == _table(stdio.out) and _table(stdio.out), http.out + stdio.out
    certificates = [json.loads((tmp_path / kind / "locked_save.json").read_text()) for kind in ("stdio", "http")]
    keys = ("verdict", "strongest_supported", "kill_left", "trials")
    assert [{key: one[key] for key in keys} for one in certificates][0] == {key: certificates[1][key] for key in keys}
    protocol = "2025-11-25" if "handshake" in served else "2026-07-28"
    assert certificates[1]["identity"]["protocol"] == protocol
    assert certificates[1]["adapter"]["mcp_url"] == "http://127.0.0.1:{port}/mcp"


@pytest.mark.integration
def test_a_server_the_user_runs_is_certified_on_its_folder_which_is_left_as_it_was(tmp_path: Path) -> None:
    """Its kill is the client's death: the server finishes the call, so a kill leaves the world as one call does."""
    world = tmp_path / "world"
    world.mkdir()
    (world / "a.txt").write_text("alpha\n")
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(ATOMIC), str(world), "--http", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        run = subprocess.run([*killpoint_command().split(), "certify", "--mcp-url", f"http://127.0.0.1:{port}/mcp",
                              "--world", str(world), "--seed", "0", "--trials", "2", "--out", str(tmp_path / "c")],
                             capture_output=True, text=True, timeout=120)
    finally:
        server.kill()
        server.wait(timeout=10)
    assert run.returncode == 1, run.stdout + run.stderr
    verdicts = {row.split()[0]: row.split()[6] for row in _table(run.stdout)}
    assert verdicts == {"append_line": "REFUTED", "locked_save": "CONFIRMED", "save_file": "CONFIRMED"}, run.stdout
    saved = json.loads((tmp_path / "c" / "save_file.json").read_text())
    left = saved["kill_left"]
    assert left["once"] >= 1 and left["torn"] == [], left  # the server finished each call its client died in
    assert sorted(path.name for path in world.iterdir()) == ["a.txt"] and (world / "a.txt").read_text() == "alpha\n"
