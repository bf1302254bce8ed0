"""A run held at each crash point of its recovery: the states its children's last kills would leave, taken once.

Exhaustive depth k+1 kills each point X that run (A, ..., K)'s incarnation k,
the one after its last kill, reached: run (A, ..., K, X) starts from the state
(A, ..., K) left (``harness/execute/prefixes.py``) and runs incarnation k again up to
X, only to be killed there. What that kill leaves is the run directory as it is
at X, plus what the nemesis writes after a kill (the ledger's kill marker, the
journal's and store's copies). So (A, ..., K)'s own incarnation k is made to
wait at every point (``$KILLPOINT_ARMED`` unset, as in protocol v1) and, at the
first point each child's kill would land at, is held still, every process of
it at once (``Launched.held``: its cgroup frozen), while its run directory is
copied and the nemesis's writings are done to the copy. The copy is then what
the child's kill at X would have left: the child takes it and runs only its
recovery.

The crash-free run is held the same way (k = 0, the schedule empty) when the
session's first kills pause at their points: each run of one kill then runs
only its recovery.

A snapshot is kept only if it stands in for the kill exactly:
- the state before incarnation k could (``Prefixes.save`` saved it, it was
  itself a snapshot taken whole, or k = 0: the fresh run directory);
- the whole incarnation could be held (a cgroup to freeze), no call of the
  harness's tool service was acting (a kill would let it finish first, or cut
  its latency short; one arriving waits for the copy), the copy is whole and
  names neither the run's folder nor its control folder, and the nemesis's
  writings raised no problem;
- incarnation k ended with no process left behind, no protocol problem, no
  timeout, and every point it reached was one it waited at (so none was
  reached while the copy was made, and the points are in the order reached);
- X is the first point of the incarnation the child's kill matches (a kill at
  a point with no call matches that point in any call).
Every other child runs incarnation k itself, as before. The states are held in
the session's scratch folder (RAM) within ``SNAPSHOT_BUDGET_BYTES``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from killpoint.harness._safe_files import COPY_MAX_FILES, remove_tree
from killpoint.harness.backends import Launched
from killpoint.harness.execute.prefixes import GOLDEN_RUN, STATE, Prefixes, copy_state
from killpoint.harness.execute.rendezvous import Served
from killpoint.harness.execute.runner import save_incarnations, stderr_tail, strike_sites
from killpoint.harness.faults import nemesis
from killpoint.harness.layout import RunPaths
from killpoint.harness.model import AtPoint, Drift, Incarnation
from killpoint.harness.schedules.schedule import Schedule, parse_point_reached, point_reached

# The states snapshots may hold at once, in the scratch folder's RAM: a sweep past it runs the rest for real.
SNAPSHOT_BUDGET_BYTES = 256 * 1024 * 1024


def copy_for_every_kill(kill: str) -> bool:
    """A child of every point: a session that runs them all (``RunSharing.wanted``)."""
    return True


@dataclass
class PointSnapshots:
    """The snapshots one run takes of its recovery incarnation (``number``, after its last kill), one per point."""

    prefixes: Prefixes
    schedule: Schedule  # the run's, every kill struck
    drift: Drift | None
    run: int  # the run's index: the children's notes name it
    run_dir: Path
    control_dir: Path
    struck: list[Incarnation]  # incarnations 0 to number - 1
    launched: Launched
    started: float  # monotonic, before the launch: what the incarnation's seconds count from
    store: tuple[str, ...] | None  # the runtime's own store's files (a ``[journal]`` scenario), copied at a kill
    paused: Callable[[], AbstractContextManager[bool]]  # the tool service's calls held off (``ToolServices.paused``)
    shared: tuple[int, ...] = ()  # whose the incarnations it started from were (``Prefix.owners``)
    wanted: Callable[[str], bool] = copy_for_every_kill  # the children's last kills (as text) this session runs
    reached: list[tuple[str, str | None]] = field(default_factory=list)  # every point waited at: (point, call)
    taken: dict[str, tuple[int, Path]] = field(default_factory=dict)  # point reached -> (its index, its building)
    stopped: bool = False  # one could not be taken whole: none after it is

    @property
    def number(self) -> int:
        return len(self.struck)

    def on_point(self, point: str, call: str | None, served: Served) -> None:
        """At a point the incarnation waits at: snapshot it, if it is the first a child's kill would land at."""
        self.reached.append((point, call))
        recorded = served.points[-1]
        if self.stopped or served.protocol_problems or recorded in self.taken:
            return
        kill = parse_point_reached(recorded)
        if not kill.matches(point, call) or not self.wanted(str(kill)) or not self._room():
            return
        building = self.prefixes.building(self.schedule + (kill,), self.drift)
        with self.launched.held() as held, self.paused() as quiet:
            if held and not quiet:  # a tool call acting: this point's children run for real
                return
            whole = held and self._copy(building, kill, served)
        if not whole:
            remove_tree(building)
            self.stopped = True
            return
        self.taken[recorded] = (len(self.reached) - 1, building)

    def finish(self, incarnation: Incarnation) -> int:
        """Keep the snapshots that stand in for their kills (the module's list), now that the incarnation ended;
        how many were kept."""
        ended_clean = (not incarnation.leftovers and not incarnation.protocol_problems and not incarnation.timed_out
                       and not incarnation.escaped
                       and incarnation.points == tuple(point_reached(point, call) for point, call in self.reached))
        kept = 0
        for recorded, (index, building) in self.taken.items():
            kill = parse_point_reached(recorded)
            first = next(number for number, reached in enumerate(self.reached) if kill.matches(*reached))
            if ended_clean and first == index:
                try:
                    self.prefixes.commit(building, self.schedule + (kill,), self.drift, self.run, held=True,
                                         shared=self.shared)
                    kept += 1
                    continue
                except OSError:  # saved already (never, in one session): the child runs for real
                    pass
            remove_tree(building)
        self.taken.clear()
        return kept

    def _room(self) -> bool:
        """The budget holds one more state (the states of every run of the session count, each as large as the run
        directory is now: it is measured at every point, as the workload may grow it between two)."""
        try:
            allowed = SNAPSHOT_BUDGET_BYTES // max(1, _size(self.run_dir))
        except OSError:  # a folder gone or unreadable as it is listed: no copy of it would be whole
            return False
        return self.prefixes.saved() < allowed

    def _copy(self, building: Path, kill: AtPoint, served: Served) -> bool:
        """Copy the run directory held at ``kill``'s point into ``building`` as the kill would have left it."""
        try:
            building.mkdir(parents=True)
            if not copy_state(self.run_dir, building, self.control_dir):
                return False
            state = building / STATE
            strike = nemesis.record_strike(kill, incarnation=self.number, leftovers=(),
                                           sites=strike_sites(state, self.store, self.number))
            if strike.problems:
                return False
            killed = Incarnation(
                number=self.number, pid=self.launched.pid, exit_code=None, killed_at=strike.point, timed_out=False,
                # Its own time: a kill here would have ended it with none of the earlier holds in it.
                points=tuple(served.points), seconds=round(time.monotonic() - self.started - served.held_s, 4),
                stderr_tail=stderr_tail(state / f"incarnation-{self.number}.stderr"),
                catalogue_drift=str(self.drift) if self.drift is not None and self.number > 0 else None)
            save_incarnations(RunPaths(state).incarnations, [*self.struck, killed])
        except OSError:  # no room, or the copy's own files refused: this state is not taken
            return False
        return True


