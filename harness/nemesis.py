"""The nemesis: kills a workload incarnation for real and records what it did.

A kill is SIGKILL to the incarnation's whole process group plus every
descendant psutil can find (a child that called setsid has left the group but
not the tree). It is confirmed dead before anything is written about it: only
then does the ledger get its kill marker, so no record of the dead process can
land after the marker. The host backends kill a whole cgroup instead where they
can (``killpoint.harness.backends._cgroup``): the tree walk and the environment sweep here
are their fallback, and what the certify tools use.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from dataclasses import replace
from functools import cache
from pathlib import Path

import psutil

from killpoint import protocol
from killpoint.client import encode_record
from killpoint.errors import InfrastructureError
from killpoint.harness._safe_files import (
    UntrustedFile,
    append_own_line,
    open_regular,
    read_bounded,
)
from killpoint.harness.schedule import KillPoint

PR_SET_CHILD_SUBREAPER = 36

CONFIRM_TIMEOUT_S = 5.0


class KillFailed(InfrastructureError):
    """A process survived SIGKILL past the confirmation timeout (e.g. stuck in D state)."""


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
    found, frontier = [], [pid]
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
    children = []
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

    The caller reaps the leader its own way (``Popen.wait``, or the fork server's
    report) and then calls ``confirm_dead``.
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
    _, alive = psutil.wait_procs(tree, timeout=CONFIRM_TIMEOUT_S)
    survivors = [member for member in alive if _is_alive(member)]
    if survivors:
        raise KillFailed(f"pids {[member.pid for member in survivors]} survived SIGKILL for {CONFIRM_TIMEOUT_S}s")


def kill_tree(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the incarnation's group and tree, reap it, and confirm every member is gone."""
    tree = signal_tree(process.pid)
    process.wait()
    confirm_dead(tree)


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
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
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


def tear_journal(path: Path, permille: int) -> bool:
    """Cut the journal's last record, keeping ``permille``/1000 of its bytes (at least one, never all).

    This is what a crash in the middle of that record's write leaves. Returns
    False when there is no complete record to cut, or when the journal is not a
    regular file (a workload's symlink is never followed, let alone truncated).
    """
    try:
        data = read_bounded(path)
    except (FileNotFoundError, UntrustedFile):
        return False
    if not data.endswith(b"\n"):
        return False
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    record = data[start:-1]
    if not record:
        return False
    keep = min(max(1, len(record) * permille // 1000), len(record) - 1)
    fd = open_regular(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, start + keep)
    finally:
        os.close(fd)
    return True


def mark_kill(ledger_path: Path, incarnation: int, kill: KillPoint | None) -> bool:
    """Append the harness's kill marker to the ledger (after the kill is confirmed), on a line of its own.

    ``kill`` None means the incarnation was killed at its timeout. Returns True
    when the ledger ended in an unterminated line (which the marker would
    otherwise have been glued onto, hiding both).
    """
    marker: dict[str, object] = {"killed": incarnation}
    if kill is None:
        marker["point"] = "timeout"
    elif kill.after_s is not None:
        marker["after_s"] = kill.after_s
    else:
        marker["point"] = str(replace(kill, torn=None))
    if kill is not None and kill.torn is not None:
        marker["torn"] = kill.torn
    return append_own_line(ledger_path, encode_record(marker))
