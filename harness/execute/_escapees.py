"""Processes that escaped an incarnation and still hold its run's files: found through /proc, killed, described.

A workload running as root can leave every containment the backends set up: write its pid
into another cgroup's ``cgroup.procs`` (the incarnation's ``cgroup.kill`` then misses it), call
setsid and double-fork (its tree and group no longer lead to it), execve with an empty
environment (the environment sweep no longer knows it). What still ties such a process to its
run is what it holds: an open file, its working directory or root, a mapped file under the
run's folder, or the run's ``KILLPOINT_RUN_DIR`` if it kept its environment. So once an
incarnation is confirmed dead, ``RunFiles.hunt`` looks for such processes, SIGKILLs them and
confirms them dead; the incarnation records them (``Incarnation.escaped``) and the run is
unknown, for what they wrote after the kill is not the run's evidence.

Only what can be the workload's is touched: a process started since the run began, neither
this process nor any of its ancestors (the harness, pytest) nor a service the harness started in a
session of its own (``_service_sessions``), holding this run's folder (another
run's is another path), not only the lazy file systems' state in it (``.lazyfs``, which their
daemons, children of the harness, hold), and not in a session that began before the run (a
workload's process is always in a session made during the run: setsid makes a new one, none
can join an old one, so a person's ``tail -f`` on a ledger, in a terminal opened earlier, is
left alone). Each is opened as a pidfd and its start checked again before the signal, so a
pid reused meanwhile is never signalled.

The scan reads /proc/PID/stat of every process (about 20 microseconds each), then the
descriptors, working directory, root, maps and environment of those started since the run
began. A process that ends while it is read is skipped; one with a thread in an
uninterruptible wait has its maps left unread (the read would wait for a lock that thread may
hold). An escaped process that holds none of these when it is looked at (one that opens a
file, writes and closes it, working from elsewhere) is not seen; a removal of the run's folder
that it keeps filling looks again, for a while (``hunt(patience_s=...)``).
"""

from __future__ import annotations

import functools
import operator
import os
import select
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from killpoint import protocol
from killpoint.harness.execute._process_tree import (CONFIRM_TIMEOUT_S, STAT_PARENT, STAT_SESSION, STAT_START,
                                                     STAT_STATE, KillFailed, descendant_pids, describe_pid, stat_fields)
from killpoint.harness.execute._service_sessions import SERVICE_SESSIONS

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
HARNESS_STATE = ".lazyfs"  # in a run's folder: the lazy file systems' state, which their daemons hold
ENVIRONMENT_READ_BYTES = 1 << 20
HUNT_ROUNDS = 3  # a kill may free a file another escaped process then takes: look again, this many times at most
SHOWN_HOLDINGS = 4  # what a description names of what one process held; the rest is counted
POLL_INTERVAL_S = 0.002


def ticks_now() -> int:
    """Clock ticks since boot, as /proc/PID/stat counts the start of a process."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * CLOCK_TICKS_PER_S)


@dataclass(frozen=True)
class Escapee:
    """A process that held the run's files, as found; ``start`` tells it from a later process given its pid."""

    pid: int
    start: int
    held: tuple[str, ...]

    def describe(self) -> str:
        """``pid N (command line) held fd 3 workload/x.log, cwd workload``; named before it is killed."""
        shown = ", ".join(self.held[:SHOWN_HOLDINGS])
        more = f" and {len(self.held) - SHOWN_HOLDINGS} more" if len(self.held) > SHOWN_HOLDINGS else ""
        return f"{describe_pid(self.pid) or f'pid {self.pid}'} held {shown}{more}"


