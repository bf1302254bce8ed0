"""The crash points at an agent's network seams, and how a held request learns that its agent was killed.

An unmodified agent announces nothing: the harness stands where the agent talks
to the world, its model endpoint and its tool services, and the crash points
are the moments a request crosses them. In order, for one tool call:

``model_request``   the model request that will choose the call is received (held before it is answered)
``model_reply``     the model's reply choosing it has been sent
``tool_request``    the tool request is received, before its effect
``tool_opened``     a real server behind the recording proxy first opens a file in the world for it, held there
                    (``first_open``; only there, and only where fanotify is allowed)
``tool_effect``     its effect is committed (in the world and the ledger), before the reply
``tool_reply``      the tool's reply has been sent

(the next ``model_request``, carrying the call's result, is the next call's
first point, or the final answer's). A service calls a ``SeamHook`` at each;
the hook may block while the harness decides, and raises ``AgentKilled`` when
the agent was killed meanwhile: the service then writes nothing more, neither
to the agent nor to the world.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from killpoint.errors import InternalError
from killpoint.protocol import (MODEL_REPLY, MODEL_REQUEST, SEAM_POINTS, TOOL_EFFECT, TOOL_OPENED, TOOL_REPLY,
                                TOOL_REQUEST)

__all__ = ["MODEL_REPLY", "MODEL_REQUEST", "SEAM_POINTS", "TOOL_EFFECT", "TOOL_OPENED", "TOOL_REPLY", "TOOL_REQUEST",
           "AgentKilled", "SETTLE_DEADLINE_S", "ReplyWrites", "SeamHook", "free_running"]


class AgentKilled(InternalError):
    """The agent was killed while its request was held: drop the request, answer nothing, change nothing."""


# (point, the planned calls it is about, the exchange as evidence quotes it) -> None, or AgentKilled.
SeamHook = Callable[[str, tuple[str, ...], dict[str, Any]], None]


def free_running(point: str, calls: tuple[str, ...], exchange: dict[str, Any]) -> None:
    """The hook of a service no harness holds: every request goes straight through."""


SETTLE_DEADLINE_S = 60.0  # a reply's writing ends at its socket timeout (30 s) if its reader lives on unreading


class ReplyWrites:
    """The replies being written whose seam after them (``model_reply``, ``tool_reply``) is not announced yet.

    A reply's seam is announced once its bytes are sent, so the agent runs on
    meanwhile: it may save the result, or send its next request, before the
    service's thread announces the reply. What the agent does with a reply
    follows its seam only if the seams of the agent's requests, and of its
    store, wait until every reply sent before them has been announced
    (``settle``): a kill at a reply's seam then lands before the agent's next
    request is acted on, and before its store is seen holding the result.
    """

    def __init__(self) -> None:
        self._writing = 0
        self._changed = threading.Condition()

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Around a reply's writing and the seam after it."""
        with self._changed:
            self._writing += 1
        try:
            yield
        finally:
            with self._changed:
                self._writing -= 1
                self._changed.notify_all()

    def settle(self, timeout: float) -> bool:
        """Wait until every reply being written has had its seam announced; whether all had in time."""
        with self._changed:
            return self._changed.wait_for(lambda: self._writing == 0, timeout=timeout)

    def in_flight(self) -> bool:
        """A reply is being written, or its seam announced, now."""
        with self._changed:
            return self._writing > 0
