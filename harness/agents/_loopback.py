"""A threaded HTTP server on 127.0.0.1 that the harness runs for one run's agent: started, served, closed.

Any process on the host can reach a loopback port, another session's agent
included (runs go side by side under ``-j``), and what reaches the tool service
writes the run's ledger. So every server answers only under a path prefix no
one else is told: a random secret in its ``url``, which the harness hands its
own agent alone (the SDKs take a base URL with a path); any other path is a
404 that reaches nothing.
"""

from __future__ import annotations

import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

POLL_S = 0.05  # how soon close() is noticed by the serving loop
MAX_EXCHANGES = 10_000


class LoopbackServer:
    """Serves ``handler`` on an ephemeral port of 127.0.0.1 in a daemon thread; ``url`` is its root.

    Handler threads are daemons too: one held at a seam when the harness closes
    the server ends with the harness, never keeps it alive.
    """

    def __init__(self, handler: type[QuietHandler], name: str) -> None:
        self.exchanges: list[dict[str, Any]] = []
        self._exchanges_lock = threading.Lock()
        handler.secret = secrets.token_urlsafe(16)
        self.secret = handler.secret
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(POLL_S,), name=name, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/{self.secret}"

    def record(self, exchange: dict[str, Any]) -> None:
        """Keep ``exchange`` (filled in as its request goes on) as evidence; past ``MAX_EXCHANGES`` the oldest go:
        the ones around the kill are the evidence, and an agent looping on a request cannot grow the harness."""
        with self._exchanges_lock:
            self.exchanges.append(exchange)
            del self.exchanges[:-MAX_EXCHANGES]

    def start(self) -> Self:
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 (keep-alive, as the SDKs expect), silent on stderr (the exchanges are the record), and quiet when
    the agent goes away mid-connection (killed, or its client reset): there is no one left to answer."""

    protocol_version = "HTTP/1.1"
    secret = ""  # the path prefix of every request this server answers (``LoopbackServer`` draws it)

    def parse_request(self) -> bool:
        """The request, its path without the secret prefix; a 404 for a path without it (nothing else runs)."""
        if not super().parse_request():
            return False
        prefix = f"/{self.secret}"
        if not (self.path == prefix or self.path.startswith(prefix + "/")):
            self.close_connection = True
            self.send_error(404, "no such path")
            return False
        self.path = self.path[len(prefix):] or "/"
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
