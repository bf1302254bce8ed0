"""Process trees: find every descendant of a process, SIGKILL them all, and prove them dead.

A kill is SIGKILL to a session leader's process group plus every descendant
psutil can find (a child that called setsid has left the group but not the
tree), then a wait, up to ``CONFIRM_TIMEOUT_S``, until each is gone. The host
backends kill a whole cgroup instead where they can
(``killpoint.harness.backends._cgroup``): the tree walk and the environment
sweep here are their fallback, and what the certify children are killed with.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable
from functools import cache
from pathlib import Path

import psutil

from killpoint import protocol
from killpoint.errors import InfrastructureError

PR_SET_CHILD_SUBREAPER = 36

CONFIRM_TIMEOUT_S = 5.0


class KillFailed(InfrastructureError):
    """A process survived SIGKILL past the confirmation timeout (e.g. stuck in D state)."""


def process_identity(pid: int) -> str:
    """``PID:TICKS``: the pid and when it started, in clock ticks since boot; OSError if there is no such process.

    A pid alone may be reused. psutil's create_time is no better a second half:
    it adds the boot time /proc/stat gives, which the kernel works out from the
    wall clock, so it moves whenever that clock is stepped (by NTP, or a VM
    resumed from a snapshot: 15 s in one session here), and a live process would
    look like another one. The start in ticks (/proc/PID/stat, field 22) never moves.
    """
    return f"{pid}:{int(stat_fields(pid)[STAT_START])}"


# Indexes in ``stat_fields``: /proc/PID/stat's fields 3 (state), 4 (parent), 6 (session) and 22 (start, in ticks).
STAT_STATE, STAT_PARENT, STAT_SESSION, STAT_START = 0, 1, 3, 19


def stat_fields(pid: int) -> list[bytes]:
    """/proc/PID/stat's fields after the name (``STAT_*`` index them); OSError if there is no such process."""
    stat_line = Path(f"/proc/{pid}/stat").read_bytes()
    return stat_line[stat_line.rindex(b")") + 2:].split()  # the name, in parentheses, may hold spaces


def own_identity() -> str:
    """``process_identity`` of this process, worked out once per pid (a forked worker has its own)."""
    return _identity_of(os.getpid())


@cache
def _identity_of(pid: int) -> str:
    return process_identity(pid)


def identity_running(identity: str) -> bool:
    """The process ``process_identity`` named still runs: same pid, same start, not a zombie."""
    pid, _, _ = identity.partition(":")
    try:
        return pid.isdigit() and process_identity(int(pid)) == identity and not process_gone(int(pid))
    except (OSError, ValueError, IndexError):
        return False


def process_gone(pid: int) -> bool:
    """No such process, or a dead one not yet reaped (a killed harness's worker, until init reaps it)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def process_tree(pid: int) -> list[psutil.Process]:
    """The process and all its descendants that are still there."""
    tree = []
    for member in [pid, *descendant_pids(pid)]:
        try:
            tree.append(psutil.Process(member))
        except psutil.NoSuchProcess:
            continue
    return tree


def descendant_pids(pid: int) -> list[int]:
    """Every descendant of ``pid``, walked down from it one generation at a time."""
    found: list[int] = []
    frontier = [pid]
    while frontier:
        frontier = [child for parent in frontier for child in child_pids(parent)]
        found += frontier
    return found


def child_pids(pid: int) -> list[int]:
    """The children of ``pid``.

    The kernel lists each task's children in /proc/PID/task/TID/children, so
    this costs the size of the family; psutil's ``children`` reads every process
    on the machine instead, which was a tenth of a fork-server run. Kernels
    built without those files fall back to psutil.
    """
    if not _children_files():
        try:
            return [child.pid for child in psutil.Process(pid).children()]
        except psutil.NoSuchProcess:
            return []
    children: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as listing:
                children += map(int, listing.read().split())
        except (FileNotFoundError, ProcessLookupError):  # the task ended meanwhile
            continue
    return children


@cache
def _children_files() -> bool:
    return Path(f"/proc/self/task/{os.getpid()}/children").exists()


def signal_tree(leader: int) -> list[psutil.Process]:
    """SIGKILL a session leader's process group and every descendant; return who was signalled.

    The caller reaps the leader its own way (``Popen.wait``, or a fork server's
    report) and then calls ``confirm_dead`` (``kill_tree`` does all three).
    """
    tree = process_tree(leader)
    kill_stragglers(leader)
    for member in tree:
        try:
            member.kill()
        except psutil.NoSuchProcess:
            pass
    return tree


def confirm_dead(tree: list[psutil.Process]) -> None:
    """Return once every member of ``tree`` is gone (or a zombie); raise KillFailed past CONFIRM_TIMEOUT_S."""
    _, alive = psutil.wait_procs(tree, timeout=CONFIRM_TIMEOUT_S)
    survivors = [member for member in alive if _is_alive(member)]
    if survivors:
        raise KillFailed(f"pids {[member.pid for member in survivors]} survived SIGKILL for {CONFIRM_TIMEOUT_S}s")


def kill_tree(leader: int, reap: Callable[[], int]) -> int:
    """SIGKILL ``leader``'s group and tree, reap the leader with ``reap``, confirm the rest dead; the exit code.

    The leader is proved dead by its reap (``reap`` raises KillFailed if it
    cannot say it was); every other member by ``confirm_dead``.
    """
    tree = signal_tree(leader)
    exit_code = reap()
    confirm_dead([member for member in tree if member.pid != leader])
    return exit_code


def kill_stragglers(leader: int) -> None:
    """SIGKILL whatever is left in the process group of ``leader`` (e.g. after a normal exit)."""
    try:
        os.killpg(leader, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@cache
def become_subreaper() -> bool:
    """Adopt the workload's orphans (Linux PR_SET_CHILD_SUBREAPER) so none escapes the sweep.

    A grandchild that called setsid and outlived its parent would otherwise be
    reparented to init, out of sight. Returns whether the kernel agreed.
    """
    try:
        return bool(ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def sweep_leftovers(workload_dir: str) -> list[str]:
    """SIGKILL every adopted orphan of this run's incarnations; describe each one killed.

    Orphans are recognised by the protocol environment they inherited
    (KILLPOINT_RUN_DIR), so children of anything else in this process are left alone.
    """
    killed = []
    for pid in child_pids(os.getpid()):
        try:
            child = psutil.Process(pid)
            if child.environ().get(protocol.ENV_RUN_DIR) != workload_dir:
                continue
            description = describe(child)
            child.kill()
            child.wait(CONFIRM_TIMEOUT_S)
            killed.append(description)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return killed


def describe(process: psutil.Process) -> str:
    """``pid N (command line)``: how the evidence names a leftover."""
    return f"pid {process.pid} ({' '.join(process.cmdline())[:80]})"


def describe_pid(pid: int) -> str | None:
    """``describe`` for a pid; None if it is gone."""
    try:
        return describe(psutil.Process(pid))
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def _is_alive(member: psutil.Process) -> bool:
    try:
        return member.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