def _size(folder: Path) -> int:
    """Bytes ``folder`` holds on its file system (whole blocks, as tmpfs spends its RAM), counted over at most
    ``COPY_MAX_FILES`` entries (past them no copy is whole anyway), iteratively: the workload may nest deep."""
    total = counted = 0
    below = [str(folder)]
    while below and counted < COPY_MAX_FILES:
        with os.scandir(below.pop()) as entries:
            for entry in entries:
                counted += 1
                total += entry.stat(follow_symlinks=False).st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    below.append(entry.path)
    return total


@dataclass(frozen=True)
class RunSharing:
    """What run ``run`` of ``schedule`` saves for the runs that kill once more (``runner.Sharing``)."""

    prefixes: Prefixes
    schedule: Schedule
    drift: Drift | None
    run: int
    shared: tuple[int, ...] = ()  # whose the incarnations it started from were (``Prefix.owners``)
    wanted: Callable[[str], bool] = copy_for_every_kill  # the children's last kills (as text) this session runs

    @classmethod
    def of_golden(cls, prefixes: Prefixes, wanted: Callable[[str], bool] = copy_for_every_kill) -> RunSharing:
        """The crash-free run's, in a session whose first kills pause at their points (the session decides), held
        only where a first kill is ``wanted`` (a shard's: another shard's runs would never take its copy)."""
        return cls(prefixes, (), None, GOLDEN_RUN, wanted=wanted)

    @property
    def holds_points(self) -> bool:
        """Its children's last kills pause at their points, as its own did: a ``/now`` kill (``--no-pause``) is
        the workload's own, a few instructions past the point, which no copy of a held point stands in for.
        The crash-free run's children are held for only when their kills pause (``of_golden``)."""
        if not self.schedule:
            return True
        last = self.schedule[-1]
        return isinstance(last, AtPoint) and not last.now

    def after_last_kill(self, run_dir: Path, incarnations: list[Incarnation], control_dir: Path) -> bool:
        return self.prefixes.save(self.schedule, self.drift, self.run, run_dir, incarnations, control_dir,
                                  shared=self.shared)

    def snapshots(self, run_dir: Path, incarnations: list[Incarnation], control_dir: Path, launched: Launched,
                  started: float, store: tuple[str, ...] | None,
                  paused: Callable[[], AbstractContextManager[bool]]) -> PointSnapshots:
        return PointSnapshots(self.prefixes, self.schedule, self.drift, self.run, run_dir, control_dir,
                              list(incarnations), launched, started, store, paused, shared=self.shared,
                              wanted=self.wanted)
