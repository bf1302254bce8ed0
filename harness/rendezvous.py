"""The harness's end of the crash-point rendezvous, and the wait for the kill moment.

Each message is one JSON line ``{"point", "call", "op", "incarnation"}``; the
workload blocks until it reads a reply line. To crash the workload at a point
the server does not reply (a pausing kill) or replies ``kill`` (a non-pausing
one, ``/now``: the workload kills its own group at once), and in both cases
hands the moment to the nemesis, which strikes and confirms the tree dead. One
selector watches the listening socket, every connection, a pidfd of the
incarnation (so an exit is seen at once, not polled) and, for event kills, the
evidence watcher; a timed kill is the selector's deadline.

A message with ``"wait": false`` comes from a workload told (``$KILLPOINT_ARMED``)
that it cannot be killed there: it is recorded and never answered, and when the
incarnation exits, what it sent last is read before its points are counted.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from killpoint.protocol import NO_WAIT_FIELD, REPLY_KILL, REPLY_OK
from killpoint.harness.model import RENDEZVOUS_KILLS, AfterDelay, AfterPoint, AtPoint, Kill
from killpoint.harness.watch import EventWatcher


# A crash point is a short JSON line; anything longer is not one, and is not kept in memory.
MAX_MESSAGE_BYTES = 64 * 1024


@dataclass
class Served:
    """How one incarnation's wait ended."""

    points: list[str] = field(default_factory=list)
    point_times: list[float] = field(default_factory=list)  # monotonic arrival time of each point
    hit: Kill | None = None
    timed_out: bool = False
    armed: bool = False  # for an AfterPoint kill: its point was passed, the next one kills
    protocol_problems: list[str] = field(default_factory=list)


class RendezvousServer:
    """Listens on ``path`` for the life of one run (every incarnation connects anew)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        os.chmod(path, 0o777)  # a container's non-root user must be able to connect
        self.listener.listen(16)
        self.listener.setblocking(False)
        self._connections: list[socket.socket] = []

    def serve(self, pid: int, kill: Kill | None, *, started: float, deadline: float,
              watcher: EventWatcher | None = None) -> Served:
        """Answer crash points until the kill's moment, the process's exit, or the deadline.

        A timed kill (``AfterDelay``) lands ``kill.seconds`` seconds after ``started``.
        """
        served = Served()
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            # Already exited and reaped by its parent (the fork server reaps its children): only an
            # incarnation that waited nowhere can have, and what it sent is read now.
            self._drain({}, served)
            return served
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ, "accept")
        selector.register(pidfd, selectors.EVENT_READ, "exit")
        if watcher is not None:
            selector.register(watcher, selectors.EVENT_READ, "watch")
        kill_at = started + kill.seconds if isinstance(kill, AfterDelay) else None
        buffers: dict[socket.socket, bytes] = {}
        try:
            while True:
                now = time.monotonic()
                if kill_at is not None and now >= kill_at:
                    served.hit = kill
                    return served
                if now >= deadline:
                    served.timed_out = True
                    return served
                for key, _ in selector.select(min(deadline, kill_at or deadline) - now):
                    if key.data == "exit":
                        self._drain(buffers, served)
                        return served
                    if key.data == "watch":
                        assert watcher is not None  # registered only when there is one
                        if watcher.check():
                            served.hit = kill
                            return served
                    elif key.data == "accept":
                        connection, _ = self.listener.accept()
                        self._connections.append(connection)
                        buffers[connection] = b""
                        selector.register(connection, selectors.EVENT_READ, "message")
                    else:
                        assert isinstance(key.fileobj, socket.socket)  # a connection, registered as "message"
                        if self._receive(key.fileobj, buffers, selector, kill, served):
                            return served
        finally:
            selector.close()
            os.close(pidfd)

    def _receive(self, connection: socket.socket, buffers: dict[socket.socket, bytes],
                 selector: selectors.BaseSelector, kill: Kill | None, served: Served) -> bool:
        """Handle each whole message ``connection`` has sent; True means: kill now."""
        complete = self._read(connection, buffers, served)
        if complete is None:
            selector.unregister(connection)
            return False
        return any(self._handle(raw, connection, kill, served) for raw in complete)

    def _read(self, connection: socket.socket, buffers: dict[socket.socket, bytes], served: Served) -> list[bytes] | None:
        """The whole messages one read of ``connection`` completes; None at its end."""
        chunk = connection.recv(65536)
        if not chunk:
            return None
        *complete, buffers[connection] = (buffers[connection] + chunk).split(b"\n")
        if len(buffers[connection]) > MAX_MESSAGE_BYTES:  # no crash point is that long: stop buffering it
            served.protocol_problems.append(f"control message of over {MAX_MESSAGE_BYTES} bytes with no end; dropped")
            buffers[connection] = b""
        return complete

    def _drain(self, buffers: dict[socket.socket, bytes], served: Served) -> None:
        """Count the crash points an exited incarnation sent unanswered (``"wait": false``) that are not read yet.

        Its process is gone, so all it sent is queued: the connections not yet
        accepted are accepted, then each is read to its end (or to what a child
        of it that lives on has sent so far). They kill nothing.
        """
        with contextlib.suppress(BlockingIOError):
            while True:
                connection, _ = self.listener.accept()
                self._connections.append(connection)
                buffers[connection] = b""
        for connection in buffers:
            connection.setblocking(False)
            with contextlib.suppress(BlockingIOError, ConnectionError):
                while (complete := self._read(connection, buffers, served)) is not None:
                    for raw in complete:
                        self._handle(raw, connection, None, served)

    def _handle(self, raw: bytes, connection: socket.socket, kill: Kill | None, served: Served) -> bool:
        """Record one message; reply unless it is the kill's moment or asked for none. True means: kill now."""
        try:
            message = json.loads(raw)
            point, call = message["point"], message.get("call")
            waits = message.get(NO_WAIT_FIELD) is not False
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            point, call, waits = None, None, True
        if not isinstance(point, str) or not (call is None or isinstance(call, str)) or len(raw) > MAX_MESSAGE_BYTES:
            served.protocol_problems.append(f"control message is not a crash point: {raw[:120]!r}")
            _reply(connection)
            return False
        served.points.append(point if call is None else f"{call}:{point}")
        served.point_times.append(time.monotonic())
        if served.armed or (isinstance(kill, AtPoint) and kill.matches(point, call)):
            served.hit = kill
            if not waits:
                served.protocol_problems.append(
                    f"the workload went on past {served.points[-1]} without waiting for a reply, though "
                    f"$KILLPOINT_ARMED named it: the kill landed after it, not at it")
            elif isinstance(kill, RENDEZVOUS_KILLS) and kill.now:
                _reply(connection, REPLY_KILL)
            return True
        if isinstance(kill, AfterPoint) and kill.matches(point, call):
            served.armed = True
        if waits:
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


def _reply(connection: socket.socket, reply: bytes = REPLY_OK) -> None:
    try:
        connection.sendall(reply)
    except OSError:
        pass  # the peer is gone; its process exit arrives through the pidfd
