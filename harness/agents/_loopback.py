"""A threaded HTTP server on 127.0.0.1 that the harness runs for one run's agent: started, served, closed.

Any process on the host can reach a loopback port, another session's agent
included (runs go side by side under ``-j``), and what reaches the tool service
writes the run's ledger. So every server answers only under a path prefix no
one else is told: a random secret in its ``url``, which the harness hands its
own agent alone (the SDKs take a base URL with a path); any other path is a
404 that reaches nothing. The secret is drawn again before every incarnation
(``new_secret``): an orphan a killed incarnation left cannot act in the next one's name.

What connects is untrusted too, so a server's own resources are bounded: at
most ``MAX_CONNECTIONS`` connections are served at once (a thread each), the
oldest that has sent no request under the secret giving way to a new one, so
neither a flood of idle connections nor one of trickled requests grows the
harness or shuts its agent out; and a request must arrive whole within
``REQUEST_READ_FACTOR`` socket timeouts of its first byte.
"""

from __future__ import annotations

import contextlib
import errno
import io
import re
import secrets
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

from killpoint.harness.agents._netns import listen_in_network_of, own_network

ACCEPT_RETRY_S = 0.01  # after an accept that failed for want of a resource (descriptors): a pause, not a spin
MAX_EXCHANGES = 10_000
IDLE_TIMEOUT_S = 30.0  # each socket read and write of a handler that sets no ``timeout`` of its own
MAX_CONNECTIONS = 64  # an agent's parallel requests are a handful; its SDK's pool opens connections on demand
REQUEST_READ_FACTOR = 2  # a request's head and body: within this many socket timeouts of its first byte
BURIAL_DEADLINE_S = 60.0  # how long a connection of a struck agent is kept open waiting for its death to be confirmed
_DIGITS = re.compile(r"[0-9]{1,12}")


def content_length(header: str | None) -> int | None:
    """The whole number a Content-Length header gives; None when absent or anything else (``"²".isdigit()``
    holds, yet ``int("²")`` raises: headers are read as Latin-1, so only ASCII digits are taken)."""
    return int(header) if header is not None and _DIGITS.fullmatch(header.strip()) else None


