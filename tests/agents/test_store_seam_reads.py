"""When the store's crash point is announced, read against a store the test writes and an incarnation it fakes.

``StoreSeam`` announces ``store_result`` for a call the first time a copy of
the store holds its result, once the call reached its tool; it reads only
when a file changed, never announces one result twice, and from its watching
thread announces nothing for an incarnation it could not hold still (an
exited one may be unheld, and the harness no longer serves it).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from killpoint.harness.agents.seams import AgentKilled
from killpoint.harness.agents.store_seam import STORE_RESULT, StoreSeam
from killpoint.harness.judge.stores._agent_store import AgentStore
from killpoint.harness.model import Plan, PlannedCall

PLAN = Plan("order", (PlannedCall("c1", "read_file", {"path": "a"}), PlannedCall("c2", "append", {"path": "b"})))
JOURNAL = "agent-journal.jsonl"
DEADLINE_S = 10.0


class FakeIncarnation:
    """A ``Launched`` whose hold is granted or not, counting the holds and whether one is on."""

    pid = 1

    def __init__(self, holds: bool) -> None:
        self.holds = holds
        self.held_times = 0
        self.holding = threading.Event()

    @contextlib.contextmanager
    def held(self) -> Iterator[bool]:
        self.held_times += 1
        self.holding.set()
        try:
            yield self.holds
        finally:
            self.holding.clear()


class Announced:
    """The seam hook: records each announcement; ``kill`` makes the next raise AgentKilled, as a struck one does."""

    def __init__(self) -> None:
        self.points: list[tuple[str, tuple[str, ...]]] = []
        self.kill = False

    def __call__(self, point: str, calls: tuple[str, ...], exchange: dict) -> None:
        self.points.append((point, calls))
        if self.kill:
            raise AgentKilled("killed at the point")


def result_line(call: str) -> str:
    return json.dumps({"message": {"role": "tool", "tool_call_id": f"call_kp_{call}", "content": "ok"}}) + "\n"


def choice_line(call: str) -> str:
    return json.dumps({"message": {"role": "assistant", "tool_calls": [
        {"id": f"call_kp_{call}", "type": "function", "function": {"name": "append", "arguments": "{}"}}]}}) + "\n"


@pytest.fixture
def seam(tmp_path: Path) -> Iterator[tuple[StoreSeam, Announced, Path]]:
    announced = Announced()
    seam = StoreSeam(AgentStore((JOURNAL,)), PLAN, tmp_path, announced)
    yield seam, announced, tmp_path / JOURNAL
    seam.stop()


def test_a_result_is_announced_once_the_call_reached_its_tool_and_never_twice(seam) -> None:
    store_seam, announced, journal = seam
    incarnation = FakeIncarnation(holds=True)
    store_seam.watch(incarnation)
    journal.write_text(result_line("c1"))
    store_seam.sync(0)
    assert announced.points == []  # c1 never reached its tool: its result there is no point of this run
    store_seam.expect("c1")
    store_seam.sync(0)
    assert announced.points == [(STORE_RESULT, ("c1",))]
    journal.write_text(result_line("c1") + choice_line("c2"))
    store_seam.sync(0)
    assert announced.points == [(STORE_RESULT, ("c1",))]  # held once already; c2 only named
    store_seam.expect("c1", "c2")
    journal.write_text(result_line("c1") + choice_line("c2") + result_line("c2"))
    store_seam.sync(0)
    assert announced.points == [(STORE_RESULT, ("c1",)), (STORE_RESULT, ("c2",))]


def test_a_result_is_announced_only_once_the_seam_of_the_reply_carrying_it_was(seam) -> None:
    """The agent may save a result before the service's thread has announced the reply it came in (the reply is
    sent first): the store's point waits for that seam, and the change it read meanwhile is read again."""
    store_seam, announced, journal = seam
    store_seam.watch(FakeIncarnation(holds=True))
    store_seam.expect("c1")
    with store_seam.replies.writing():
        journal.write_text(result_line("c1"))
        store_seam.sync(0)
        assert announced.points == []
    store_seam.sync(0)
    assert announced.points == [(STORE_RESULT, ("c1",))]


def test_a_request_of_an_incarnation_no_longer_running_reads_nothing(seam) -> None:
    store_seam, announced, journal = seam
    store_seam.begin(1)
    store_seam.watch(FakeIncarnation(holds=False))  # unheld: the watch reads, and says nothing
    store_seam.expect("c1")
    journal.write_text(result_line("c1"))
    store_seam.sync(0)  # incarnation 0's, held up past incarnation 1's start (the services then drop it)
    assert announced.points == []
    store_seam.sync(1)
    assert announced.points == [(STORE_RESULT, ("c1",))]


