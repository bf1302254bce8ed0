"""One cgroup per incarnation: everything the incarnation started, killed as one and confirmed gone.

Every process a workload forks is born in its parent's cgroup, whatever it does next: a
double fork, setsid, an execve with an empty environment. So each host incarnation (subprocess
and fork-server backends) starts in a cgroup of its own, made under the harness's own cgroup in
the cgroup v2 hierarchy; the kill is a write of ``1`` to its ``cgroup.kill`` (Linux 5.14+: the
kernel SIGKILLs every process in it and below, and a fork racing the kill is killed too), and it
is confirmed once ``cgroup.events`` says ``populated 0``. Then the cgroup is removed.

Why not a PID namespace per incarnation (when its init dies, the kernel kills the rest)? The
workload would see itself as pid 1 or 2 (``os.getpid()`` in every ledger record, the same in
every incarnation), /proc would no longer match its pids unless /proc were mounted anew in a
mount namespace too, and as pid 1 it would ignore its own default-action signals and inherit
every orphan: its protocol behaviour would change. A cgroup changes nothing it can observe
but the contents of /proc/self/cgroup. Docker containers need neither: each is its own PID
namespace, and ``docker kill`` SIGKILLs its init, which takes every process of it along.

How a process gets in, without a cost per incarnation: moving a running process
(a write to ``cgroup.procs``) waits for an RCU grace period, several milliseconds, so the fork
server starts each child inside the cgroup (``clone3`` with ``CLONE_INTO_CGROUP``,
``_forkserver_main``); the subprocess backend, whose incarnations start an interpreter anyway,
moves its child in before the exec (``preexec_joiner``).

Where there is no cgroup v2 hierarchy this process may write, or no ``cgroup.kill``, the
backends fall back to the tree walk and the environment sweep of ``killpoint.harness.execute._process_tree`` and say so
once per process on stderr: there a process that leaves the tree and drops the protocol's
environment outlives its run. A root workload can also leave its cgroup (a write to another
cgroup's ``cgroup.procs``): the runner then finds it only by what of the run it holds
(``killpoint.harness.execute._escapees``).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import os
import select
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from killpoint.errors import HarnessError
from killpoint.harness.execute import _process_tree
from killpoint.harness.execute.leftovers import owner_gone, owner_prefix

# killpoint-PID.TICKS-N: incarnation N of the harness process PID that started at TICKS (leftovers.owner_prefix),
# so that a cgroup whose harness is gone is told from a live one's even when its pid has been reused.
NAME_PREFIX = "killpoint-"
FREEZE_TIMEOUT_S = 1.0  # a freeze waits for every process to stop; one that will not is never held

_numbers = itertools.count()


@dataclass(frozen=True)
class Unavailable:
    """Why incarnations cannot have cgroups here."""

    reason: str


def _own_cgroup_dir() -> Path | Unavailable:
    """This process's cgroup in the cgroup v2 hierarchy, as a directory of a cgroup2 mount."""
    try:
        own = next((line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines()
                    if line.startswith("0::")), None)
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError as error:
        return Unavailable(f"cannot read /proc/self: {error.strerror}")
    if own is None:
        return Unavailable("this process is in no cgroup v2 hierarchy")
    for mount in mounts:
        fields, _, filesystem = mount.partition(" - ")
        root, mount_point = fields.split()[3:5]
        if filesystem.split()[:1] == ["cgroup2"] and (own == root or own.startswith(root.rstrip("/") + "/")):
            return Path(mount_point) / os.path.relpath(own, root)
    return Unavailable(f"no cgroup2 mount shows this process's cgroup {own}")


@functools.cache
def usable_parent() -> Path | None:
    """Where this process makes incarnation cgroups, checked once; None (and said on stderr) if nowhere.

    The check makes a cgroup and looks for ``cgroup.kill`` in it. It also kills and removes what
    a harness that is gone left (a SIGKILLed harness cannot clean up after itself).
    """
    found = _own_cgroup_dir()
    if isinstance(found, Path):
        found = _checked(found)
    if isinstance(found, Unavailable):
        print(f"killpoint: no cgroup per incarnation ({found.reason}); an incarnation's processes are found "
              f"by walking its process tree and by their KILLPOINT_* environment, so a process that leaves "
              f"the tree and drops the KILLPOINT_* environment can outlive its run", file=sys.stderr)
        return None
    _reclaim_abandoned(found)
    return found


