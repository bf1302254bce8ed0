"""The world watcher's holds, on real processes: a server's open in the world waits for the certifier, nobody else's does.

Each child waits for a line on stdin before it touches the world, so the watch
is in place first; it prints what it did, and every wait for it is a poll with
a deadline. While a watch holds, the test itself only stats the world's files:
an open of its own would wait for the read that this same thread is to make.
"""

from __future__ import annotations

import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from killpoint.harness.certify import world_events
from killpoint.harness.certify.world_events import BEST_EFFORT, WorldEvents, kills_at_changes
from killpoint.harness.certify.world_holds import FAN_PRE_ACCESS, available

pytestmark = pytest.mark.integration

DEADLINE_S = 20.0
HELD_FOR_S = 0.5  # how long a held child is watched not to go on (it cannot, whatever the load)
# Opens (creating) the file named by argv[1], says so, writes it in two parts, saying so after each.
OPENER = """
import os, sys
sys.stdin.readline()
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
print("opened", flush=True)
os.write(fd, b"one ")
print("wrote one", flush=True)
os.write(fd, b"two")
print("wrote two", flush=True)
"""


class Child:
    """The opener, in a session of its own (``own_session``) or in ours; its lines read with deadlines."""

    def __init__(self, path: Path, *, own_session: bool) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", OPENER, str(path)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, start_new_session=own_session)
        self.lines: list[str] = []

    def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"go\n")
        self.process.stdin.flush()

    def said(self, line: str, within_s: float) -> bool:
        """Has it printed ``line``, waiting up to ``within_s``?"""
        assert self.process.stdout is not None
        deadline = time.monotonic() + within_s
        while line not in self.lines:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.process.stdout], [], [], left)[0]:
                return False
            text = self.process.stdout.readline()
            if not text:
                return False
            self.lines.append(text.decode().strip())
        return True

    def end(self) -> None:
        self.process.kill()
        self.process.wait(timeout=DEADLINE_S)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def world(tmp_path: Path) -> Path:
    (tmp_path / "world" / "sub").mkdir(parents=True)
    return tmp_path / "world"


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.end()


def need_fanotify() -> None:
    if available() is None:
        pytest.skip("fanotify is refused here (not root?): the watcher falls back to inotify alone")


def held_events(events: WorldEvents, count: int) -> list[str]:
    """Read until ``count`` events are held (polling with a deadline); the changes read meanwhile."""
    assert events.holds is not None
    labels: list[str] = []
    deadline = time.monotonic() + DEADLINE_S
    while True:
        labels += events.read()
        if len(events.holds.held) >= count or time.monotonic() > deadline:
            return labels
        select.select(list(events.fds), [], [], 0.05)


def test_a_server_opening_a_file_in_a_marked_folder_waits_until_released(
        world: Path, children: list[Child]) -> None:
    need_fanotify()
    target = world / "sub" / "x.txt"
    child = Child(target, own_session=True)
    children.append(child)
    events = WorldEvents(world, session=child.process.pid)
    try:
        assert events.held and len(events.fds) == 2
        child.go()
        labels = held_events(events, 1)
        assert labels == ["create sub/x.txt"], "the change that came before the held open is read with it"
        assert target.exists() and target.stat().st_size == 0, "created by open(O_CREAT), nothing written"
        assert not child.said("opened", HELD_FOR_S), "held in the kernel until released"
        events.release()
        assert child.said("opened", DEADLINE_S), child.lines
        assert events.holds is not None
        if events.holds.mask & FAN_PRE_ACCESS:  # writes are held too, before each part
            held_events(events, 1)
            assert not child.said("wrote one", HELD_FOR_S) and target.stat().st_size == 0
            events.release()
            assert child.said("wrote one", DEADLINE_S), child.lines
            held_events(events, 1)
            assert target.stat().st_size == len("one ")
            events.release()
        deadline = time.monotonic() + DEADLINE_S
        while not child.said("wrote two", 0.05):
            assert time.monotonic() < deadline and child.process.poll() is None, child.lines
            events.read()
            events.release()
    finally:
        events.close()
    assert target.read_bytes() == b"one two"


def test_a_process_not_in_the_servers_session_is_never_held(world: Path, children: list[Child]) -> None:
    need_fanotify()
    server = Child(world / "server.txt", own_session=True)
    other = Child(world / "other.txt", own_session=False)
    children += [server, other]
    events = WorldEvents(world, session=server.process.pid)
    try:
        other.go()
        deadline = time.monotonic() + DEADLINE_S
        while not other.said("wrote two", 0.05):  # its events wait only for a read, which allows them: no release
            assert time.monotonic() < deadline and other.process.poll() is None, other.lines
            events.read()
        assert events.holds is not None and events.holds.held == []
    finally:
        events.close()
    assert (world / "other.txt").read_bytes() == b"one two"


def test_closing_the_watcher_lets_a_held_opener_go_on(world: Path, children: list[Child]) -> None:
    need_fanotify()
    child = Child(world / "x.txt", own_session=True)
    children.append(child)
    events = WorldEvents(world, session=child.process.pid)
    closed = False
    try:
        child.go()
        held_events(events, 1)
        assert not child.said("opened", HELD_FOR_S)
        events.close()
        closed = True
        assert child.said("wrote two", DEADLINE_S), child.lines
    finally:
        if not closed:
            events.close()


def test_a_folder_made_during_the_watch_is_marked_when_its_creation_is_read(
        world: Path, children: list[Child]) -> None:
    need_fanotify()
    child = Child(world / "new" / "x.txt", own_session=True)
    children.append(child)
    events = WorldEvents(world, session=child.process.pid)
    try:
        (world / "new").mkdir()
        assert events.read() == ["create new"]
        child.go()
        assert held_events(events, 1) == ["create new/x.txt"]
        assert not child.said("opened", HELD_FOR_S)
    finally:
        events.close()


def test_without_fanotify_the_watch_reports_changes_and_holds_nothing(
        world: Path, children: list[Child], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(world_events, "available", lambda: None)
    assert kills_at_changes() == BEST_EFFORT
    child = Child(world / "x.txt", own_session=True)
    children.append(child)
    events = WorldEvents(world, session=child.process.pid)
    try:
        assert not events.held and events.fds == (events.fd,)
        child.go()
        assert child.said("wrote two", DEADLINE_S), child.lines
        assert events.read()[:1] == ["create x.txt"]
    finally:
        events.close()


def test_the_certificate_words_say_how_a_kill_at_a_change_lands() -> None:
    need_fanotify()
    assert kills_at_changes().startswith("held (fanotify FAN_OPEN_PERM")