def test_a_request_before_the_incarnation_started_is_expected_and_read_once_it_has(seam) -> None:
    """The agent may ask before the runner has told the services it started (the fork server starts it in
    milliseconds): its request is taken, its call expected, and the store read for it once watched."""
    store_seam, announced, journal = seam
    store_seam.begin(1)
    store_seam.expect("c1")
    journal.write_text(result_line("c1"))
    store_seam.sync(1)  # not started yet: nothing is read, and nothing refused
    assert announced.points == []
    store_seam.watch(FakeIncarnation(holds=False))
    store_seam.sync(1)
    assert announced.points == [(STORE_RESULT, ("c1",))]


def test_an_unchanged_store_is_not_read_again(seam) -> None:
    store_seam, announced, journal = seam
    (aside := journal.parent / "aside").mkdir()  # not a store folder: nothing written there wakes the watch
    incarnation = FakeIncarnation(holds=True)
    store_seam.watch(incarnation)
    store_seam.expect("c2")
    # Written whole in one step: a write in two (truncate, then the text) is two changes, each its own read.
    (written := aside / "written").write_text(choice_line("c2"))
    written.replace(journal)
    store_seam.sync(0)
    reads = incarnation.held_times
    store_seam.sync(0)
    store_seam.sync(0)
    assert incarnation.held_times == reads == 1 and announced.points == []


def test_the_watch_announces_a_result_written_between_requests(seam) -> None:
    store_seam, announced, journal = seam
    journal.write_text("")
    store_seam.watch(FakeIncarnation(holds=True))
    store_seam.expect("c2")
    journal.write_text(result_line("c2"))
    deadline = time.monotonic() + DEADLINE_S
    while not announced.points and time.monotonic() < deadline:
        time.sleep(0.01)
    assert announced.points == [(STORE_RESULT, ("c2",))]


def test_the_watch_announces_nothing_for_an_incarnation_it_cannot_hold_but_the_next_request_does(seam) -> None:
    store_seam, announced, journal = seam
    journal.write_text("")
    incarnation = FakeIncarnation(holds=False)
    store_seam.watch(incarnation)
    store_seam.expect("c2")
    journal.write_text(result_line("c2"))
    deadline = time.monotonic() + DEADLINE_S
    while incarnation.held_times == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert incarnation.held_times >= 1 and announced.points == []  # looked, could not hold it: said nothing
    store_seam.sync(0)  # the agent waits on a request of its own: it is alive
    assert announced.points == [(STORE_RESULT, ("c2",))]


def test_a_kill_at_the_point_keeps_the_incarnation_held_until_it_is_dead(seam) -> None:
    """Announced from the watch or from the agent's next request, whichever reads first: the hold lasts until
    ``stop`` (the harness saw the incarnation dead), never thawing it on the way to its SIGKILL."""
    store_seam, announced, journal = seam
    journal.write_text("")
    incarnation = FakeIncarnation(holds=True)
    store_seam.watch(incarnation)
    store_seam.expect("c1")
    announced.kill = True
    journal.write_text(result_line("c1"))

    def request() -> None:
        with contextlib.suppress(AgentKilled):
            store_seam.sync(0)

    requesting = threading.Thread(target=request)
    requesting.start()
    deadline = time.monotonic() + DEADLINE_S
    while not announced.points and time.monotonic() < deadline:
        time.sleep(0.01)
    assert announced.points == [(STORE_RESULT, ("c1",))]
    time.sleep(0.3)
    assert incarnation.holding.is_set()  # still held, the kill not yet confirmed
    store_seam.stop()
    requesting.join(DEADLINE_S)
    assert not requesting.is_alive() and not incarnation.holding.is_set()


@pytest.mark.integration
def test_a_store_with_a_file_system_mounted_on_its_way_is_never_read(tmp_path: Path) -> None:
    """An agent able to mount (root in its own tree) could serve its store from a FUSE daemon it runs: frozen with
    it, a read there would never return. A store whose way crosses a mount is not read, and its point not reached."""
    if os.geteuid() != 0:
        pytest.skip("mounting a file system needs root; the harness runs as root in CI")
    notes = tmp_path / "notes"
    notes.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(notes)], check=True)
    try:
        announced = Announced()
        store_seam = StoreSeam(AgentStore(("notes/agent-journal.jsonl",)), PLAN, tmp_path, announced)
        store_seam.watch(FakeIncarnation(holds=True))
        store_seam.expect("c1")
        (notes / "agent-journal.jsonl").write_text(result_line("c1"))
        store_seam.sync(0)
        store_seam.stop()
        assert announced.points == []
    finally:
        subprocess.run(["umount", str(notes)], check=True)
    moved = StoreSeam(AgentStore(("notes/agent-journal.jsonl",)), PLAN, tmp_path, announced)
    moved.watch(FakeIncarnation(holds=True))
    moved.expect("c1")
    (notes / "agent-journal.jsonl").write_text(result_line("c1"))  # the same store, on the workload's own disk
    moved.sync(0)
    moved.stop()
    assert announced.points == [(STORE_RESULT, ("c1",))]
