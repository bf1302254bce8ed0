"""MCP over streamable HTTP for ``certify --mcp-url``: a synchronous client whose every read has a deadline.

Why not the SDK's ``streamable_http_client``: it is anyio, and the trials are
synchronous, with the world's changes (``world_events``) read in the same
``select`` as the server's answer so a kill lands at a change, not when a
portal thread lets it. So one POST is one connection of its own (``Connection:
close``), a non-blocking socket driven by that ``select``: the request is
written as the server takes it, the answer read as it comes, and the call's
deadline bounds all of it, whatever the server does (answer nothing, trickle
bytes, stream an SSE response forever). The head, a chunk's size line and one
message (a JSON body, or one SSE event) are bounded as the stdio client bounds
a line; what is parsed out is checked by the same code (``mcp_client``).

Both protocols the pinned SDK (2.3.0) speaks, negotiated as its ``mode='auto'``
does (``mcp.client._probe``): ``server/discover`` at 2026-07-28 first, the
version, client capabilities and client info in each request's ``_meta`` and in
the ``Mcp-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` headers
(stateless: no session); any answer that is not a modern discover result falls
back to the handshake (``initialize``, the ``Mcp-Session-Id`` it may hand out
sent back on every request, ``notifications/initialized``, a DELETE of the
session at the end). An answer is JSON or an SSE stream whose events carry
JSON-RPC messages; an SSE stream that ends before the answer is not resumed
(no ``Last-Event-ID``): the call failed, and says so.

What killing means: ``HttpMcpServer`` is a server killpoint started
(``--mcp 'CMD {world} {port}'`` with ``--mcp-url``), killed with its cgroup as a
stdio one is; ``HttpMcp`` alone is a server the user runs, which killpoint
cannot kill: its "kill" is the client dying mid-call, the connection dropped
(``kill``), after which the server may finish the call on its own.
"""

from __future__ import annotations

import errno
import json
import selectors
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from killpoint.errors import ConfigError
from killpoint.harness.certify.mcp_client import (MAX_LINE_BYTES, PROTOCOL_VERSION, McpClient, ServerError, ServerInfo,
                                                  ServerProcess, parse_message, server_info)

STATELESS_VERSION = "2026-07-28"  # the stateless protocol of the pinned SDK (mcp_types.version.LATEST_MODERN_VERSION)
PROTOCOLS = ("auto", "handshake", "stateless")
MAX_HEAD_BYTES = 64 << 10  # status line and headers of one answer
MAX_ERROR_BODY = 4096  # of an answer with an HTTP error status, kept to quote it
RETRY_S = 0.05  # between connections refused while a server killpoint started is not listening yet
CLIENT_INFO = {"name": "killpoint-certify", "version": "1"}


class Unanswered(ServerError):
    """Nothing came back: no answer in time, or nothing listening. Not a reason to try the other protocol."""


@dataclass(frozen=True)
class Url:
    text: str
    host: str
    port: int
    path: str


def parse_url(text: str, flag: str = "--mcp-url") -> Url:
    """``http://HOST[:PORT]/PATH``; ConfigError naming ``flag`` for anything else (https is not spoken)."""
    parts = urlsplit(text)
    how = f"write http://HOST:PORT/PATH, e.g. {flag} http://127.0.0.1:8000/mcp"
    if parts.scheme != "http" or not parts.hostname:
        raise ConfigError(f"{flag} {text!r}: not an http:// URL with a host; {how}"
                          + (" (https is not spoken: put the server behind http on localhost)"
                             if parts.scheme == "https" else ""))
    try:
        port = parts.port or 80
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: its port is not a number from 0 to 65535; {how}") from None
    return Url(text, parts.hostname, port, (parts.path or "/") + (f"?{parts.query}" if parts.query else ""))


