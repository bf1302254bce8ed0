"""The crash point inside a real server's call: ``tool_opened``, its first open of a file in the world, held there.

A real MCP server behind the recording proxy (``mcp_proxy``) does its work in
its own process, in the agent's tree. The seams the proxy reports stand before
that work (``tool_request``: the request about to be forwarded) and after it
(``tool_effect``: its reply received). What a kill part-way through leaves, such
as a temporary file never renamed, is what a user's agent finds after a crash
mid-call. A kill timed by the clock lands there only by luck.

So while a proxied call is in flight, the server is held in the kernel at its
first open of a file in the world. This uses fanotify permission events
(``certify/world_holds``), the same way the certifier holds servers.
``tool_opened`` is then announced for the call. A kill there lands with the
server asleep at that open, every time: a file it created exists, empty, and
nothing has been written.

What is held:
- only opens made by the incarnation's processes (its leader and every
  descendant: an MCP client may start its server in a session of its own);
- only in the world's folders that exist when the call arrives (a file opened
  in a folder the call creates is not held);
- only while exactly one proxied call is in flight, a probe's read counting as
  one (with two at once, nobody could say whose open it is, so no new one is
  held; an announcement under way keeps its server held until it ends).

The file the held open names is kept (``opened``) for the runner to record
beside the world at the kill: it is what a kill there may leave, created and
empty, and the only entry the world's comparison takes for debris
(``judge/properties.world_differs``).

Other processes' opens, the harness's own included, are allowed by the reader
at once. The reader never waits on the announcement; a second thread makes it.
Without fanotify (an unprivileged harness) the point is never reached, and the
reports show no column for it.
"""

from __future__ import annotations

import itertools
import os
import select
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from killpoint.harness.agents.seams import TOOL_OPENED, AgentKilled, SeamHook
from killpoint.harness.certify.world_holds import Holds

MAX_FOLDERS = 1000  # marked per call: a world with more folders is held in its first thousand
MAX_LISTED = 100_000  # names read to find them: a folder of millions of names is not read to its end
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
STOP_DEADLINE_S = 10.0  # the reader reads a bounded batch at a time; a reader not back by then is left, said so
MAX_IN_FLIGHT = 1 << 30


@dataclass
class _Armed:
    """The one proxied call in flight (its ``tool_request`` passed), and where its announcement is."""

    call: str
    exchange: dict[str, Any]
    announcing: bool = False
    announced: bool = False