class _BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most ``MAX_CONNECTIONS`` of them (see the module's docstring)."""

    daemon_threads = True
    request_queue_size = 128  # a burst of connects waits in the backlog, not a second for a SYN retry

    def __init__(self, handler: type[QuietHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.buried = threading.Event()  # clear from the strike until the agent's death is confirmed
        self.buried.set()
        self._lock = threading.Lock()
        self._served: dict[socket.socket, bool] = {}  # in the order accepted: whether it sent under the secret

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            if len(self._served) >= MAX_CONNECTIONS:
                stranger = next((connection for connection, known in self._served.items() if not known), None)
                if stranger is None:  # every one is the agent's own: the new one waits for none of them
                    self.shutdown_request(request)
                    return
                del self._served[stranger]
                with contextlib.suppress(OSError):  # its thread's read ends at once, and the thread with it
                    stranger.shutdown(socket.SHUT_RDWR)
            self._served[request] = False
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._served.pop(request, None)

    def vouch(self, connection: socket.socket) -> None:
        """``connection`` sent a request under the secret: it is the agent's, never made to give way."""
        with self._lock:
            if connection in self._served:
                self._served[connection] = True


class _ReadByDeadline(io.RawIOBase):
    """A connection's reading end whose every read, once a request's first byte came, ends by a deadline.

    A socket timeout bounds each read alone: a request trickled a byte per
    timeout would hold its thread for ever. ``next_request`` starts the wait
    for the next request (as long as an idle connection may wait); its first
    byte starts the deadline; every read after it waits only what is left.
    """

    def __init__(self, connection: socket.socket, timeout: float) -> None:
        self.connection, self.timeout = connection, timeout
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def next_request(self) -> None:
        self.deadline = None

    def readinto(self, buffer: Any) -> int:
        left = self.timeout if self.deadline is None else self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive whole by its deadline")
        self.connection.settimeout(min(left, self.timeout))
        try:
            received = self.connection.recv_into(buffer)
        finally:
            self.connection.settimeout(self.timeout)  # what the replies are written with
        if received and self.deadline is None:
            self.deadline = time.monotonic() + REQUEST_READ_FACTOR * self.timeout
        return received


class LoopbackServer:
    """Serves ``handler`` on an ephemeral port of 127.0.0.1 in a daemon thread; ``url`` is its root.

    Handler threads are daemons too: one held at a seam when the harness closes
    the server ends with the harness, never keeps it alive.
    """

    def __init__(self, handler: type[QuietHandler], name: str) -> None:
        self.exchanges: list[dict[str, Any]] = []
        self._exchanges_lock = threading.Lock()
        self._handler = handler
        self.new_secret()
        self._server = _BoundedServer(handler)
        # The listener in the agent's own network, if it has one, and the thread accepting on it.
        self._inner: tuple[socket.socket, threading.Thread] | None = None
        # Accepting, rather than ``serve_forever``, whose shutdown waits out a poll interval (50 ms a run).
        self._thread = threading.Thread(target=self._accept_from, args=(self._server.socket,), name=name, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/{self.secret}"

    def new_secret(self) -> None:
        """Answer only under a newly drawn secret from now on (``url`` changes with it)."""
        self._handler.secret = self.secret = secrets.token_urlsafe(16)

    def record(self, exchange: dict[str, Any]) -> None:
        """Keep ``exchange`` (filled in as its request goes on) as evidence; past ``MAX_EXCHANGES`` the oldest go:
        the ones around the kill are the evidence, and an agent looping on a request cannot grow the harness."""
        with self._exchanges_lock:
            self.exchanges.append(exchange)
            del self.exchanges[:-MAX_EXCHANGES]

    def start(self) -> Self:
        self._thread.start()
        return self

    def hold_drops(self) -> None:
        """The agent is about to be killed: a connection its handler ends (``QuietHandler.drop_when_dead``) stays
        open until ``release_drops``, so the agent, alive until the SIGKILL lands, never sees one dropped."""
        self._server.buried.clear()

    def release_drops(self) -> None:
        """The agent is dead: the connections held open for it close."""
        self._server.buried.set()

    def reach_from(self, pid: int) -> None:
        """Serve ``pid``'s own network too when it has one (a container's): the same port on its 127.0.0.1, so
        the URL handed to the agent works from inside (``_netns``); the previous incarnation's is closed first."""
        self._close_inner()
        if own_network(pid):
            listener = listen_in_network_of(pid, self._server.server_port)
            accepting = threading.Thread(target=self._accept_from, args=(listener,), name="inner", daemon=True)
            self._inner = listener, accepting
            accepting.start()

    def _accept_from(self, listener: socket.socket) -> None:
        """Hand each connection made on ``listener`` (the server's own, or one inside the agent's namespace) to the
        server, until ``_stop_accepting`` shuts it."""
        while True:
            try:
                connection, address = listener.accept()
            except OSError as error:
                if error.errno in (errno.EINVAL, errno.EBADF):  # shut: the next incarnation has its own, or the run is over
                    return
                time.sleep(ACCEPT_RETRY_S)  # a connection reset before it was taken, or no descriptor left for it
                continue
            self._server.process_request(connection, address)

    def _close_inner(self) -> None:
        """Close the listener in the other namespace: until its accepting thread's wait returns, the kernel keeps
        the socket listening, and the next incarnation's could not take the port."""
        if self._inner is not None:
            _stop_accepting(*self._inner)
            self._inner = None

    def close(self) -> None:
        self.release_drops()
        self._close_inner()
        _stop_accepting(self._server.socket, self._thread)
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


def _stop_accepting(listener: socket.socket, accepting: threading.Thread) -> None:
    """Shut ``listener`` (which ends a wait in ``accept`` at once, on Linux), wait for ``accepting`` to return."""
    with contextlib.suppress(OSError):
        listener.shutdown(socket.SHUT_RDWR)
    if accepting.is_alive():
        accepting.join()
    listener.close()


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 (keep-alive, as the SDKs expect), silent on stderr (the exchanges are the record), and quiet when
    the agent goes away mid-connection (killed, or its client reset): there is no one left to answer."""

    protocol_version = "HTTP/1.1"
    secret = ""  # the path prefix of every request this server answers (``LoopbackServer`` draws it)
    nodelay = True  # replies go out at once (``setup``)
    server: _BoundedServer

    def setup(self) -> None:
        """Reads go through ``_ReadByDeadline``; ``timeout`` (a subclass's) bounds each socket read and write.

        Replies go out at once (``TCP_NODELAY``): a reply's head and body are two writes, and Nagle's algorithm
        held the body until the client acknowledged the head, which a client delays (40 ms on Linux): most
        of a tool call's time, and of a sweep's."""
        super().setup()
        if self.nodelay:
            with contextlib.suppress(OSError):  # a socket of another family (a test's) has no such option
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._reading = _ReadByDeadline(self.connection, self.timeout or IDLE_TIMEOUT_S)
        self.rfile = io.BufferedReader(self._reading)

    def handle_one_request(self) -> None:
        self._reading.next_request()
        super().handle_one_request()

    def drop_when_dead(self) -> None:
        """End the connection, with nothing more written, once the agent is dead (``LoopbackServer.hold_drops``).

        Between the strike and the SIGKILL landing (a container's kill goes
        through the engine: tens of milliseconds) the agent still runs. A
        connection dropped then is seen: its SDK retries, or its tool function
        reports an error the agent saves as the call's result, which no crash
        does. So a handler the strike ended keeps its connection until then.
        """
        self.server.buried.wait(BURIAL_DEADLINE_S)
        self.close_connection = True

    def parse_request(self) -> bool:
        """The request, its path without the secret prefix; a 404 for a path without it (nothing else runs).

        A request with a body but no Content-Length (``Transfer-Encoding: chunked``) is refused (411) and its
        connection closed, before the body could be read as the next request."""
        if not super().parse_request():
            return False
        prefix = f"/{self.secret}"
        if not (self.path == prefix or self.path.startswith(prefix + "/")):
            self.close_connection = True
            self.send_error(404, "no such path")
            return False
        self.server.vouch(self.connection)
        self.path = self.path[len(prefix):] or "/"
        if "Transfer-Encoding" in self.headers:
            self.close_connection = True
            self.send_error(411, "a request body needs a Content-Length (no Transfer-Encoding)")
            return False
        return True

    def log_message(self, format: str, *args: object) -> None:
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except OSError:
            self.close_connection = True


def excerpt(text: str, limit: int) -> str:
    """``text`` as evidence quotes it: whole when short, else its start and its length."""
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"