def _checked(parent: Path) -> Path | Unavailable:
    probe = IncarnationCgroup(parent / f"{owner_prefix(NAME_PREFIX)}probe")
    try:
        probe.path.mkdir()
    except FileExistsError:  # left by a gone harness that had this pid
        pass
    except OSError as error:
        return Unavailable(f"cannot make a cgroup in {parent}: {error.strerror}")
    has_kill = (probe.path / "cgroup.kill").exists()
    probe.discard()
    return parent if has_kill else Unavailable("this kernel's cgroups have no cgroup.kill (Linux 5.14 or later)")


def _reclaim_abandoned(parent: Path) -> list[tuple[Path, list[str]]]:
    """Kill and remove the incarnation cgroups in ``parent`` whose harness process is gone; say what was killed.

    Each cgroup removed, with what was still running in it.
    """
    reclaimed = []
    for path in sorted(parent.glob(f"{NAME_PREFIX}*-*")):
        owner = path.name.removeprefix(NAME_PREFIX).partition("-")[0]
        if path.is_dir() and owner_gone(owner):
            killed = IncarnationCgroup(path).kill(expected=lambda pid: False)
            reclaimed.append((path, killed))
            if killed:
                print(f"killpoint: killed what harness pid {owner.partition('.')[0]}, now gone, left in {path}: "
                      f"{'; '.join(killed)}", file=sys.stderr)
    return reclaimed


def sweep_abandoned() -> list[tuple[Path, list[str]]]:
    """``_reclaim_abandoned`` in every cgroup of every cgroup v2 mount (``killpoint clean``).

    A harness makes its incarnations' cgroups under its own cgroup, which need not
    be the cleaner's (another terminal, another service), so the whole hierarchy is
    searched; an incarnation cgroup's own subtree (the workload's) is not.
    """
    reclaimed: list[tuple[Path, list[str]]] = []
    for mount in _cgroup2_mounts():
        for folder, below, _ in os.walk(mount):
            reclaimed += _reclaim_abandoned(Path(folder))
            below[:] = [name for name in below if not name.startswith(NAME_PREFIX)]
    return reclaimed


def _cgroup2_mounts() -> list[Path]:
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    return list(dict.fromkeys(Path(fields.split()[4]) for fields, _, filesystem in
                              (mount.partition(" - ") for mount in mounts) if filesystem.split()[:1] == ["cgroup2"]))


