"""Shared prefixes: what a run's kills left starts each of the runs that kill once more.

Exhaustive depth k+1 grows every schedule (A, ..., K) into (A, ..., K, X) for
each point X its next incarnation reached, and each of those runs begins with
the same incarnations, killed at the same points, as (A, ..., K) did. What
survives a SIGKILL is what the killed incarnations left in the run directory
(the page cache survives the process), so a copy of that directory taken right
after the last strike is, to every later incarnation, the state a run of its own
would have built. A child restored from it runs only from its new kill on: at
depth 2 one incarnation in three is saved, at depth 3 two in four. The kept
evidence of a child is whole: its shared incarnations' records, output and
journal copies are in the copy, and its verdict says whose they are.

A run's state is saved only when it can stand in for the real thing:
- every kill is at a crash point (a timed or event kill lands where a clock or
  a write says, never twice alike), every one landed, and no incarnation left
  a process behind or sent the harness what was no crash point;
- the first incarnation reached the golden run's crash points, in its order, up
  to its kill: the runtime runs alike each time, so the history a shared prefix
  gives is the one a reproduction (which runs every incarnation) replays;
- the copy left nothing out (a symlink, a FIFO, a file past the size limit: the
  state could not be carried whole);
- no file of the state the next incarnation reads (its storage, the world, the
  ledger) names the run's own directory or control folder: a runtime that
  writes absolute paths into its state would find them pointing elsewhere.

A run that will grow children goes further (``harness/execute/point_snapshots.py``):
the incarnation after its last kill, whose crash points are its children's
next kills, is held still (its cgroup frozen) at each point it reaches, and
the run directory copied as a kill there would leave it. Each child then
starts from the copy of its own last kill's point, and runs only its recovery:
at depth 2 two incarnations in three are shared.

The crash-free run is the root of it all: in a sweep whose first kills pause at
their points, it is held at each point it reaches as a recovery is, so each run
of one kill starts from the copy of its point and runs only its recovery (one
incarnation in two saved at depth 1).

``--no-share-prefixes`` runs every incarnation of every run again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from killpoint.harness._safe_files import copy_tree, read_bounded, remove_tree
from killpoint.harness.judge.evidence import read_incarnations
from killpoint.harness.layout import RunPaths
from killpoint.harness.model import AfterPoint, AtPoint, Drift, Incarnation
from killpoint.harness.schedules.schedule import Schedule

STATE = "state"  # in a prefix's folder: the copy of the run directory
SOURCE = "source.json"  # in a prefix's folder: the run it was taken of
GOLDEN_RUN = -1  # the run a prefix was taken of, when it is the crash-free run


@dataclass(frozen=True)
class Prefix:
    """A saved run state: the copy of its run directory, and the index of the run it was taken of."""

    folder: Path
    run: int
    kills: int  # the kills in the state it holds
    held: bool  # the last of them is a point run ``run`` was held at (``point_snapshots``), not killed at
    owners: tuple[int, ...]  # whose each of its incarnations is: ``run``'s, or a run ``run`` itself started from

    def restore(self, run_dir: Path, *, take: bool = False) -> list[Incarnation] | None:
        """Lay ``run_dir`` out as the saved run's was, and return its incarnations (none of which named a file:
        one with a protocol problem saves no state); None (and ``run_dir`` removed) if the copy cannot be made
        whole, so that the run starts afresh.

        ``take``: the state is moved there, not copied, and the prefix is gone (its only run takes it).
        """
        if take:
            try:
                os.rename(self.folder / STATE, run_dir)
            except OSError:  # gone, or run_dir is there already: the run starts afresh
                return None
            finally:
                remove_tree(self.folder)
        elif copy_tree(self.folder / STATE, run_dir):
            remove_tree(run_dir)
            return None
        incarnations, problem = read_incarnations(RunPaths(run_dir).incarnations)
        if problem is not None:
            remove_tree(run_dir)
            return None
        return list(incarnations)

    def whose(self, incarnations: int) -> tuple[int, ...]:
        """Whose each of the state's first ``incarnations`` is: a run's index, or ``GOLDEN_RUN``."""
        return self.owners[:incarnations]

    def note(self, incarnations: int) -> str:
        """Whose the ``incarnations`` this run started from are, in its verdict's words: a state taken by a run
        that itself started from another's names both (the crash-free run's incarnation 0, run K's recovery)."""
        owners = self.whose(incarnations)
        whose = " and ".join(_whose(first, last, owner) for first, last, owner in _spans(owners))
        if owners[-1] == GOLDEN_RUN:
            return (f"{whose}, shared: this run started from the copy of its run directory taken while it was held at "
                    f"this run's first kill's point (harness/execute/point_snapshots.py); --no-share-prefixes runs it "
                    f"again")
        held = (f", the last one's copied as run-{self.run:05d}'s incarnation {incarnations - 1} was held at its "
                f"point (harness/execute/point_snapshots.py)") if self.held else " (harness/execute/prefixes.py)"
        return (f"{whose}, shared: this run started from the state {'their' if len(owners) > 1 else 'its'} kills "
                f"left{held}; --no-share-prefixes runs them again")


def _spans(owners: Sequence[int]) -> list[tuple[int, int, int]]:
    """Consecutive incarnations of one owner: (first, last, owner)."""
    spans: list[tuple[int, int, int]] = []
    for number, owner in enumerate(owners):
        if spans and spans[-1][2] == owner:
            spans[-1] = (spans[-1][0], number, owner)
        else:
            spans.append((number, number, owner))
    return spans


