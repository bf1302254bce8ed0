"""Where ``--timed`` kills are drawn: in a stretch between two of the crash-free run's crash points, counted from
the incarnation's own arrival at the first of them, so a kill lands in the same stretch of an incarnation that
works faster than a crash-free run a load spike slowed (issue 28, item 10).

Pure functions of a recorded timeline: each kill's moment is what the rendezvous computes
(``rendezvous._timed_kill_at``) for an incarnation that reached its points at the times given. No process, no clock.
"""

from __future__ import annotations

import os
from itertools import accumulate
from pathlib import Path

from killpoint import protocol
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.execute.rendezvous import Served, _timed_kill_at
from killpoint.harness.execute.runner import CpuWaits, work_period
from killpoint.harness.model import AfterDelay, GoldenRun
from killpoint.harness.schedules.explore import TimedMode, timed_stretches
from tests.helpers import DEMO

PLAN = load_scenario(DEMO).plan
POINTS = tuple(f"{call}:{point}" for call in PLAN.call_ids for point in protocol.CALL_POINTS)  # the demo's 30
STEP_S = 0.0005  # one stretch of the demo's work, unslowed
EPSILON_S = 1e-9


def timeline(step_s: float = STEP_S, *, spike_in: int | None = None, spike_s: float = 0.0) -> tuple[float, ...]:
    """Each point's time from the start of work: stretches of ``step_s``, stretch ``spike_in`` longer by ``spike_s``."""
    stretches = [step_s + (spike_s if index == spike_in else 0.0) for index in range(len(POINTS) - 1)]
    return tuple(round(time, 6) for time in accumulate(stretches, initial=0.0))


def golden(times: tuple[float, ...], points: tuple[str, ...] = POINTS) -> GoldenRun:
    return GoldenRun(Path("golden"), {}, {}, points, 0.2, work_window_s=(0.0, times[-1]), point_times_s=times)


def drawn(run: GoldenRun, runs: int = 200, seed: int = 7, window_s: float | None = None) -> list[AfterDelay]:
    (jobs,) = list(TimedMode(runs, seed, window_s).batches(PLAN)(run))
    kills = [kill for job in jobs for kill in job.schedule]
    assert all(isinstance(kill, AfterDelay) for kill in kills)
    return kills  # type: ignore[return-value]


def moment(kill: AfterDelay, times: tuple[float, ...]) -> float | None:
    """When the kill lands in an incarnation that reached the demo's points at ``times``."""
    return _timed_kill_at(kill, Served(points=list(POINTS), point_times=list(times)), None)


def test_a_crash_free_run_slowed_by_a_load_spike_places_kills_inside_a_faster_incarnations_work():
    """The crash-free run lost 30 ms to a load spike in its 9th stretch; an incarnation does the same work in 14.5 ms.

    Delays counted from the start of work and drawn in the crash-free run's 44.5 ms landed in that
    incarnation's work about a third of the time. Counted from the point that begins the drawn stretch,
    every kill lands in the stretch it was drawn in, but those drawn in the slowed stretch itself.
    """
    spiked, faster = timeline(spike_in=8, spike_s=0.03), timeline()
    kills = drawn(golden(spiked))
    landed = [kill for kill in kills if (at := moment(kill, faster)) is not None and at < faster[-1]]
    assert len(landed) >= 0.9 * len(kills), kills
    for kill in kills:
        if kill.after != POINTS[8]:
            index = POINTS.index(kill.after)
            assert faster[index] <= moment(kill, faster) <= faster[index + 1] + EPSILON_S, kill
    # Each stretch weighs the same: the slowed one draws no more kills than its share.
    assert sum(kill.after == POINTS[8] for kill in kills) <= 3 * len(kills) // (len(POINTS) - 1)


def test_a_kill_lands_in_its_stretch_of_an_incarnation_slower_than_the_crash_free_run():
    kills, slower = drawn(golden(timeline())), timeline(3 * STEP_S)
    for kill in kills:
        index = POINTS.index(kill.after)
        assert slower[index] <= moment(kill, slower) < slower[index + 1], kill


