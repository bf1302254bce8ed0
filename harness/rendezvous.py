"""The harness's end of the crash-point rendezvous: a Unix stream socket server.

Each message is one JSON line ``{"point", "call", "op", "incarnation"}``; the
workload blocks until it reads a reply line. To crash the workload at a point,
the server simply does not reply and hands the moment to the nemesis. One
selector watches the listening socket, every connection, and a pidfd of the
incarnation, so a process exit is seen at once rather than by polling.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.schedule import KillPoint

_REPLY = b"ok\n"


@dataclass
class Served:
    """How one incarnation's rendezvous ended."""

    points: list[str] = field(default_factory=list)
    hit: KillPoint | None = None
    exited: bool = False
    timed_out: bool = False
    protocol_problems: list[str] = field(default_factory=list)


class RendezvousServer:
    """Listens on ``path`` for the life of one run (every incarnation connects anew)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(16)
        self.listener.setblocking(False)
        self._connections: list[socket.socket] = []

    def serve(self, process: subprocess.Popen[bytes], kill_point: KillPoint | None, deadline: float) -> Served:
        """Answer crash points until ``kill_point`` is reached, the process exits, or the deadline passes."""
        served = Served()
        pidfd = os.pidfd_open(process.pid)
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ, None)
        selector.register(pidfd, selectors.EVENT_READ, "exit")
        buffers: dict[socket.socket, bytes] = {}
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    served.timed_out = True
                    return served
                for key, _ in selector.select(remaining):
                    if key.data == "exit":
                        served.exited = True
                        return served
                    if key.data is None:
                        connection, _ = self.listener.accept()
                        self._connections.append(connection)
                        buffers[connection] = b""
                        selector.register(connection, selectors.EVENT_READ, "message")
                        continue
                    connection = key.fileobj
                    chunk = connection.recv(65536)
                    if not chunk:
                        selector.unregister(connection)
                        continue
                    buffers[connection] += chunk
                    *complete, buffers[connection] = buffers[connection].split(b"\n")
                    for raw in complete:
                        if self._handle(raw, connection, kill_point, served):
                            return served
        finally:
            selector.close()
            os.close(pidfd)

    def _handle(self, raw: bytes, connection: socket.socket, kill_point: KillPoint | None, served: Served) -> bool:
        """Record one message; reply unless it is the kill point. True means: kill now."""
        try:
            message = json.loads(raw)
            point, call = message["point"], message.get("call")
        except (ValueError, KeyError, TypeError):
            served.protocol_problems.append(f"control message is not a crash point: {raw[:120]!r}")
            _reply(connection)
            return False
        served.points.append(point if call is None else f"{call}:{point}")
        if kill_point is not None and kill_point.matches(point, call):
            served.hit = kill_point
            return True
        _reply(connection)
        return False

    def drop_connections(self) -> None:
        """Close every connection of the incarnation that just ended."""
        for connection in self._connections:
            connection.close()
        self._connections.clear()

    def close(self) -> None:
        self.drop_connections()
        self.listener.close()
        self.path.unlink(missing_ok=True)


def _reply(connection: socket.socket) -> None:
    try:
        connection.sendall(_REPLY)
    except OSError:
        pass  # the peer is gone; its process exit arrives through the pidfd
