"""The harness's end of the crash-point rendezvous, and the wait for the kill moment.

Each message is one JSON line ``{"point", "call", "op", "incarnation"}``; the
workload blocks until it reads a reply line. To crash the workload at a point
the server does not reply (a pausing kill) or replies ``kill`` (a non-pausing
one, ``/now``: the workload kills its own group at once), and in both cases
hands the moment to the nemesis, which strikes and confirms the tree dead. One
selector watches the listening socket, every connection, a pidfd of the
incarnation (so an exit is seen at once, not polled) and, for event kills, the
evidence watcher; a timed kill is the selector's deadline, counted from the
moment the incarnation first reached the crash point it names, or from the
moment its work began (``work_began``).

A message with ``"wait": false`` comes from a workload told (``$KILLPOINT_ARMED``)
that it cannot be killed there: it is recorded and never answered, and when the
incarnation exits, or once it is killed, what it sent last is read before its
points are counted. Such a message says when it was sent (``"sent"``, the
sender's monotonic clock, which every process on the host shares), because
messages from two processes (a runtime and its tool's process) arrive on two
connections and are read in no fixed order: the points are kept in the order
they were reached, which a point waited at gives by its arrival.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import selectors
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from killpoint.harness.execute.watch import EventWatcher
from killpoint.harness.model import RENDEZVOUS_KILLS, AfterDelay, AfterPoint, AtPoint, Kill
from killpoint.harness.schedules.schedule import point_reached
from killpoint.protocol import NO_WAIT_FIELD, REPLY_KILL, REPLY_OK, SEAM_POINTS, SENT_FIELD

# Called at a crash point the workload waits at, before it is answered: (point, call, what was served so far).
PointHook = Callable[[str, "str | None", "Served"], object]

MIN_MOVE_S = 0.01  # a deadline moves by no less: a storage count that barely grows ends the wait, never spins it

# A crash point is a short JSON line; anything longer is not one, and is not kept in memory.
MAX_MESSAGE_BYTES = 64 * 1024


@dataclass
class Served:
    """How one incarnation's wait ended."""

    launching: float = 0.0  # monotonic time before the launch: no point was reached before it
    points: list[str] = field(default_factory=list)
    point_times: list[float] = field(default_factory=list)  # monotonic time each point was reached (_reached_at)
    hit: Kill | None = None
    hit_at: float | None = None  # when the kill's point was reached
    timed_out: bool = False
    armed: bool = False  # for an AfterPoint kill: its point was passed, the next one kills
    protocol_problems: list[str] = field(default_factory=list)
    held_s: float = 0.0  # spent in ``serve``'s ``on_point``, while the workload waited: its deadline moves by it
    # The incarnation served, when the runner names it: a seam the harness's services announced for another (late,
    # for one that already ended) is no point of this one.
    incarnation: int | None = None
    storage_s: float | None = None  # waited for the lazy file system (``serve``'s ``storage``): so does it

    def record(self, point: str, reached_at: float) -> None:
        self.points.append(point)
        self.point_times.append(reached_at)

    def put_in_order(self) -> None:
        """Order the points by when they were reached (a stable sort: one sender's ties keep their order)."""
        order = sorted(range(len(self.points)), key=self.point_times.__getitem__)
        self.points = [self.points[i] for i in order]
        self.point_times = [self.point_times[i] for i in order]


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
        self._buffers: dict[socket.socket, bytes] = {}  # the last incarnation's connections and their unread ends

    def serve(self, pid: int, kill: Kill | None, *, started: float, deadline: float,
              watcher: EventWatcher | None = None, on_point: PointHook | None = None,
              storage: Callable[[], float] | None = None, incarnation: int | None = None) -> Served:
        """Answer crash points until the kill's moment, the process's exit, or the deadline.

        ``started`` is a time before the launch began: no point was reached before it.
        A timed kill (``AfterDelay``) lands ``kill.seconds`` seconds after the
        incarnation first reached ``kill.after``, or (none named) after its work
        began (``work_began``: its first crash point, or its first journal or
        ledger write, which only ``watcher`` sees).
        ``on_point`` is called at each point waited at (and not killed at), with
        the point recorded, before the workload is answered. ``storage`` says how
        long the workload has waited for a lazy file system; asked when the
        deadline comes, it moves the deadline by that time.
        """
        served = Served(launching=started, storage_s=None if storage is None else 0.0, incarnation=incarnation)
        # A /now kill's point may be the last thing the workload sent: it SIGKILLs itself there.
        self_kill = kill if isinstance(kill, AtPoint) and kill.now else None
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            # Already exited and reaped by its parent (the fork server reaps its children): only an
            # incarnation that waited nowhere, or killed itself at its /now point, can have; what it sent
            # is read now.
            self._buffers = {}
            self._drain(self._buffers, served, self_kill)
            return served
        try:
            return self._serve(pidfd, kill, served, deadline, watcher, on_point, storage)
        finally:
            os.close(pidfd)

    def _serve(self, pidfd: int, kill: Kill | None, served: Served, deadline: float,
               watcher: EventWatcher | None, on_point: PointHook | None,
               storage: Callable[[], float] | None) -> Served:
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ, "accept")
        selector.register(pidfd, selectors.EVENT_READ, "exit")
        if watcher is not None:
            selector.register(watcher, selectors.EVENT_READ, "watch")
        buffers = self._buffers = {}
        try:
            while True:
                now = time.monotonic()
                kill_at = _timed_kill_at(kill, served, watcher)
                # The time ``on_point`` held the workload, or a lazy file system kept it waiting, is not its own.
                ends = deadline + served.held_s + (served.storage_s or 0.0)
                # Its exit, if already come, is read below: a kill after it would interrupt nothing.
                if kill_at is not None and now >= kill_at and not _has_exited(pidfd):
                    served.hit = kill
                    return served
                moved = (served.storage_s or 0.0) + MIN_MOVE_S
                if now >= ends and storage is not None and (waited := storage()) >= moved:
                    served.storage_s = waited
                    continue
                if now >= ends:
                    served.timed_out = True
                    return served
                events = selector.select(min(ends, kill_at if kill_at is not None else ends) - now)
                # A timed kill whose moment came while the harness was away (a loaded machine) is struck before a
                # point that arrived meanwhile is answered: the workload waits there, and answered, it would run
                # on past the moment, to its exit maybe.
                if kill_at is not None and events and time.monotonic() >= kill_at and not _has_exited(pidfd):
                    served.hit = kill
                    return served
                for key, _ in events:
                    if key.data == "exit":
                        self._drain(buffers, served, kill if isinstance(kill, AtPoint) and kill.now else None)
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
                        if self._receive(key.fileobj, buffers, selector, kill, served, on_point):
                            return served
        finally:
            selector.close()

    def read_after_kill(self, served: Served) -> None:
        """Count the unanswered points the killed incarnation reached before its kill's point but were not read.

        Another of its processes (a tool's) may have sent one just before the
        point the kill landed at, on a connection read after it. Its tree is
        dead, so all it sent is queued; a point reached after the kill's is not
        counted, as a wait there would never have been answered.
        """
        if served.hit_at is None:
            return
        late = Served(launching=served.launching, incarnation=served.incarnation)
        self._drain(self._buffers, late)
        for point, reached_at in zip(late.points, late.point_times):
            if reached_at <= served.hit_at:
                served.record(point, reached_at)
        served.protocol_problems += late.protocol_problems
        served.put_in_order()

    def _receive(self, connection: socket.socket, buffers: dict[socket.socket, bytes],
                 selector: selectors.BaseSelector, kill: Kill | None, served: Served,
                 on_point: PointHook | None) -> bool:
        """Handle each whole message ``connection`` has sent; True means: kill now."""
        complete = self._read(connection, buffers, served)
        if complete is None:
            selector.unregister(connection)
            return False
        return any(self._handle(raw, connection, kill, served, on_point) for raw in complete)

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

    def _drain(self, buffers: dict[socket.socket, bytes], served: Served, self_kill: AtPoint | None = None) -> None:
        """Count the crash points an exited incarnation sent unanswered (``"wait": false``) that are not read yet.

        Its process is gone, so all it sent is queued: the connections not yet
        accepted are accepted, then each is read to its end (or to what a child
        of it that lives on has sent so far). They kill nothing; but ``self_kill``,
        a ``/now`` kill's point the workload SIGKILLed itself at (``$KILLPOINT_ARMED``'s
        ``"now"``), lands where it was reached.
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
                        if self._handle(raw, connection, self_kill, served):
                            self_kill = None  # its point landed; a later message is only a point reached
        served.put_in_order()

    def _handle(self, raw: bytes, connection: socket.socket, kill: Kill | None, served: Served,
                on_point: PointHook | None = None) -> bool:
        """Record one message; reply unless it is the kill's moment or asked for none. True means: kill now.

        ``on_point`` is called before the reply to a point waited at; never for one read after the
        incarnation's end (``_drain``), whose sender no longer waits.
        """
        arrived = time.monotonic()
        try:
            message = json.loads(raw)
            point, call = message["point"], message.get("call")
            waits = message.get(NO_WAIT_FIELD) is not False
            sent = None if waits else message.get(SENT_FIELD)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            point, call, waits, sent = None, None, True, None
        if not isinstance(point, str) or not (call is None or isinstance(call, str)) or len(raw) > MAX_MESSAGE_BYTES:
            served.protocol_problems.append(f"control message is not a crash point: {raw[:120]!r}")
            _reply(connection)
            return False
        if point in SEAM_POINTS and (sender := _sender(connection)) != os.getpid():
            served.protocol_problems.append(
                f"{point_reached(point, call)} was announced by process {sender}, not by the harness's agent "
                f"services, which alone announce seams: not a crash point, nothing killed")
            _reply(connection)
            return False
        if point in SEAM_POINTS and served.incarnation is not None and message.get("incarnation") != served.incarnation:
            _reply(connection)  # sent for an incarnation that ended before it was read: it reached nothing here
            return False
        reached_at = _reached_at(sent, served.launching, arrived)
        served.record(point_reached(point, call), reached_at)
        if served.armed or (isinstance(kill, AtPoint) and kill.matches(point, call)):
            served.hit, served.hit_at = kill, reached_at
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
            if on_point is not None:
                holding = time.monotonic()
                on_point(point, call, served)
                served.held_s += time.monotonic() - holding
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


def _sender(connection: socket.socket) -> int:
    """The pid of the process at the other end of ``connection`` (the kernel's word, SO_PEERCRED)."""
    pid, _, _ = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                          struct.calcsize("3i")))
    return int(pid)