def _whose(first: int, last: int, owner: int) -> str:
    name = "the crash-free run's" if owner == GOLDEN_RUN else f"run-{owner:05d}'s"
    if first == last:
        return f"incarnation {first} is {name}"
    return f"incarnations {first} to {last} are {name}"


@dataclass(frozen=True)
class Prefixes:
    """A session's saved run states, in a folder of its scratch folder, one per schedule whose children start there."""

    folder: Path
    golden_points: tuple[str, ...]

    def find(self, schedule: Schedule, drift: Drift | None) -> Prefix | None:
        """The state every kill of ``schedule`` left, snapshotted by the run that reached its last kill's point
        (``point_snapshots``), else the state the run of ``schedule`` less its last kill saved, if either was."""
        for kills in (schedule, schedule[:-1]):
            if not kills:
                continue
            folder = self._folder(kills, drift)
            prefix = _read_source(folder, len(kills))
            if prefix is not None:
                return prefix
        return None

    def save(self, schedule: Schedule, drift: Drift | None, run: int, run_dir: Path,
             incarnations: Sequence[Incarnation], control_dir: Path, *, shared: tuple[int, ...] = ()) -> bool:
        """Save ``run_dir`` as its kills left it, if it can stand in for the real thing (the module's list);
        ``shared``: whose the incarnations it started from were (``Prefix.owners``)."""
        if not self._can_stand_in(schedule, incarnations):
            return False
        building = self.building(schedule, drift)
        try:
            building.mkdir(parents=True)
            if copy_state(run_dir, building, control_dir):
                self.commit(building, schedule, drift, run, shared=shared)
                return True
        except OSError:  # no room, or saved already: the children run from the start
            pass
        remove_tree(building)
        return False

    def building(self, schedule: Schedule, drift: Drift | None) -> Path:
        """Where this process builds the state of ``schedule`` before ``commit`` makes it found."""
        final = self._folder(schedule, drift)
        return final.with_name(f"{final.name}.{os.getpid()}.partial")

    def commit(self, building: Path, schedule: Schedule, drift: Drift | None, run: int, *, held: bool = False,
               shared: tuple[int, ...] = ()) -> None:
        """Make the state built in ``building`` (by run ``run``; ``held``: at a point it was held at, not killed at;
        ``shared``: whose the first incarnations were, the ones ``run`` started from) the one ``find`` finds for
        ``schedule``."""
        owners = [*shared, *(run,) * (len(schedule) - len(shared))]
        (building / SOURCE).write_text(json.dumps({"run": run, "held": held, "owners": owners}))
        os.rename(building, self._folder(schedule, drift))

    def saved(self) -> int:
        """How many states are saved (or being built) now: a cheap count, the folder's subfolders by its link count
        where the file system keeps one (tmpfs, ext4), else by listing it."""
        try:
            links = os.stat(self.folder).st_nlink
            if links >= 2:
                return links - 2
            with os.scandir(self.folder) as entries:
                return sum(1 for _ in entries)
        except FileNotFoundError:
            return 0

    def _can_stand_in(self, schedule: Schedule, incarnations: Sequence[Incarnation]) -> bool:
        if len(incarnations) != len(schedule) or not all(isinstance(kill, (AtPoint, AfterPoint)) for kill in schedule):
            return False
        if any(incarnation.killed_at != str(kill) or incarnation.protocol_problems or incarnation.leftovers
               or incarnation.escaped
               for incarnation, kill in zip(incarnations, schedule)):
            return False
        first = incarnations[0].points
        return first == self.golden_points[:len(first)]

    def _folder(self, schedule: Schedule, drift: Drift | None) -> Path:
        key = json.dumps([[str(kill) for kill in schedule], str(drift) if drift else None])
        return self.folder / hashlib.sha256(key.encode()).hexdigest()[:32]


def _read_source(folder: Path, kills: int) -> Prefix | None:
    """The state saved in ``folder`` (of ``kills`` kills), as its source.json says; None if there is none, or its
    source.json is not what ``Prefixes.commit`` writes: the scratch folder is a sibling of the workload's run
    directory, so a forged one starts the run afresh, never a traceback or a note naming what it wrote."""
    try:
        source = json.loads(read_bounded(folder / SOURCE))
    except (OSError, ValueError):
        return None
    if not isinstance(source, dict):
        return None
    run, held, owners = source.get("run"), source.get("held"), source.get("owners")
    if (type(run) is not int or type(held) is not bool or not isinstance(owners, list) or len(owners) != kills
            or any(type(owner) is not int for owner in owners)):
        return None
    return Prefix(folder, run, kills, held, tuple(owners))


def copy_state(run_dir: Path, building: Path, control_dir: Path) -> bool:
    """Copy ``run_dir`` into ``building``'s state; whether the copy is whole and no file of the state the next
    incarnation reads (its storage, the world, the ledger) names ``run_dir`` or ``control_dir``."""
    needles = (str(run_dir).encode(), str(control_dir).encode())
    layout = RunPaths(Path())  # relative: the paths a copied file is named by
    read_next, ledger = (f"{layout.workload}/", f"{layout.world}/"), str(layout.ledger)

    def names_a_folder(relative: str, data: bytes) -> str | None:
        if (relative.startswith(read_next) or relative == ledger) and any(needle in data for needle in needles):
            return "names this run's own folder, which a run started from the copy would find pointing elsewhere"
        return None

    return not copy_tree(run_dir, building / STATE, screen=names_a_folder)
