"""The crash point inside an agent's own store: ``store_result``, the moment its store first holds a call's result.

Between the tool's reply reaching the agent and the next model request
carrying the result, the agent's framework saves the result in its own store
(the Agents SDK's session, LangGraph's pending writes and then its checkpoint,
a journal of the agent's own). No network seam sees that write, and a kill
just after it is the one where the agent has kept a result the model never
saw: a correct agent goes on from its store; one that runs the call again
repeats its effect.

The store's folders are watched (inotify; those that exist when the
incarnation starts). From the moment a call reaches its tool until the store
holds its result, each change is read with the incarnation held still
(``Launched.held``: its cgroup frozen): the store's files are copied and read
by the reader that quotes the store as evidence (``judge/stores/_agent_store``,
sandboxed as every store read is), and the first time the copy holds a result
of the call, ``store_result`` is announced for it on the control socket, as
the services announce every seam, while the agent stays held: a pausing kill
there kills it frozen. A change seen while a reply's seam is still to be
announced is read again later, for the result the reply carries follows its
seam (``ReplyWrites``). The store is read once more before the agent's next
request is announced (``sync``), once every reply's seam has been: a
framework that saves before its next request is caught there, before the
model has the result, every time. One that saves in the background
(LangGraph's default durability) is caught wherever the watch catches it, so
``store_result``, like ``model_reply``, is a point where what the agent did by
the kill can vary (hunt draws only the held seams). A result the store held once is announced once a run.

Where the incarnation cannot be held (a container; no cgroup freezer) only the
reads before its requests announce, the copy read as the agent goes on (a copy
caught mid-write holds nothing new yet). The watch never announces for an
incarnation that has ended (an empty cgroup freezes too): the rendezvous would
read it as the next one's, were it not dropped there for its incarnation
number. A store with another file system mounted on its way is never read.
"""

from __future__ import annotations

import os
import select
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from inotify_simple import INotify, flags

from killpoint import protocol
from killpoint.harness.agents.seams import AgentKilled, ReplyWrites, SeamHook
from killpoint.harness.backends import Launched
from killpoint.harness.execute._process_tree import process_gone
from killpoint.harness.faults.nemesis import copy_store
from killpoint.harness.judge.stores._agent_store import AgentStore
from killpoint.harness.model import Plan

STORE_RESULT = protocol.STORE_RESULT
WATCHED = flags.MODIFY | flags.CREATE | flags.MOVED_TO | flags.DELETE | flags.ONLYDIR | flags.DONT_FOLLOW
DEATH_DEADLINE_S = 60.0  # held frozen after a kill at the point until the harness saw the incarnation dead