def work_began(served: Served, watcher: EventWatcher | None) -> float | None:
    """When an incarnation's work began: its first crash point or first journal or ledger write (``watcher``
    sees writes), whichever came first; None while it has shown neither.

    Before it, the incarnation is only starting up, which takes a different time
    in each (a fork server's first child, a container) and longer under load: a
    time counted from the launch says little about where in its work an
    incarnation is, one counted from here does.
    """
    signs = [*served.point_times[:1], *([watcher.first_write_at] if watcher is not None else [])]
    return min((sign for sign in signs if sign is not None), default=None)


def _timed_kill_at(kill: Kill | None, served: Served, watcher: EventWatcher | None) -> float | None:
    """When a timed kill lands: ``kill.seconds`` after the incarnation first reached ``kill.after``, or (none
    named) after its work began (``work_began``); None for another kill, and while that moment is not known
    (an incarnation that never reaches the point, or never shows any work, is not killed by time)."""
    if not isinstance(kill, AfterDelay):
        return None
    if kill.after is None:
        began = work_began(served, watcher)
    else:
        try:
            began = served.point_times[served.points.index(kill.after)]
        except ValueError:
            began = None
    return None if began is None else began + kill.seconds


def _has_exited(pidfd: int) -> bool:
    """Whether the process of ``pidfd`` has exited (reaped or not): its pidfd then reads ready."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))


def _reached_at(sent: object, launching: float, arrived: float) -> float:
    """When a point was reached: its ``sent`` time for one not waited at, if it could be true; else its arrival.

    A point waited at blocks its sender until the reply, so its arrival orders it
    against every point sent after. A ``sent`` time before the launch or after
    the arrival is not this host's monotonic clock (another clock namespace, or
    a forged line): the arrival is all that is known.
    """
    if isinstance(sent, (int, float)) and not isinstance(sent, bool) and launching <= sent <= arrived:
        return float(sent)
    return arrived


def _reply(connection: socket.socket, reply: bytes = REPLY_OK) -> None:
    try:
        connection.sendall(reply)
    except OSError:
        pass  # the peer is gone; its process exit arrives through the pidfd