@dataclass(frozen=True)
class RunFiles:
    """One run's folder (``folder``, resolved) and when the run began (``since``, ``ticks_now``): what ties an
    escaped process to it. ``workload_dir`` is the run's ``KILLPOINT_RUN_DIR``."""

    folder: str
    since: int
    workload_dir: str
    first_pid: int = 1  # the first pid given out since the run began (pids are given out in turn, coming round)
    forks: int | None = None  # processes and threads started since boot, when the run began; None: unknown

    @classmethod
    def of(cls, run_dir: Path, workload_dir: Path) -> RunFiles:
        """The files of the run in ``run_dir`` (resolved, as the runner hands its paths out), beginning now."""
        since = ticks_now()
        return cls(str(run_dir), since, str(workload_dir), _last_pid() + 1, _forks())

    def hunt(self, *, patience_s: float = 0.0) -> list[str]:
        """Find, SIGKILL and confirm dead every process that can be the workload's and holds the run's files;
        describe each (KillFailed past ``CONFIRM_TIMEOUT_S``).

        With ``patience_s``, look again and again for that long until one is found (a writer that holds a file
        only while it writes one).
        """
        described: list[str] = []
        deadline = time.monotonic() + patience_s
        for _ in range(HUNT_ROUNDS):
            found = self.holders()
            while not found and time.monotonic() < deadline:
                time.sleep(POLL_INTERVAL_S)
                found = self.holders()
            if not found:
                break
            described += [escapee.describe() for escapee in found]
            described += _kill(found, self.since)
        return described

    def holders(self) -> list[Escapee]:
        """The processes that can be the workload's and hold the run's files now."""
        spared = _ancestors(os.getpid())
        may_be_new = self._pids_given_since()
        found = []
        for pid, start in self._started_since(spared, may_be_new):
            held = self._held_by(pid)
            if held and not self._in_older_session(pid, may_be_new) and not _in_service_session(pid):
                found.append(Escapee(pid, start, tuple(held)))
        return found

    def _started_since(self, spared: set[int], may_be_new: Callable[[int], bool]) -> Iterator[tuple[int, int]]:
        """Pid and start of every live process started since the run began (its pid ``may_be_new``), but those
        ``spared``."""
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in spared or not may_be_new(int(name)):
                continue
            try:
                fields = stat_fields(int(name))
            except (OSError, ValueError):  # gone meanwhile
                continue
            if int(fields[STAT_START]) >= self.since and fields[STAT_STATE] != b"Z":
                yield int(name), int(fields[STAT_START])

    def _pids_given_since(self) -> Callable[[int], bool]:
        """Whether a pid may have been given out since the run began: the ones from ``first_pid`` to the last given,
        coming round past ``pid_max``; any, if so many were given that they may have come round to ``first_pid``.

        Reading the stat of only those keeps a scan to a fraction of a millisecond on a busy machine.
        """
        last, forks, limit = _last_pid(), _forks(), _pid_max()
        if self.forks is None or forks is None or forks - self.forks >= limit // 2 or not last:
            return lambda pid: True
        if last >= self.first_pid - 1:  # not come round: fewer than half of them were given
            return lambda pid: self.first_pid <= pid <= last
        return lambda pid: pid >= self.first_pid or pid <= last

    def _in_older_session(self, pid: int, may_be_new: Callable[[int], bool]) -> bool:
        """The process's session began before the run: not the workload's.

        A session's id is its leader's pid. If the leader lives, its start tells; if it is gone (a CI runner's
        shell that started the harness in the background and exited, or an incarnation that ended), the id
        does: a session made during the run has an id given out since it began. Session 0 is the one begun at
        boot, or one whose leader is outside this PID namespace (a CI runner's sandbox starts its jobs in it):
        older than any run, and no process can setsid its way into it.
        """
        try:
            leader = int(stat_fields(pid)[STAT_SESSION])
        except (OSError, ValueError):  # gone meanwhile
            return False
        if leader <= 0:
            return True
        try:
            return int(stat_fields(leader)[STAT_START]) < self.since
        except (OSError, ValueError):
            return not may_be_new(leader)

    def _held_by(self, pid: int) -> list[str]:
        """What of the run's files process ``pid`` holds: "fd 3 workload/x", "cwd workload", "mapped x", ..."""
        held = [f"{link} {shown}" for link in ("cwd", "root") if (shown := self._shown(_read_link(pid, link)))]
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            descriptors = []
        held += [f"fd {fd} {shown}" for fd in descriptors if (shown := self._shown(_read_link(pid, f"fd/{fd}")))]
        if not _waits_uninterruptibly(pid):
            held += [f"mapped {shown}" for shown in dict.fromkeys(map(self._shown, _mapped_files(pid, self.folder))) if shown]
        if _environment_names(pid, self.workload_dir):
            held.append(f"{protocol.ENV_RUN_DIR} in its environment")
        return held

    def _shown(self, path: str | None) -> str | None:
        """``path`` relative to the run's folder if it is one of the run's files (not the harness's state), else None."""
        if path is None:
            return None
        path = path.removesuffix(" (deleted)")
        if path != self.folder and not path.startswith(self.folder + "/"):
            return None
        shown = os.path.relpath(path, self.folder)
        return None if shown == HARNESS_STATE or shown.startswith(HARNESS_STATE + "/") else shown


def _in_service_session(pid: int) -> bool:
    try:
        return int(stat_fields(pid)[STAT_SESSION]) in SERVICE_SESSIONS
    except (OSError, ValueError):  # gone meanwhile
        return False