class FirstOpens:
    """Holds the incarnation at its first open in ``world`` during a proxied call; see the module's docstring."""

    def __init__(self, world: Path, hook: SeamHook) -> None:
        self.world, self.hook = world, hook
        self.opened: str | None = None  # the world's file the last announcement held the server opening
        self._holds: Holds | None = None
        self._armed: _Armed | None = None
        self._in_flight = 0
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = -1, -1
        self._reader: threading.Thread | None = None

    def start(self, leader: int) -> None:
        """The incarnation whose first process is ``leader`` started: hold its opens from now on (where fanotify is
        allowed)."""
        self.stop()
        try:
            self._holds = Holds(leader, holding=lambda pid: _descends_from(pid, leader))
        except OSError:
            return  # fanotify refused here: the point is never reached
        self._wake_r, self._wake_w = os.pipe()
        self._reader = threading.Thread(target=self._read, args=(self._holds,), name="killpoint-first-opens",
                                        daemon=True)
        self._reader.start()

    def expect(self, call: str | None, exchange: dict[str, Any]) -> None:
        """A proxied call passed ``tool_request`` and is about to be forwarded: hold the server's first open for it.
        ``call`` None: a read the server makes for a probe, never announced (it only makes opens ambiguous)."""
        with self._lock:
            self._in_flight += 1
            if self._holds is None:
                return
            if self._in_flight > 1 or call is None:  # whose open it would be cannot be told: hold no new one
                if self._armed is not None and not self._armed.announcing:
                    self._armed = None
                    self._holds.release()
                return  # an announcement under way keeps its server held until it ends (``_announce``)
            self._armed = _Armed(call, exchange)
            _mark_folders(self._holds, self.world)

    def done(self, call: str | None) -> None:
        """The call's (or the probe's) reply came back: nothing more is held for it."""
        with self._lock:
            self._in_flight = max(0, self._in_flight - 1)
            if self._armed is not None and self._armed.call == call:
                self._armed = None
                if self._holds is not None:
                    self._holds.release()

    def stop(self) -> None:
        """The incarnation ended: everything still held is let go (or was killed), and nothing more is held."""
        reader, self._reader = self._reader, None
        if reader is not None:
            os.write(self._wake_w, b"x")
            reader.join(STOP_DEADLINE_S)
            os.close(self._wake_r)
            os.close(self._wake_w)
        with self._lock:
            if self._holds is not None:
                self._holds.close()
            self._holds, self._armed, self._in_flight = None, None, 0

    def _read(self, holds: Holds) -> None:
        """Take every event: allow the others' at once, and the incarnation's unless an announcement holds them.
        Anything going wrong here lets everything go and holds nothing more, said once on stderr: a hold nobody
        reads would leave every open in the world waiting."""
        try:
            while True:
                ready, _, _ = select.select([holds.fd, self._wake_r], [], [])
                if self._wake_r in ready:
                    return
                with self._lock:
                    if self._holds is holds and holds.read():
                        self._take(holds)
        except Exception as error:  # noqa: BLE001 - reported, and every hold let go
            print(f"killpoint: tool_opened's holds stopped ({error!r}); nothing is held for this incarnation",
                  file=sys.stderr)
            with self._lock:
                if self._holds is holds:
                    holds.release()
                    self._armed = None
                    self._in_flight = MAX_IN_FLIGHT  # nothing is armed again before the next incarnation

    def _take(self, holds: Holds) -> None:
        """What is held now: let it go, or start the armed call's announcement (under the lock)."""
        armed = self._armed
        if armed is None or armed.announced:
            holds.release()
        elif not armed.announcing:
            armed.announcing = True
            self.opened = _in_world(holds.held_path(0), self.world)
            threading.Thread(target=self._announce, args=(armed, holds), name="killpoint-tool-opened",
                             daemon=True).start()

    def _announce(self, armed: _Armed, holds: Holds) -> None:
        """Announce ``tool_opened`` with the server asleep at its open; let it go on unless the harness kills it."""
        try:
            self.hook(TOOL_OPENED, (armed.call,), armed.exchange)
        except AgentKilled:
            return  # the kill lands, or landed, with the server held: stop() lets the group go
        with self._lock:
            armed.announced = True
            self.opened = None
            if self._holds is holds:
                holds.release()


def _in_world(path: str | None, world: Path) -> str | None:
    """``path`` as the world's snapshot names it (``files/...``), when it is inside ``world`` (the files)."""
    if path is None or not path.startswith(str(world) + os.sep):
        return None
    return f"{world.name}/{path[len(str(world)) + 1:]}"


def _mark_folders(holds: Holds, world: Path) -> None:
    """Mark the world's folders, the world first: each opened below its parent's descriptor and never through a
    symlink (not even the world's own name: the agent can replace it with one), at most MAX_FOLDERS of them and
    MAX_LISTED names read in all."""
    try:
        folders = [_open_world(world)]
    except OSError:
        return
    listed, index = 0, 0
    try:
        while index < len(folders):
            holds.mark(folders[index])
            if len(folders) < MAX_FOLDERS and listed < MAX_LISTED:
                try:
                    with os.scandir(folders[index]) as entries:
                        read = list(itertools.islice(entries, MAX_LISTED - listed))
                except OSError:
                    read = []
                listed += len(read)
                names = [entry.name for entry in read if entry.is_dir(follow_symlinks=False)]
                for name in names[:MAX_FOLDERS - len(folders)]:
                    try:
                        folders.append(os.open(name, _FOLDER, dir_fd=folders[index]))
                    except OSError:  # gone, or made a link since it was listed: its files are not held
                        pass
            index += 1
    finally:
        for fd in folders:
            os.close(fd)


def _open_world(world: Path) -> int:
    """The world's folder, ``RUN/world/files``: the run's folder is the harness's, the two names below it are in
    the agent's reach, so neither is followed if it is a link."""
    run = os.open(world.parent.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        middle = os.open(world.parent.name, _FOLDER, dir_fd=run)
    finally:
        os.close(run)
    try:
        return os.open(world.name, _FOLDER, dir_fd=middle)
    finally:
        os.close(middle)


def _descends_from(pid: int, leader: int) -> bool:
    """``pid`` is ``leader`` or one of its descendants (its parents read from /proc, up to init)."""
    for _ in range(1000):  # a chain of parents that long is no process tree
        if pid == leader:
            return True
        if pid <= 1:
            return False
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                pid = int(stat.read().rpartition(b")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            return False  # gone already: nothing to hold
    return False
