"""The order the services take an agent's requests in, against the seams of the replies before them.

A reply's seam (``tool_reply``, ``model_reply``) is announced after its bytes
are sent, so the agent may already act on it: ``SeamRecord`` takes the agent's
next request only once every reply sent before it has had its seam, and not at
all once the incarnation was struck (or a later one begun) while it waited: a
request sent after the kill's moment is never recorded as one the model had,
nor announced as a later incarnation's.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from killpoint.harness.agents.seam_client import SeamClient
from killpoint.harness.agents.seams import TOOL_REPLY, TOOL_REQUEST, AgentKilled
from killpoint.harness.agents.services import SeamRecord
from killpoint.harness.judge.stores._agent_seams import REQUEST

DEADLINE_S = 10.0


class Announced:
    """The inner hook: the points announced, in order."""

    def __init__(self) -> None:
        self.points: list[tuple[str, tuple[str, ...]]] = []

    def __call__(self, point: str, calls: tuple[str, ...], exchange: dict[str, Any]) -> None:
        self.points.append((point, calls))


def test_a_model_request_is_taken_only_after_the_seam_of_every_reply_sent_before_it() -> None:
    """(A tool request waits in its service, before its invocation is written: test_tool_service.py.)"""
    announced = Announced()
    record = SeamRecord(announced)
    sent, go_on = threading.Event(), threading.Event()

    def reply_c1() -> None:
        with record.replies.writing():
            sent.set()  # the bytes are out: the agent has the reply and may send its next request now
            go_on.wait(DEADLINE_S)
            record(TOOL_REPLY, ("c1",), {})

    replying = threading.Thread(target=reply_c1)
    requesting = threading.Thread(target=record, args=(REQUEST, ("c2",), {}))
    replying.start()
    assert sent.wait(DEADLINE_S)
    requesting.start()
    time.sleep(0.2)
    assert announced.points == []  # the request waits on the reply's seam
    go_on.set()
    replying.join(DEADLINE_S)
    requesting.join(DEADLINE_S)
    assert announced.points == [(TOOL_REPLY, ("c1",)), (REQUEST, ("c2",))]


def test_a_model_request_after_the_strike_is_neither_recorded_nor_announced() -> None:
    announced = Announced()
    record = SeamRecord(announced, struck=lambda: True)
    with pytest.raises(AgentKilled):
        record(REQUEST, (), {"done": ["c1", "c2"]})
    assert record.snapshot() == [] and announced.points == []


class NextIncarnationBegins:
    """A store read that lasts until the harness has begun the next incarnation (its ``begin`` renumbers the
    record and clears the strike, as a request stuck behind a kill at the store's point may find)."""

    def __init__(self, record: SeamRecord) -> None:
        self.record = record

    def sync(self, incarnation: int) -> None:
        self.record.incarnation += 1

    def expect(self, *calls: str) -> None:
        pass


def test_a_request_that_waited_past_the_next_incarnations_start_is_dropped() -> None:
    announced = Announced()
    record = SeamRecord(announced)
    record.store = NextIncarnationBegins(record)  # type: ignore[assignment]
    with pytest.raises(AgentKilled):
        record(REQUEST, ("c3",), {"done": ["c1", "c2"]})
    assert record.snapshot() == [] and announced.points == []


def test_the_hold_refuses_an_announcement_for_an_incarnation_that_is_not_running(tmp_path) -> None:
    """A request incarnation 0 sent, held up (behind a reply's seam, a store read) until incarnation 1 began: its
    seam is never announced as incarnation 1's, where the harness would hold or kill the wrong agent there."""
    client = SeamClient(str(tmp_path / "no-harness.sock"))  # refused before any connection is made
    client.begin(1)
    with pytest.raises(AgentKilled, match="incarnation 0"):
        client(TOOL_REQUEST, ("c2",), {"incarnation": 0})