def _kill(escapees: list[Escapee], since: int) -> list[str]:
    """SIGKILL each escapee still the process it was, and its descendants, then wait until all are gone; describe
    each descendant killed with it (KillFailed if one outlives ``CONFIRM_TIMEOUT_S``)."""
    described: list[str] = []
    pidfds: list[tuple[int, int]] = []
    for escapee in escapees:
        pidfd = _pidfd_if_started(escapee.pid, functools.partial(operator.eq, escapee.start))
        if pidfd is None:  # gone since it was found
            continue
        children = descendant_pids(escapee.pid)  # started by an escaped process, so the workload's too
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        pidfds.append((escapee.pid, pidfd))
        for child in children:
            description = describe_pid(child)
            if (pidfd := _pidfd_if_started(child, functools.partial(operator.le, since))) is not None:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                pidfds.append((child, pidfd))
                described.append(f"{description or f'pid {child}'}, a child of escaped pid {escapee.pid}")
    try:
        survivors = _wait_gone(pidfds)
    finally:
        for _, pidfd in pidfds:
            os.close(pidfd)
    if survivors:
        raise KillFailed(f"pids {survivors}, escaped from their incarnation, survived SIGKILL for {CONFIRM_TIMEOUT_S}s")
    return described


def _pidfd_if_started(pid: int, started_well: Callable[[int], bool]) -> int | None:
    """A pidfd on ``pid`` if the process has a start (in ticks) ``started_well``; None if not, or if it is gone.

    The start is read after the pidfd is open, so the pidfd is on the process checked, never a later one given its pid.
    """
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return None
    try:
        if started_well(int(stat_fields(pid)[STAT_START])):
            return pidfd
    except (OSError, ValueError):
        pass
    os.close(pidfd)
    return None


def _wait_gone(pidfds: list[tuple[int, int]]) -> list[int]:
    """Wait until every pidfd says its process ended (a pidfd is readable then); the pids still alive at the deadline."""
    poller = select.poll()
    left = {}
    for pid, pidfd in pidfds:
        poller.register(pidfd, select.POLLIN)
        left[pidfd] = pid
    deadline = time.monotonic() + CONFIRM_TIMEOUT_S
    while left and (remaining := deadline - time.monotonic()) > 0:
        for pidfd, _ in poller.poll(remaining * 1000):
            poller.unregister(pidfd)
            left.pop(pidfd, None)
    return sorted(left.values())


def _last_pid() -> int:
    """The pid given out last in this PID namespace; 0 if the kernel does not say."""
    try:
        return int(Path("/proc/sys/kernel/ns_last_pid").read_bytes())
    except (OSError, ValueError):
        return 0


def _forks() -> int | None:
    """How many processes and threads were started since boot (/proc/stat's ``processes``); None if unknown."""
    try:
        for line in Path("/proc/stat").read_bytes().splitlines():
            if line.startswith(b"processes "):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


@functools.cache
def _pid_max() -> int:
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_bytes())
    except (OSError, ValueError):
        return 1 << 22  # the kernel's largest


def _ancestors(pid: int) -> set[int]:
    """``pid`` and every process above it, up to init: never the workload's."""
    found = {pid, 1}
    while pid > 1:
        try:
            pid = int(stat_fields(pid)[STAT_PARENT])
        except (OSError, ValueError):
            break
        found.add(pid)
    return found


def _read_link(pid: int, name: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/{name}")
    except OSError:  # gone, closed meanwhile, or not ours to read
        return None


def _mapped_files(pid: int, folder: str) -> list[str]:
    """The files under ``folder`` that process ``pid`` maps (from /proc/PID/maps, read whole and searched at once)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_bytes()
    except OSError:
        return []
    if os.fsencode(folder) not in maps:
        return []
    fields = (line.split(maxsplit=5) for line in maps.splitlines())
    return [os.fsdecode(mapping[5]) for mapping in fields if len(mapping) == 6 and mapping[5].startswith(b"/")]


def _waits_uninterruptibly(pid: int) -> bool:
    """A thread of ``pid`` is in an uninterruptible wait (state D), or its threads cannot be read."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for thread in threads:
        try:
            if Path(f"/proc/{pid}/task/{thread}/stat").read_bytes().rpartition(b")")[2].split()[:1] == [b"D"]:
                return True
        except OSError:
            continue
    return False


def _environment_names(pid: int, workload_dir: str) -> bool:
    """The environment of ``pid`` says ``KILLPOINT_RUN_DIR`` is ``workload_dir`` (the first MiB of it is read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            variables = environ.read(ENVIRONMENT_READ_BYTES).split(b"\0")
    except OSError:
        return False
    return os.fsencode(f"{protocol.ENV_RUN_DIR}={workload_dir}") in variables
