"""An incarnation that runs on this host (subprocess and fork-server backends): how it is killed, waited for, swept.

In its cgroup (``_cgroup``) the whole incarnation dies as one, and a leftover is a process
of the cgroup outside what the runner already knows of: the leader's process tree at a kill,
its process group once it has exited. With no cgroup, the tree walk and environment sweep
of ``_process_tree`` do what they can.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import psutil

from killpoint.harness.backends._cgroup import IncarnationCgroup, usable_parent
from killpoint.harness.execute import _process_tree


def prepare_containment() -> None:
    """Once per process: cgroups for the incarnations if this host has them, else the fallback's subreaper.

    As a subreaper the harness adopts the orphans of its incarnations, which the environment
    sweep then finds among its children. With cgroups it stays none: orphans go to init, which
    reaps them, and their cgroup still holds them until the kill.
    """
    if usable_parent() is None:
        _process_tree.become_subreaper()


@dataclass
class HostIncarnation:
    """``pid`` is the incarnation's leader; ``reap`` blocks until it is reaped and returns its exit code."""

    pid: int
    reap: Callable[[], int]
    workload_dir: str
    cgroup: IncarnationCgroup | None
    exit_code: int | None = None
    leftovers: list[str] = field(default_factory=list)
    _tree: set[int] | None = field(default=None, repr=False)
    _signalled: list[psutil.Process] = field(default_factory=list, repr=False)  # what a kill without cgroup reached

    def __repr__(self) -> str:
        state = "running" if self.exit_code is None else f"exited {self.exit_code}"
        return f"<incarnation pid {self.pid}, {state}, {self.cgroup.path if self.cgroup else 'no cgroup'}>"

    def kill(self) -> None:
        if self.cgroup is None:
            self._signalled = _process_tree.signal_tree(self.pid)
        else:
            self.leftovers += self.cgroup.signal(expected=self._in_leader_tree)

    def confirm_dead(self) -> None:
        self._reaped()  # the leader first: once it is reaped, the rest is found gone at once far more often than not
        if self.cgroup is None:
            _process_tree.confirm_dead([member for member in self._signalled if member.pid != self.pid])
        else:
            self.cgroup.confirm_empty()

    def wait(self) -> int:
        exit_code = self._reaped()
        if self.cgroup is None:
            _process_tree.kill_stragglers(self.pid)
        else:
            self.leftovers += self.cgroup.kill(expected=self._in_leader_group)
        return exit_code

    def sweep(self) -> list[str]:
        if self.cgroup is None:
            return _process_tree.sweep_leftovers(self.workload_dir)
        return self.leftovers

    def held(self) -> AbstractContextManager[bool]:
        """Its cgroup frozen; without one no incarnation can be held whole (a process may have left its tree)."""
        return self.cgroup.frozen() if self.cgroup is not None else contextlib.nullcontext(False)

    def _reaped(self) -> int:
        if self.exit_code is None:
            self.exit_code = self.reap()
        return self.exit_code

    def _in_leader_tree(self, pid: int) -> bool:
        """Whether ``pid`` is the leader or one of its descendants (walked once, only if a process besides it is left)."""
        if pid == self.pid:
            return True
        if self._tree is None:
            self._tree = set(_process_tree.descendant_pids(self.pid))
        return pid in self._tree

    def _in_leader_group(self, pid: int) -> bool:
        try:
            return os.getpgid(pid) == self.pid
        except ProcessLookupError:
            return True  # gone already: nothing to report