class _Exchange:
    """One HTTP request and its answer, on a connection of its own: bytes out, JSON-RPC messages in.

    ``messages`` gets each message as it is parsed (the one JSON body, or each
    SSE event's); ``done`` once the answer has ended; ``status`` and ``error``
    (an HTTP error status, with the start of its body) once the head is read.
    """

    def __init__(self, url: Url, method: str, headers: dict[str, str], body: bytes) -> None:
        head = [f"{method} {url.path} HTTP/1.1", f"Host: {url.host}:{url.port}", "Connection: close",
                f"Content-Length: {len(body)}", *(f"{name}: {value}" for name, value in headers.items())]
        self.url, self.outbox = url, bytearray(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        self.sock = socket.socket(socket.AF_INET6 if ":" in url.host else socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        self.connected = False
        self.sock.connect_ex((url.host, url.port))
        self.status: int | None = None
        self.stream = False  # an SSE answer
        self.done = False
        self.messages: list[dict[str, Any]] = []
        self._inbox = bytearray()  # bytes not yet parsed: the head, then the body as sent
        self._content = bytearray()  # the body, de-chunked, not yet parsed
        self._length: int | None = None  # Content-Length, if given
        self._chunked = False
        self._chunk_left: int | None = None  # bytes left of this chunk; None: its size line comes; -1: its CRLF
        self._data: list[bytes] = []  # the current SSE event's data lines
        self._data_bytes = 0

    @property
    def sent(self) -> bool:
        return self.connected and not self.outbox

    def pump(self) -> None:
        """Move what the socket allows now: connect, write, read; OSError for a refused or broken connection."""
        if not self.connected:
            failure = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if failure:
                raise OSError(failure, errno.errorcode.get(failure, str(failure)))
            self.connected = True
        try:
            while self.outbox:
                del self.outbox[:self.sock.send(self.outbox)]
        except BlockingIOError:
            pass
        except (BrokenPipeError, ConnectionResetError):  # it answered (a 413) and closed before reading it all:
            self.outbox.clear()                           # its answer may still be there to read
        try:
            chunk = self.sock.recv(1 << 20)
        except BlockingIOError:
            return
        if chunk:
            self._take(chunk)
        else:
            self._end()

    def close(self) -> None:
        self.sock.close()

    # ------------------------------------------------------------------ the answer, as it comes
    def _take(self, chunk: bytes) -> None:
        self._inbox += chunk
        if self.status is None:
            head, separator, rest = self._inbox.partition(b"\r\n\r\n")
            if not separator:
                if len(self._inbox) > MAX_HEAD_BYTES:
                    raise ServerError(f"its HTTP answer's head is longer than {MAX_HEAD_BYTES >> 10} KiB")
                return
            self._head(bytes(head))
            self._inbox = bytearray(rest)
        self._body()

    def _head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        words = lines[0].split(" ", 2)
        if len(words) < 2 or not words[0].startswith("HTTP/1.") or not words[1].isdigit():
            raise ServerError(f"it answered something that is not HTTP/1.1: {head[:200].decode(errors='replace')!r}")
        self.status = int(words[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self.headers = headers
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length", "")
        self._length = int(length) if length.isdigit() and not self._chunked else None
        kind = headers.get("content-type", "").partition(";")[0].strip().lower()
        self.stream = self.status == 200 and kind == "text/event-stream"
        if self.status == 200 and kind != "application/json" and not self.stream:
            raise ServerError(f"it answered a request with Content-Type {kind or 'none'!r}, neither application/json "
                              f"nor text/event-stream")
        if self.status == 202 or self._length == 0:
            self.done = True

    def _body(self) -> None:
        """De-chunk what came, then parse it (an SSE event at a time, or the whole JSON body at its end)."""
        if self._chunked:
            self._dechunk()
        else:
            self._content += self._inbox
            self._inbox.clear()
            if self._length is not None and len(self._content) >= self._length:
                del self._content[self._length:]
                self.done = True
        if self.stream:
            self._events()
        elif len(self._content) > (MAX_LINE_BYTES if self.status == 200 else MAX_ERROR_BODY):
            if self.status != 200:
                self.done = True
            else:
                raise ServerError(f"its answer is longer than {MAX_LINE_BYTES >> 20} MiB")
        if self.done and not self.stream:
            self._whole()

    def _dechunk(self) -> None:
        while not self.done:
            if self._chunk_left is None:
                line, separator, rest = self._inbox.partition(b"\r\n")
                if not separator:
                    if len(self._inbox) > 1024:
                        raise ServerError("its chunked answer has a chunk size line longer than 1 KiB")
                    return
                try:
                    self._chunk_left = int(line.split(b";")[0], 16)
                except ValueError:
                    raise ServerError(f"its chunked answer has a chunk size that is not hexadecimal: {bytes(line[:40])!r}") from None
                self._inbox = bytearray(rest)
                if self._chunk_left == 0:
                    self.done = True
            elif self._chunk_left == -1:
                if len(self._inbox) < 2:
                    return
                del self._inbox[:2]
                self._chunk_left = None
            else:
                if not self._inbox:
                    return
                taken = self._inbox[:self._chunk_left]
                del self._inbox[:len(taken)]
                self._content += taken
                self._chunk_left -= len(taken)
                if self._chunk_left == 0:
                    self._chunk_left = -1

    def _events(self) -> None:
        """Each complete SSE line: ``data:`` lines gather, a blank line ends the event (its data one message)."""
        *lines, rest = self._content.split(b"\n")
        if len(rest) > MAX_LINE_BYTES:
            raise ServerError(f"its SSE stream has a line of more than {MAX_LINE_BYTES >> 20} MiB")
        self._content = bytearray(rest)
        for raw in lines:
            line = raw.rstrip(b"\r")
            if not line:
                if self._data:
                    self._parsed(b"\n".join(self._data), "an SSE event whose data is not JSON-RPC")
                self._data, self._data_bytes = [], 0
            elif line.startswith(b"data:"):
                value = line[5:]
                self._data.append(bytes(value[1:] if value.startswith(b" ") else value))
                self._data_bytes += len(value)
                if self._data_bytes > MAX_LINE_BYTES:
                    raise ServerError(f"its SSE stream has an event of more than {MAX_LINE_BYTES >> 20} MiB")

    def _whole(self) -> None:
        if self.status == 200 or self._content.strip().startswith(b"{"):
            try:
                self._parsed(bytes(self._content), "an answer that is not JSON-RPC")
            except ServerError:
                if self.status == 200:
                    raise

    def _parsed(self, data: bytes, what: str) -> None:
        message = parse_message(data, what)
        self.messages.append(message)

    def _end(self) -> None:
        """The server closed the connection: the answer ends here (an answer without a length ends so)."""
        if self.status is None:
            raise ServerError("it closed the connection without answering" if not self._inbox else
                              f"it closed the connection in the middle of its HTTP head: "
                              f"{bytes(self._inbox[:200]).decode(errors='replace')!r}")
        if not self.done and (self._length is not None or self._chunked) and self.status == 200:
            raise ServerError("it closed the connection in the middle of its answer")
        self.done = True
        if not self.stream:
            self._whole()


class HttpMcp(McpClient):
    """A streamable-HTTP server at ``url``; a server the user runs, which killpoint cannot kill.

    ``protocol``: ``auto`` (negotiated as the SDK does), ``handshake`` or
    ``stateless``. Its ``kill`` drops the connection: the client died mid-call.
    """

    def __init__(self, url: Url, *, call_timeout_s: float, protocol: str = "auto") -> None:
        self.url, self.call_timeout_s, self.protocol = url, call_timeout_s, protocol
        self.info: ServerInfo | None = None
        self.used = False
        self.returncode: int | None = None
        self.stateless = False
        self.version: str | None = None  # the negotiated protocol version, sent on every request after it
        self.session_id: str | None = None
        self._next_id = 0
        self._exchange: _Exchange | None = None
        self._request_of: tuple[str, dict[str, str], bytes] | None = None  # to connect again while it starts
        self._retry_at: float | None = None
        self._answers: dict[Any, dict[str, Any]] = {}

    # ------------------------------------------------------------------ negotiation
    def initialize(self) -> ServerInfo:
        """Negotiate once: ``server/discover`` (unless ``handshake``), else ``initialize``; the server's identity."""
        if self.info is not None:
            return self.info
        deadline = time.monotonic() + self.call_timeout_s
        if self.protocol != "handshake":
            try:
                result = self._request(self._begin("server/discover", {}), self.call_timeout_s, "server/discover")
            except Unanswered:
                raise
            except ServerError:
                if self.protocol == "stateless":
                    raise
            else:
                discovered = self._discovered(result)
                if discovered is not None:
                    self.info = discovered
                    return discovered
                if self.protocol == "stateless":
                    raise ServerError(f"its server/discover does not offer the stateless protocol {STATELESS_VERSION}: "
                                      f"{json.dumps(result.get('supportedVersions'))[:200]}")
        result = self._request(self._begin("initialize", {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO}),
            deadline - time.monotonic(), "initialize")
        info = server_info(result, "initialize")
        self.version = info.protocol
        self._notify("notifications/initialized", deadline)
        self.info = info
        return info

    def _discovered(self, result: dict[str, Any]) -> ServerInfo | None:
        """The server's identity if ``result`` is a discover result offering the stateless protocol; then adopted."""
        import mcp_types
        from mcp_types import SERVER_INFO_META_KEY

        try:
            parsed = mcp_types.DiscoverResult.model_validate(result)
        except ValueError:
            return None
        if STATELESS_VERSION not in parsed.supported_versions:
            return None
        self.stateless, self.version = True, STATELESS_VERSION
        stamp = (result.get("_meta") or {}).get(SERVER_INFO_META_KEY)
        stamp = stamp if isinstance(stamp, dict) else {}
        return ServerInfo(str(stamp.get("name", "?"))[:200], str(stamp.get("version", "?"))[:200], STATELESS_VERSION)

    def _notify(self, method: str, deadline: float) -> None:
        """POST a notification; its answer (202, nothing) is awaited so the session is ready for the next request."""
        self._open(method, {"jsonrpc": "2.0", "method": method})
        with selectors.DefaultSelector() as selector:
            while self._exchange is not None and not self._exchange.done:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._abandon()
                    raise Unanswered(f"it did not answer {method} within {self.call_timeout_s:g}s")
                self._select(selector, left)

    # ------------------------------------------------------------------ the hooks
    def _begin(self, method: str, params: dict[str, Any]) -> int:
        self._next_id += 1
        if self.stateless or method == "server/discover":
            params = {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
                                          "io.modelcontextprotocol/clientCapabilities": {},
                                          "io.modelcontextprotocol/clientInfo": CLIENT_INFO}}
        self._open(method, {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def _open(self, method: str, message: dict[str, Any]) -> None:
        """Start the POST of ``message`` on a new connection (the one before is dropped)."""
        from mcp.shared.inbound import encode_header_value

        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.stateless or method == "server/discover":
            headers.update({"Mcp-Protocol-Version": STATELESS_VERSION, "Mcp-Method": method})
            if method == "tools/call":
                headers["Mcp-Name"] = encode_header_value(str(message["params"]["name"]))
        elif self.version is not None:
            headers["Mcp-Protocol-Version"] = self.version
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        self._request_of = ("POST", headers, json.dumps(message, ensure_ascii=False).encode())
        self._connect()

    def _connect(self) -> None:
        self._abandon()
        assert self._request_of is not None
        try:
            self._exchange = _Exchange(self.url, *self._request_of)
        except OSError as error:
            raise Unanswered(f"cannot connect to {self.url.text}: {error.strerror or error}") from None
        self._retry_at = None

    def _select(self, selector: selectors.BaseSelector, timeout: float) -> set[str]:
        """Wait for the connection (or a retry's time) and what ``selector`` watches; move the exchange's bytes."""
        exchange = self._exchange
        for key in list(selector.get_map().values()):
            if key.data == "http" and (exchange is None or key.fileobj is not exchange.sock or self._retry_at):
                selector.unregister(key.fileobj)
        if exchange is not None and self._retry_at is None and not exchange.done:
            mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if not exchange.sent else 0)
            if exchange.sock in selector.get_map():
                selector.modify(exchange.sock, mask, "http")
            else:
                selector.register(exchange.sock, mask, "http")
        if self._retry_at is not None:
            timeout = min(timeout, max(0.0, self._retry_at - time.monotonic()))
        ready = {key.data for key, _ in selector.select(timeout=timeout)} if selector.get_map() else _sleep(timeout)
        if self._retry_at is not None and time.monotonic() >= self._retry_at:
            self._connect()
        elif "http" in ready and exchange is not None:
            self._pump(exchange)
        return ready

    def _pump(self, exchange: _Exchange) -> None:
        try:
            exchange.pump()
        except ConnectionRefusedError:
            self._refused()
        except OSError as error:
            self._abandon()
            raise ServerError(f"the connection to {self.url.text} failed: {error.strerror or error}") from None
        except ServerError:
            self._abandon()
            raise
        for message in exchange.messages:
            if "id" in message and "method" not in message:
                self._answers[message["id"]] = message
        exchange.messages.clear()
        if exchange.status is not None and "mcp-session-id" in exchange.headers and self.session_id is None:
            self.session_id = exchange.headers["mcp-session-id"][:1000]

    def _refused(self) -> None:
        """Nothing listens at the URL: a server the user runs is not running (``HttpMcpServer`` waits for its own)."""
        self._abandon()
        raise Unanswered(f"nothing listens at {self.url.text} (connection refused); start the server first")

    def _answer(self, ready: set[str], request_id: int, what: str) -> dict[str, Any] | None:
        answer = self._answers.pop(request_id, None)
        exchange = self._exchange
        if answer is not None or exchange is None or not exchange.done:
            return answer
        self._abandon()
        if exchange.status not in (200, 202):
            body = bytes(exchange._content[:300]).decode(errors="replace").strip()
            raise ServerError(f"it answered {what} with HTTP {exchange.status}" + (f": {body!r}" if body else ""))
        raise ServerError(f"its answer to {what} ended without a JSON-RPC answer"
                          + (" (its SSE stream closed first; killpoint does not resume streams)" if exchange.stream else
                             " (HTTP 202: accepted, nothing answered)" if exchange.status == 202 else ""))

    def _delivered(self) -> bool:
        return self._exchange is not None and self._exchange.sent

    def _unsent_note(self) -> str:
        left = len(self._exchange.outbox) if self._exchange is not None else 0
        return f" (and it had not read {left} bytes of the request)" if left else ""

    def _abandon(self) -> None:
        if self._exchange is not None:
            self._exchange.close()
            self._exchange = None

    # ------------------------------------------------------------------ ending it
    def kill(self) -> int | None:
        """The client dies mid-call: the connection is dropped. The server is not killpoint's to kill."""
        self._abandon()
        return None

    def close(self) -> None:
        """Drop the connection; end a handshake session with a DELETE (within a second, its answer unread)."""
        self._abandon()
        if self.session_id is None:
            return
        self._request_of = ("DELETE", {"Mcp-Session-Id": self.session_id, "Mcp-Protocol-Version": self.version or ""}, b"")
        self.session_id = None
        try:
            self._connect()
            deadline = time.monotonic() + 1.0
            with selectors.DefaultSelector() as selector:
                while self._exchange is not None and self._exchange.status is None and time.monotonic() < deadline:
                    self._select(selector, deadline - time.monotonic())
        except ServerError:
            pass
        finally:
            self._abandon()

    @property
    def alive(self) -> bool:
        return True

    def stderr_tail(self) -> str:
        return ""


class HttpMcpServer(ServerProcess, HttpMcp):
    """A streamable-HTTP server killpoint started (``--mcp`` with ``--mcp-url``): killed with its cgroup."""

    def __init__(self, argv: list[str], url: Url, *, cwd: Path, env: dict[str, str], stderr_path: Path,
                 call_timeout_s: float, protocol: str) -> None:
        ServerProcess.__init__(self, argv, cwd=cwd, env=env, stderr_path=stderr_path, stdio=False)
        HttpMcp.__init__(self, url, call_timeout_s=call_timeout_s, protocol=protocol)

    def _refused(self) -> None:
        """Not listening yet: connect again shortly while it starts (within the deadline); dead, say why."""
        if self.process.poll() is not None:
            self._abandon()
            raise ServerError(self._death(f"before it listened at {self.url.text}"))
        if self.info is not None:
            super()._refused()
        self._abandon()
        self._retry_at = time.monotonic() + RETRY_S

    def close(self) -> None:
        self._abandon()
        ServerProcess.close(self)


def _sleep(seconds: float) -> set[str]:
    time.sleep(seconds)
    return set()
