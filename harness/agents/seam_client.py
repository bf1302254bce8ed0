"""The services' end of the crash-point rendezvous: each seam announced for the agent, as protocol v1 frames it.

An unmodified agent cannot announce its crash points, so the services it talks
to announce them on its behalf, on the run's control socket, exactly as a
workload does (``{"point", "call", "op", "incarnation"}``, one line, then wait
for the reply). The harness's rendezvous server cannot tell them apart, so
every schedule mode, the golden run's point list and the repro tokens work
unchanged. What differs is the end of a held request: the harness kills the
agent, not the service, so a service thread would wait on a reply that never
comes. ``struck`` ends every such wait; the request then raises
``AgentKilled`` and acts on nothing. A ``kill`` reply (a ``--no-pause`` kill,
which a workload carries out on itself) drops the request at once for the same
reason: the harness's own kill of the agent follows.

Only the points ``begin``'s ``ArmedPoints`` names are waited at (as
``$KILLPOINT_ARMED`` tells a workload); the others are announced without a
wait, as a workload announces them. The tool service's ``after_effect`` for a
protocol runtime is armed so, for its hold holds the runtime's request; an
agent's seams are waited at everywhere (``AgentServices.begin`` says why).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

from killpoint import protocol
from killpoint.client import ArmedPoints
from killpoint.harness.agents.seams import AgentKilled

SEND_DEADLINE_S = 10.0  # the harness's socket takes a line at once; a full backlog is a harness gone
REPLY_DEADLINE_S = 600.0  # a reply the harness never sends, nor ends with ``struck``: the run's timeout is far less


class SeamClient:
    """Announces seams for incarnation ``incarnation`` on ``control`` (one connection per announcement)."""

    def __init__(self, control: str) -> None:
        self.control = control
        self.incarnation = 0
        self.armed = ArmedPoints()
        self._lock = threading.Lock()
        self._waiting: set[socket.socket] = set()
        self._struck = False

    def begin(self, incarnation: int, armed: ArmedPoints = ArmedPoints()) -> None:
        """Announce for ``incarnation`` from now on, waiting at the points ``armed`` names (by default, at all)."""
        with self._lock:
            self.incarnation = incarnation
            self.armed = armed
            self._struck = False

    def struck(self) -> None:
        """The incarnation was killed: every announcement still waiting ends with ``AgentKilled``, as do later ones."""
        with self._lock:
            self._struck = True
            for waiting in self._waiting:
                try:
                    waiting.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def is_struck(self) -> bool:
        """The running incarnation was killed (or ended): nothing it sends from now on is taken."""
        with self._lock:
            return self._struck

    def __call__(self, point: str, calls: tuple[str, ...], exchange: dict[str, Any]) -> None:
        """The ``SeamHook``: announce ``point`` for each call in turn (none: the final answer's, with no call), for
        the incarnation the exchange came from (``exchange["incarnation"]``)."""
        for call in calls or (None,):
            self.announce(point, call, incarnation=exchange.get("incarnation"))

    def announce(self, point: str, call: str | None, op: str | None = None, *, incarnation: int | None = None) -> None:
        """Announce ``point`` of ``call`` (``op``: the operation a workload journaled it as), and wait for the
        harness there if it is armed; AgentKilled if the incarnation was killed before or meanwhile, or if
        ``incarnation`` (the one the request came from) is not the one running."""
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # Sent under the lock, so ``struck`` comes wholly before (nothing is sent) or after (the wait is ended):
            # a point sent after the kill would be read as the next incarnation's. A request an earlier
            # incarnation sent, held up past the next one's ``begin``, is that incarnation's, never the next's.
            with self._lock:
                if self._struck or incarnation not in (None, self.incarnation):
                    raise AgentKilled(f"incarnation {incarnation if incarnation is not None else self.incarnation} "
                                      f"was killed")
                waits = self.armed.waits(point, call)
                message = {"point": point, "call": call, "op": op, "incarnation": self.incarnation,
                           **({} if waits else {protocol.NO_WAIT_FIELD: False, protocol.SENT_FIELD: time.monotonic()})}
                connection.settimeout(SEND_DEADLINE_S)
                connection.connect(self.control)
                connection.sendall(json.dumps(message).encode() + b"\n")
                if not waits:
                    return
                self._waiting.add(connection)
            connection.settimeout(REPLY_DEADLINE_S)
            reply = connection.makefile("rb").readline()
        except OSError as error:
            raise AgentKilled(f"the harness ended the wait at {point} {call}: {error}") from None
        finally:
            with self._lock:
                self._waiting.discard(connection)
            connection.close()
        if reply != protocol.REPLY_OK:  # ``kill`` (the harness's kill follows), or the socket shut by ``struck``
            raise AgentKilled(f"the harness replied {reply[:40]!r} at {point} {call}")
