"""A run held at a crash point is copied as the kill there would leave it, and only where that copy stands in."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from killpoint.harness.execute import point_snapshots
from killpoint.harness.execute.point_snapshots import PointSnapshots, RunSharing, copy_for_every_kill
from killpoint.harness.execute.prefixes import GOLDEN_RUN, Prefixes
from killpoint.harness.execute.rendezvous import Served
from killpoint.harness.judge.evidence import read_incarnations
from killpoint.harness.layout import RunPaths
from killpoint.harness.model import AtPoint, Incarnation
from killpoint.harness.schedules.schedule import point_reached
from tests.test_prefixes import FIRST, GOLDEN, killed_run

RECOVERY = (("before_started", "c1"), ("after_decisions", None), ("after_started", "c1"), ("after_effect", "c1"))


class HeldIncarnation:
    """A launched incarnation that is held when asked (or cannot be), and says how often it was."""

    pid = 5151

    def __init__(self, can_hold: bool = True) -> None:
        self.can_hold = can_hold
        self.holds = 0

    @contextlib.contextmanager
    def held(self) -> Iterator[bool]:
        self.holds += 1
        yield self.can_hold


@contextlib.contextmanager
def tool_service(quiet: bool = True) -> Iterator[bool]:
    """The tool service's ``paused``: no call acting (``quiet``), or one acting, which no copy may be taken beside."""
    yield quiet


def watch(tmp_path: Path, launched: HeldIncarnation | None = None, quiet: bool = True,
          shared: tuple[int, ...] = (), wanted: Callable[[str], bool] = copy_for_every_kill,
          ) -> tuple[PointSnapshots, Prefixes, Path]:
    """The watch of run 7's incarnation 1, after its one kill at c1:after_started, whose state was saved
    (``shared``: whose incarnation 0 was, when run 7 started from a copy; ``wanted``: the children run)."""
    run_dir, struck = killed_run(tmp_path)
    (run_dir / "incarnation-1.stderr").write_text("recovering\n")
    prefixes = Prefixes(tmp_path / "prefixes", GOLDEN)
    sharing = RunSharing(prefixes, (FIRST,), None, 7, shared, wanted)
    assert sharing.after_last_kill(run_dir, struck, tmp_path / "control")
    snapshots = sharing.snapshots(run_dir, struck, tmp_path / "control", launched or HeldIncarnation(), 0.0, None,
                                  lambda: tool_service(quiet))
    return snapshots, prefixes, run_dir


def reach(snapshots: PointSnapshots, served: Served, run_dir: Path, points=RECOVERY) -> None:
    """The incarnation reaches ``points`` in turn, each waited at, appending a journal record at each."""
    for point, call in points:
        served.record(point_reached(point, call), 0.0)
        snapshots.on_point(point, call, served)
        with (run_dir / "workload" / "journal.jsonl").open("a") as journal:
            journal.write(json.dumps({"kind": "note", "at": point_reached(point, call)}) + "\n")


def ended(served: Served, **changes: object) -> Incarnation:
    return Incarnation(**{"number": 1, "pid": 5151, "exit_code": 0, "points": tuple(served.points), **changes})


def test_each_point_is_copied_as_the_kill_there_would_leave_it(tmp_path):
    snapshots, prefixes, run_dir = watch(tmp_path)
    served = Served()
    reach(snapshots, served, run_dir)
    assert snapshots.finish(ended(served)) == 4
    child = (FIRST, AtPoint("after_effect", "c1"))
    prefix = prefixes.find(child, None)
    assert prefix is not None and prefix.kills == 2 and prefix.held and prefix.run == 7
    state = tmp_path / "run-00031"
    incarnations = prefix.restore(state, take=True)
    assert incarnations is not None and not prefix.folder.exists()  # taken: its only run has it now
    killed = incarnations[-1]
    assert (killed.number, killed.pid, killed.exit_code, killed.killed_at) == (1, 5151, None, "c1:after_effect")
    assert killed.points == tuple(point_reached(*point) for point in RECOVERY)
    assert killed.stderr_tail == "recovering"
    journal = (state / "workload" / "journal.jsonl").read_text()
    assert journal.count('"kind": "note"') == 3  # the record written after the point is not in it
    assert RunPaths(state).journal_at_kill(1).read_text() == journal
    marker = json.loads(RunPaths(state).ledger.read_text().splitlines()[-1])
    assert marker == {"killed": 1, "point": "c1:after_effect"}
    assert "held at its point" in prefix.note(2) and "run-00007's" in prefix.note(2)
    assert read_incarnations(RunPaths(state).incarnations)[0] == tuple(incarnations)


def test_a_state_taken_by_a_run_that_started_from_the_crash_free_runs_copy_names_both_owners(tmp_path):
    """Run 7 took incarnation 0 from the crash-free run's copy: its children's notes must not call it run 7's."""
    snapshots, prefixes, run_dir = watch(tmp_path, shared=(GOLDEN_RUN,))
    served = Served()
    reach(snapshots, served, run_dir)
    assert snapshots.finish(ended(served)) == 4
    held = prefixes.find((FIRST, AtPoint("after_effect", "c1")), None)
    assert held is not None and held.whose(2) == (GOLDEN_RUN, 7)
    assert held.note(2).startswith("incarnation 0 is the crash-free run's and incarnation 1 is run-00007's, shared: "
                                   "this run started from the state their kills left, the last one's copied as "
                                   "run-00007's incarnation 1 was held at its point"), held.note(2)