@dataclass
class StoreSeam:
    """Announces ``store_result`` for ``plan``'s calls through ``announce`` as ``store`` (under ``workload``) first
    holds each one's result; ``watch`` and ``stop`` bracket each incarnation."""

    store: AgentStore
    plan: Plan
    workload: Path
    announce: SeamHook
    replies: ReplyWrites = field(default_factory=ReplyWrites)  # the services' (a result follows its reply's seam)
    _pending: set[str] = field(default_factory=set)  # reached their tool, their result not yet held
    _held: set[str] = field(default_factory=set)  # announced: held once this run
    _seen: tuple[tuple[int, int, int] | None, ...] = ()  # the store files' identities when last read
    _launched: Launched | None = None
    _incarnation: int = 0  # the number of the incarnation ``_launched`` is
    _ended: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _watching: threading.Thread | None = None
    _wake: tuple[int, int] | None = None  # a pipe whose write end, closed, stops the watching thread
    _files: tuple[str, ...] = field(init=False, default=())  # the store's files, resolved once (``__post_init__``)

    def __post_init__(self) -> None:
        self._files = self.store.files(self.plan)

    def begin(self, incarnation: int) -> None:
        """Incarnation ``incarnation`` is about to start: its calls are expected from now on, its store read for
        them once it has started (``watch``); a request of an earlier one reads nothing from now on."""
        with self._lock:
            self._pending.clear()
            self._seen = ()
            self._launched, self._incarnation = None, incarnation

    def watch(self, launched: Launched) -> None:
        """The incarnation begun last started as ``launched``: watch the store for it."""
        self.stop()
        with self._lock:
            self._launched = launched
            self._ended.clear()
            incarnation = self._incarnation
        inotify = self._inotify()
        if inotify is None:
            return  # no inotify instance left to this user: the reads before the agent's requests remain
        try:
            wake = os.pipe()
        except OSError:
            inotify.close()
            return
        watching = threading.Thread(target=self._watch, args=(inotify, wake[0], incarnation), name="store-seam",
                                    daemon=True)
        try:
            watching.start()
        except BaseException:
            inotify.close()
            os.close(wake[0])
            os.close(wake[1])
            raise
        self._wake, self._watching = wake, watching

    def stop(self) -> None:
        """The incarnation is dead or done: stop watching, and let a hold at the point end."""
        self._ended.set()
        wake, watching = self._wake, self._watching
        self._wake, self._watching = None, None
        if wake is None or watching is None:
            return
        os.close(wake[1])
        try:
            watching.join()
        finally:
            os.close(wake[0])

    def expect(self, *calls: str) -> None:
        """``calls`` reached their tool: their results may be saved from the moment its reply is written (marked
        before, so a request the agent sends once it saved one finds it expected)."""
        with self._lock:
            self._pending.update(call for call in calls if self.plan.call(call) is not None and call not in self._held)

    def sync(self, incarnation: int) -> None:
        """Read the store if it changed since last read (before the agent's next request is announced: the agent
        is alive, waiting on it); AgentKilled if incarnation ``incarnation``, whose request it is, was killed at
        ``store_result`` meanwhile. Nothing is read for a request of an incarnation that is not the one running
        (held up past its kill), nor for one that has not started yet."""
        self._look(incarnation, waiting=True)

    def _inotify(self) -> INotify | None:
        """Watches on the store's folders, made before the incarnation's first look; None if none can be made."""
        try:
            inotify = INotify()
        except OSError:
            return None
        for folder in self._folders():
            try:
                inotify.add_watch(str(folder), WATCHED)
            except OSError:  # gone, or made a link since it was looked at: the syncs still read it
                pass
        return inotify

    def _watch(self, inotify: INotify, woken: int, incarnation: int) -> None:
        with inotify:
            while True:
                ready, _, _ = select.select([inotify.fileno(), woken], [], [])
                if woken in ready:
                    return
                if ready:
                    inotify.read(timeout=0)
                    try:
                        self._look(incarnation, waiting=False)
                    except AgentKilled:
                        return

    def _folders(self) -> list[Path]:
        """The workload folder and each real folder a store file sits in (a link is never watched through)."""
        folders = {self.workload}
        for name in self._files:
            folder = self.workload
            for part in PurePosixPath(name).parts[:-1]:
                folder = folder / part
                try:
                    if not stat.S_ISDIR(os.lstat(folder).st_mode):
                        break
                except OSError:
                    break
                folders.add(folder)
        return sorted(folders)

    def _look(self, incarnation: int, *, waiting: bool) -> None:
        """Read the store if a call is expected and a file changed; announce what it newly holds. ``waiting``: the
        agent waits on a request of its own, so it is alive; else it is only if it is held (exited, it may not
        be, and an announcement would wait on a harness no longer serving it)."""
        with self._lock:
            if (incarnation != self._incarnation or not self._pending or self._launched is None
                    or self._ended.is_set()):
                return
            identities = self._identities()
            if identities is None or identities == self._seen:
                return  # unchanged, or something is mounted on its way (a read could wait on a process held still)
            with self._launched.held() as held:
                if not (waiting or (held and not process_gone(self._launched.pid))):
                    return  # not held, or ended (an empty cgroup freezes too): the sync before its next request reads
                if self.replies.in_flight():
                    return  # a reply's seam is still to come, and the result it carries comes after it: read later
                identities = self._identities()  # as the copy finds the store: a write just before the freeze is in
                if identities is None:
                    return
                self._seen = identities
                for call in self._newly_held():
                    self._pending.discard(call)
                    self._held.add(call)
                    try:
                        self.announce(STORE_RESULT, (call,), {"incarnation": incarnation})
                    except AgentKilled:
                        # Killed here: stay frozen until the kill is confirmed, so the agent runs on no further.
                        self._ended.wait(DEATH_DEADLINE_S)
                        raise

    def _identities(self) -> tuple[tuple[int, int, int] | None, ...] | None:
        """Each store file's (inode, size, change time), None where absent: what a write changes. None in all if
        a file, or a folder on its way, is on another file system than the workload folder's (a mount)."""
        try:
            device = os.lstat(self.workload).st_dev
        except OSError:
            return None
        identities: list[tuple[int, int, int] | None] = []
        for name in self._files:
            found: os.stat_result | None = None
            path = self.workload
            for part in PurePosixPath(name).parts:
                path = path / part
                try:
                    found = os.lstat(path)
                except OSError:
                    found = None
                    break  # not made yet: nothing on the way is mounted
                if found.st_dev != device:
                    return None
            identities.append(None if found is None else (found.st_ino, found.st_size, found.st_mtime_ns))
        return tuple(identities)

    def _newly_held(self) -> list[str]:
        """The pending calls whose result a copy of the store holds now, in the plan's order."""
        try:
            with tempfile.TemporaryDirectory(prefix="killpoint-store-seam-") as scratch:
                copy = Path(scratch) / "store"
                if copy_store(self.workload, self._files, copy):
                    return []  # refused (a link, a FIFO, too big): the kills' copies say why
                records = self.store.read(copy, self.plan).records
        except OSError:  # no room for the copy: nothing is known to be held, and the agent's request goes on
            return []
        return [call.call_id for call in self.plan.calls
                if call.call_id in self._pending and (record := records.get(call.call_id)) is not None
                and record.status == protocol.SUCCEEDED]

