"""tool_opened: a real server's first open in the world, during a proxied call, held in the kernel until announced.

Real processes, real fanotify: a child of the "incarnation" opens a world file
while a call is armed; it sleeps in the kernel until the hook returns. Nothing
else is held: another process's open, an open when no call (or two) is in
flight, a world that is a symlink.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from killpoint.harness.agents.first_open import FirstOpens
from killpoint.harness.agents.seams import TOOL_OPENED, AgentKilled
from killpoint.harness.certify.world_holds import available

pytestmark = pytest.mark.integration

# Opens FILE once told to on stdin (so the hold is armed first), then says so and exits.
OPENER = "import sys; sys.stdin.readline(); open(sys.argv[1]).read(); print('opened', flush=True)"
UNDER_A_SHELL = 'read go; "$0" "$1" "$2" "$3" < /dev/null'  # the opener as the leader's child, not the leader


@pytest.fixture(autouse=True)
def fanotify() -> None:
    if available() is None:
        if os.environ.get("CI"):
            pytest.fail("fanotify is refused here, and CI runs as root")
        pytest.skip("fanotify is refused here (run as root)")


class Hook:
    """Records each announcement and keeps it waiting until ``go``."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, tuple[str, ...]]] = []
        self.announced = threading.Event()
        self.go = threading.Event()

    def __call__(self, point: str, calls: tuple[str, ...], exchange: dict[str, Any]) -> None:
        self.seen.append((point, calls))
        self.announced.set()
        if not self.go.wait(30):
            raise AgentKilled("the test never let it go")


def ended_within(process: subprocess.Popen[bytes], seconds: float) -> bool:
    """Whether ``process`` ended within ``seconds`` (polled, with a deadline)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def world(tmp_path: Path) -> Path:
    (tmp_path / "world" / "notes").mkdir(parents=True)
    (tmp_path / "world" / "notes" / "todo.txt").write_text("tea\n")
    return tmp_path / "world"


@pytest.fixture
def opens(world: Path) -> Iterator[tuple[FirstOpens, Hook]]:
    hook = Hook()
    first = FirstOpens(world, hook)
    try:
        yield first, hook
    finally:
        hook.go.set()
        first.stop()


def opener(world: Path, *, under_a_shell: bool = False) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-c", OPENER, str(world / "notes" / "todo.txt")]
    return subprocess.Popen(["/bin/sh", "-c", UNDER_A_SHELL, *argv] if under_a_shell else argv,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def go(process: subprocess.Popen[bytes]) -> None:
    assert process.stdin is not None
    process.stdin.write(b"go\n")
    process.stdin.close()


@pytest.mark.parametrize(("under_a_shell", "meanwhile"), [(False, None), (True, None), (False, "c2")],
                         ids=["the-leader", "its-child", "a-second-call-meanwhile"])
def test_the_incarnations_first_open_is_held_until_announced(world, opens, under_a_shell, meanwhile):
    """Held until the announcement returns; a parallel call's request, coming meanwhile, holds no new open but
    lets go of none either (the announcement decides where the kill lands)."""
    first, hook = opens
    process = opener(world, under_a_shell=under_a_shell)
    try:
        first.start(process.pid)
        first.expect("c1", {"incarnation": 0})
        go(process)
        assert hook.announced.wait(10)
        if meanwhile is not None:
            first.expect(meanwhile, {"incarnation": 0})
        assert not ended_within(process, 0.5)  # asleep in the kernel at its open
        hook.go.set()
        assert ended_within(process, 10) and process.returncode == 0
    finally:
        process.kill()
        process.wait()
    assert hook.seen == [(TOOL_OPENED, ("c1",))]
    assert first.opened is None  # let go after the announcement: nothing a kill left


def test_a_kill_lands_while_the_open_is_held_and_the_file_held_open_is_kept_for_it(world, opens):
    first, hook = opens
    process = opener(world)
    first.start(process.pid)
    first.expect("c1", {"incarnation": 0})
    go(process)
    assert hook.announced.wait(10)
    assert first.opened == "world/notes/todo.txt"  # as the world's snapshot names it, below the world's parent
    process.kill()  # the harness's SIGKILL, the server held at its open
    assert ended_within(process, 10) and process.returncode == -9


@pytest.mark.parametrize("case", ["another-process", "no-call", "two-calls", "a-symlinked-world"])
def test_nothing_else_is_held(world, opens, tmp_path, case):
    first, hook = opens
    process = opener(world)
    leader = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        first.start(leader.pid if case == "another-process" else process.pid)
        if case == "a-symlinked-world":
            first.world = tmp_path / "link"
            first.world.symlink_to(world)
        if case != "no-call":
            first.expect("c1", {"incarnation": 0})
        if case == "two-calls":
            first.expect("c2", {"incarnation": 0})
        go(process)
        assert ended_within(process, 10) and process.returncode == 0
    finally:
        for running in (process, leader):
            running.kill()
            running.wait()
    assert hook.seen == []