def test_a_kill_at_a_point_of_no_call_first_matches_it_in_an_earlier_call(tmp_path):
    """"after_decisions" with no call kills at the first after_decisions of any call: that state, or none."""
    snapshots, prefixes, run_dir = watch(tmp_path)
    served = Served()
    reach(snapshots, served, run_dir, (("after_decisions", "c1"), ("after_decisions", None)))
    assert snapshots.finish(ended(served)) == 1
    assert prefixes.find((FIRST, AtPoint("after_decisions", "c1")), None).held
    assert not prefixes.find((FIRST, AtPoint("after_decisions")), None).held  # the saved state after kill 1


@pytest.mark.parametrize("why", ["a process left behind", "a protocol problem", "its timeout",
                                 "a point not waited at"])
def test_an_incarnation_that_did_not_end_clean_keeps_no_snapshot(tmp_path, why):
    snapshots, prefixes, run_dir = watch(tmp_path)
    served = Served()
    reach(snapshots, served, run_dir)
    changes = {"a process left behind": {"leftovers": ("5152 sleep 100",)},
               "a protocol problem": {"protocol_problems": ("control message is not a crash point: b'x'",)},
               "its timeout": {"timed_out": True, "exit_code": None}}.get(why, {})
    if why == "a point not waited at":
        served.record("c2:before_started", 0.0)  # recorded, never seen by the watch
    assert snapshots.finish(ended(served, **changes)) == 0
    assert prefixes.saved() == 1  # the state after the kill alone: no snapshot kept, none left half-built
    assert not prefixes.find((FIRST, AtPoint("after_effect", "c1")), None).held


def test_only_the_points_of_the_children_the_session_runs_are_copied(tmp_path):
    """A shard runs about 1/N of the children: a copy for another shard's would only take time and the budget."""
    launched = HeldIncarnation()
    snapshots, prefixes, run_dir = watch(tmp_path, launched, wanted=lambda kill: kill == "c1:after_effect")
    served = Served()
    reach(snapshots, served, run_dir)
    assert launched.holds == 1 and snapshots.finish(ended(served)) == 1
    assert prefixes.find((FIRST, AtPoint("after_effect", "c1")), None).held
    assert not prefixes.find((FIRST, AtPoint("before_started", "c1")), None).held  # the state after the kill


def test_an_incarnation_that_cannot_be_held_is_never_copied(tmp_path):
    launched = HeldIncarnation(can_hold=False)
    snapshots, prefixes, run_dir = watch(tmp_path, launched)
    served = Served()
    reach(snapshots, served, run_dir)
    assert launched.holds == 1  # tried once, then no more
    assert snapshots.finish(ended(served)) == 0
    assert prefixes.saved() == 1  # the state after the kill only


def test_a_run_directory_the_copy_cannot_carry_whole_stops_the_snapshots(tmp_path):
    snapshots, prefixes, run_dir = watch(tmp_path)
    served = Served()
    reach(snapshots, served, run_dir, RECOVERY[:2])
    os.mkfifo(run_dir / "world" / "files" / "pipe")  # planted while the incarnation runs
    reach(snapshots, served, run_dir, RECOVERY[2:])
    assert snapshots.finish(ended(served)) == 2
    assert prefixes.find((FIRST, AtPoint("after_effect", "c1")), None).held is False


def test_a_point_reached_after_a_protocol_problem_is_not_copied(tmp_path):
    snapshots, prefixes, run_dir = watch(tmp_path)
    served = Served()
    reach(snapshots, served, run_dir, RECOVERY[:1])
    served.protocol_problems.append("control message is not a crash point: b'x'")
    reach(snapshots, served, run_dir, RECOVERY[1:])
    assert len(snapshots.taken) == 1


def test_the_snapshots_stay_within_their_budget(tmp_path, monkeypatch):
    """Three states of the run directory's size fit: the one saved after the kill, and two snapshots."""
    snapshots, prefixes, run_dir = watch(tmp_path)
    monkeypatch.setattr(point_snapshots, "SNAPSHOT_BUDGET_BYTES", 3 * point_snapshots._size(run_dir))
    served = Served()
    reach(snapshots, served, run_dir)
    assert len(snapshots.taken) == 2 and prefixes.saved() == 3


def test_no_point_is_copied_while_a_call_of_the_tool_service_acts(tmp_path):
    """A kill would let the call finish (or cut its latency short) first: a copy taken beside it stands in for
    neither, so those children run for real."""
    launched = HeldIncarnation()
    snapshots, prefixes, run_dir = watch(tmp_path, launched, quiet=False)
    served = Served()
    reach(snapshots, served, run_dir)
    assert snapshots.finish(ended(served)) == 0 and launched.holds == 4
    assert prefixes.find((FIRST, AtPoint("after_effect", "c1")), None).held is False  # the kill's own state only