def test_the_same_seed_and_timeline_draw_the_same_kills_and_every_stretch_is_drawn():
    run = golden(timeline(spike_in=3, spike_s=0.01))
    kills = drawn(run, runs=1000)
    assert kills == drawn(run, runs=1000)
    assert kills != drawn(run, runs=1000, seed=8)
    assert {kill.after for kill in kills} == set(POINTS[:-1])
    assert all(0 <= kill.seconds <= length for kill in kills
               for after, length in timed_stretches(run) if after == kill.after)


def test_a_point_reached_again_begins_no_stretch_of_its_own():
    points = ("c1:before_started", "c1:after_started", "c1:before_started", "c1:after_finished")
    run = golden((0.0, 0.001, 0.002, 0.010), points)
    assert timed_stretches(run) == (("c1:before_started", 0.001), ("c1:after_started", 0.001))
    assert {kill.after for kill in drawn(run)} == {"c1:before_started", "c1:after_started"}


def test_work_that_began_with_a_write_before_the_first_point_is_a_stretch_counted_from_the_start_of_work():
    run = golden(tuple(time + 0.002 for time in timeline()))
    assert timed_stretches(run)[0] == (None, 0.002)
    assert any(kill.after is None for kill in drawn(run, runs=1000))


def test_with_no_stretch_between_two_points_the_delay_counts_from_the_start_of_work_in_the_working_period():
    silent = GoldenRun(Path("golden"), {}, {}, (), 0.5, work_window_s=(0.0, 0.04))
    one_point = GoldenRun(Path("golden"), {}, {}, POINTS[:1], 0.5, work_window_s=(0.0, 0.04), point_times_s=(0.0,))
    unmeasured = GoldenRun(Path("golden"), {}, {}, POINTS, 0.5, work_window_s=(0.0, 0.04))  # a merged report's
    for run in (silent, one_point, unmeasured):
        kills = drawn(run)
        assert all(kill.after is None and 0 <= kill.seconds <= 0.04 for kill in kills)
        assert max(kill.seconds for kill in kills) > 0.03


def test_an_explicit_timed_window_still_counts_from_the_start_of_work():
    kills = drawn(golden(timeline()), window_s=0.05)
    assert all(kill.after is None and 0 <= kill.seconds <= 0.05 for kill in kills)


def test_a_kill_counted_from_a_point_not_reached_yet_has_no_moment():
    kill = AfterDelay(0.001, after="c3:after_started")
    reached = Served(points=["c1:before_started", "c1:after_started"], point_times=[10.0, 10.5])
    assert _timed_kill_at(kill, reached, None) is None
    reached.record("c3:after_started", 11.0)
    assert _timed_kill_at(kill, reached, None) == 11.001


def test_the_crash_free_runs_point_times_leave_out_its_wait_for_a_cpu():
    """A stretch of 0.5 ms of work took 8.5 ms beside CPU hogs, 8 of them waiting for a CPU: its own length is 0.5 ms.
    Where the wait was not read (the last point), the wall time is all that is known."""
    served = Served(points=list(POINTS[:4]), point_times=[100.0, 100.0005, 100.009, 100.0095])
    waits = CpuWaits(pid=0, at_points={0: 1.0, 1: 1.0, 2: 1.008}, reading_s={0: 0.0001})
    period = work_period(served, None, waits)
    assert period is not None and period.window_s == (0.0, 0.0095)
    # The first stretch less the 0.1 ms the workload waited for the harness to read its wait at the first point.
    assert period.point_times_s == (0.0, 0.0004, 0.0009, 0.0014)
    assert work_period(served, None).point_times_s == (0.0, 0.0005, 0.009, 0.0095)  # nothing read: wall time


def test_the_wait_for_a_cpu_is_read_from_the_process_schedstat_and_skipped_where_it_cannot_be():
    reached = Served(points=[POINTS[0]], point_times=[1.0])
    this, gone = CpuWaits(os.getpid()), CpuWaits(2**22 + 1)  # above the largest pid Linux gives
    this.on_point("before_started", "c1", reached)
    gone.on_point("before_started", "c1", reached)
    assert list(this.at_points) == [0] and this.at_points[0] >= 0 and gone.at_points == {}