@dataclass(frozen=True)
class IncarnationCgroup:
    path: Path

    @classmethod
    def create(cls) -> IncarnationCgroup | None:
        """A new, empty cgroup for one incarnation; None where there are none (see ``usable_parent``)."""
        parent = usable_parent()
        if parent is None:
            return None
        cgroup = cls(parent / f"{owner_prefix(NAME_PREFIX)}{next(_numbers)}")
        try:
            cgroup.path.mkdir()
        except FileExistsError:  # a gone harness had this pid and was killed before it removed it
            cgroup.discard()
            cgroup.path.mkdir()
        except OSError as error:
            raise HarnessError(f"cannot make the incarnation's cgroup {cgroup.path}: {error.strerror}") from None
        return cgroup

    def members(self) -> list[int]:
        """The pids in this cgroup (not in any the workload made below it: those die with it unnamed)."""
        try:
            return [int(pid) for pid in (self.path / "cgroup.procs").read_bytes().split()]
        except OSError as error:
            if _removed(error):
                return []
            raise

    def signal(self, *, expected: Callable[[int], bool]) -> list[str]:
        """SIGKILL everything in the cgroup at once; describe each process not ``expected``, for the evidence.

        Those described are the incarnation's leftovers. ``confirm_empty`` then
        waits for the kernel to have killed them all. Safe once the cgroup is gone.
        """
        unexpected = [_process_tree.describe_pid(pid) for pid in self.members() if not expected(pid)]
        try:
            (self.path / "cgroup.kill").write_bytes(b"1")
        except OSError as error:
            if not _removed(error):
                raise
        return [description for description in unexpected if description is not None]

    def confirm_empty(self) -> None:
        """Return once no process is left in the cgroup, and remove it; KillFailed past the confirmation deadline."""
        self._wait_until_empty()
        self._remove()

    def kill(self, *, expected: Callable[[int], bool]) -> list[str]:
        """``signal`` then ``confirm_empty``: the cgroup's processes dead and the cgroup gone; the leftovers."""
        leftovers = self.signal(expected=expected)
        self.confirm_empty()
        return leftovers

    def discard(self) -> None:
        """Kill whatever is in the cgroup and remove it, describing nothing."""
        self.kill(expected=lambda pid: True)

    @contextlib.contextmanager
    def frozen(self) -> Iterator[bool]:
        """Every process in the cgroup (and below) frozen for the body, by cgroup v2's freezer; True once all are.

        False, with nothing held, where it cannot be frozen (no ``cgroup.freeze``:
        Linux before 5.2) or is not frozen within ``FREEZE_TIMEOUT_S`` (a
        process in an uninterruptible wait). A frozen process finds nothing
        changed when it is thawed: a system call it was blocked in resumes.
        """
        try:
            events = os.open(self.path / "cgroup.events", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            yield False
            return
        try:
            try:
                (self.path / "cgroup.freeze").write_bytes(b"1")
                frozen = _wait_for_event(events, lambda said: b"frozen 1" in said, FREEZE_TIMEOUT_S)
            except OSError:  # no freezer, or its events unreadable: not known to be held
                frozen = False
            yield frozen
        finally:
            os.close(events)
            with contextlib.suppress(OSError):
                (self.path / "cgroup.freeze").write_bytes(b"0")

    def _wait_until_empty(self) -> None:
        try:
            events = os.open(self.path / "cgroup.events", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as error:
            if _removed(error):
                return
            raise
        try:
            # Removed (read as nothing) is empty too.
            if not _wait_for_event(events, lambda said: b"populated 1" not in said, _process_tree.CONFIRM_TIMEOUT_S):
                raise _process_tree.KillFailed(f"pids {self.members()} in cgroup {self.path} survived "
                                               f"SIGKILL for {_process_tree.CONFIRM_TIMEOUT_S}s")
        finally:
            os.close(events)

    def _remove(self) -> None:
        """Remove the cgroup, and first any the workload made below it (only those make rmdir fail)."""
        try:
            os.rmdir(self.path)
        except FileNotFoundError:
            return
        except OSError:
            for directory, _, _ in os.walk(self.path, topdown=False):
                with contextlib.suppress(FileNotFoundError):  # another harness's sweep removing it too
                    os.rmdir(directory)


@contextlib.contextmanager
def preexec_joiner(cgroup: IncarnationCgroup | None) -> Iterator[Callable[[], object] | None]:
    """A ``preexec_fn`` that moves the child into ``cgroup`` before it execs (None for no cgroup).

    It is one ``os.write`` on a descriptor opened here, called straight from C in the forked
    child: no Python frame of its own, no import, no lock (CPython's warning about
    ``preexec_fn`` in a process with threads is about what such a function might lock).
    """
    if cgroup is None:
        yield None
        return
    procs = os.open(cgroup.path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
    try:
        yield functools.partial(os.write, procs, b"0")  # "0": the process that writes
    finally:
        os.close(procs)


def _removed(error: OSError) -> bool:
    """The cgroup is gone: its path (ENOENT), or, removed while it was read, its open files (ENODEV).

    Two harnesses starting at once (pytest-xdist workers) both reclaim a gone
    harness's cgroup; the second reads it as the first removes it.
    """
    return isinstance(error, FileNotFoundError) or error.errno == errno.ENODEV


def _wait_for_event(events: int, done: Callable[[bytes], bool], timeout_s: float) -> bool:
    """Whether what ``cgroup.events`` (open on ``events``) says is ``done`` within ``timeout_s``."""
    poller = select.poll()
    poller.register(events, select.POLLPRI)  # the kernel signals each change of cgroup.events
    deadline = time.monotonic() + timeout_s
    while not done(_read_events(events)):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        poller.poll(remaining * 1000)
    return True


def _read_events(events: int) -> bytes:
    """cgroup.events, or nothing (not populated) once the cgroup has been removed."""
    try:
        return os.pread(events, 4096, 0)
    except OSError as error:
        if _removed(error):
            return b""
        raise
