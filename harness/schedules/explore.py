"""Which schedules a session runs: one mode each for given, exhaustive to depth k, random and timed.

Each mode's ``batches`` returns ``JobBatches``: a generator of job batches that may look
at the golden run, and is handed each batch's outcomes as the next is asked for.
That is how depth k+1 grows from the points actually reached at depth k, so a
point that cannot be reached is never counted as covered.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from killpoint.errors import ConfigError
from killpoint.harness.config import defaults
from killpoint.harness.config.limits import LIMITS
from killpoint.harness.model import (DELAY_PREFIX, RENDEZVOUS_KILLS, AfterDelay, BatchGenerator, Drift, GoldenRun, Job,
                                     JobBatches, KillSyntaxError, PlainKill, Plan, each_batch, parse_kill)
from killpoint.harness.schedules.schedule import (POWER_TORN_PERMILLES, RandomFaults, Schedule, call_points_of,
                                                  children, derived_seed, format_schedule, random_schedule,
                                                  torn_variants)


class ScheduleMode(Protocol):
    """How a session chooses its schedules: one generator per mode, behind this interface.

    A new mode is a frozen dataclass of its parameters with these three members;
    ``spec.build_spec`` decides which mode a session runs.
    """

    @property
    def needs_rendezvous(self) -> bool:
        """Whether its kills wait for crash points, so the workload must announce them."""

    def describe(self) -> str:
        """What the session runs, for its header line: ``exhaustive to depth 2``."""

    def batches(self, plan: Plan, drift: Drift | None = None) -> JobBatches:
        """The job batches of ``plan``; every job hands recovery incarnations ``drift``."""


@dataclass(frozen=True)
class GivenMode:
    """The one schedule given; ``index`` numbers its run (a repro token's run keeps its number)."""

    schedule: Schedule
    seed: int | None = None  # a token's seed, carried into the run's token
    index: int = 0

    @property
    def needs_rendezvous(self) -> bool:
        return any(isinstance(kill, RENDEZVOUS_KILLS) for kill in self.schedule)

    def describe(self) -> str:
        return f"kill at {format_schedule(self.schedule)}"

    def batches(self, plan: Plan, drift: Drift | None = None) -> JobBatches:
        def batches(golden: GoldenRun) -> BatchGenerator:
            yield [Job(self.index, self.schedule, self.seed, drift)]

        return batches


@dataclass(frozen=True)
class ExhaustiveMode:
    """Every schedule of up to ``depth`` kills, level by level, each kill at a point really reached."""

    depth: int = defaults.DEPTH
    torn: bool = False  # each level's kills after a journal write once more, with a torn tail
    power_loss: bool = False  # every kill a power loss (``--power-loss``): torn tails become torn-op and torn-seq
    share_prefixes: bool = True  # a level's runs save the state their kills left for the next (execute/prefixes.py)

    @property
    def needs_rendezvous(self) -> bool:
        return True

    def describe(self) -> str:
        return f"exhaustive to depth {self.depth}{' with torn tails' if self.torn else ''}"

    def _tears(self) -> tuple[int, ...]:
        """The per mille each kill after a journal write is torn with, once per torn variant of the fault."""
        if not self.torn:
            return ()
        return POWER_TORN_PERMILLES if self.power_loss else (500,)

    def batches(self, plan: Plan, drift: Drift | None = None) -> JobBatches:
        def batches(golden: GoldenRun) -> BatchGenerator:
            level: list[Schedule] = children((), golden.points)
            index = 0
            for kills in range(1, self.depth + 1):
                schedules = level + [torn for permille in self._tears()
                                     for torn in torn_variants(level, permille, anywhere=self.power_loss)]
                # Only a plain kill's run grows children (below), so only one saves its state for them.
                jobs = [Job(index + offset, schedule, drift=drift, saves_prefix=self.share_prefixes and kills < self.depth
                            and isinstance(schedule[-1].fault, PlainKill)) for offset, schedule in enumerate(schedules)]
                index += len(jobs)
                done = yield jobs
                if kills == self.depth:
                    return
                by_index = {outcome.job.index: outcome for outcome in done or ()}
                level = []
                for job in jobs:
                    outcome = by_index.get(job.index)  # None: another shard's
                    if (outcome is not None and isinstance(job.schedule[-1].fault, PlainKill)
                            and len(outcome.incarnations) > kills):
                        level += children(job.schedule, outcome.incarnations[kills].points)

        return batches


# A stretch of the crash-free run's work where a ``--timed`` kill is drawn: the point that begins it (as reached;
# None: the start of work) and its length in seconds, as the crash-free run took it.
Stretch = tuple[str | None, float]


def timed_stretches(golden: GoldenRun) -> tuple[Stretch, ...]:
    """The stretches of the crash-free run's working period between its crash points, where ``timed_delay``
    draws; empty when it announced fewer than two points (or their times were not measured).

    A stretch begins at the first time the run reached a point and ends at the
    next point: a point reached again ends the stretch before it and begins
    none, as a kill counts from a point's first arrival. Before the first point
    comes the stretch from the first journal or ledger write, if the work began
    with one.
    """
    times, points = golden.point_times_s, golden.points
    if len(times) != len(points):
        return ()
    seen: set[str] = set()
    stretches: list[Stretch] = []
    for index, point in enumerate(points[:-1]):
        if point not in seen and _times_a_kill(point):
            stretches.append((point, round(times[index + 1] - times[index], 4)))
        seen.add(point)
    if stretches and times[0] > 0:
        stretches.insert(0, (None, times[0]))
    return tuple(stretches)


def timed_delay(stretches: tuple[Stretch, ...], window_s: tuple[float, float], rng: random.Random) -> AfterDelay:
    """A ``--timed`` kill drawn from ``rng`` in the crash-free run's ``stretches`` (``timed_stretches``), else in
    its working period ``window_s``: a pure function of ``rng``'s seed and what the crash-free run recorded.

    One stretch is drawn (each equally likely) and a fraction ``f`` of it: the
    kill lands ``f`` of that stretch's length (as the crash-free run took it)
    after the incarnation first reached the point that begins the stretch,
    ``c3:after_started@0.0012``. Counted from the start of work instead, a
    delay fits only an incarnation that works as fast as the crash-free run
    did: when a load spike slowed the crash-free run (31 to 49 ms of work,
    against 7 to 22 ms unslowed), the later delays drawn from it outlasted the
    work of faster incarnations, whose runs were left untested. Counted from a
    point the incarnation reached, the kill follows the incarnation's own
    progress and overshoots only by how much shorter its one stretch is than
    the crash-free run's, so it still lands inside the work unless that stretch
    is at the very end. Each stretch weighs the same, not by its length, so
    that one a load spike lengthened in the crash-free run draws no more kills
    (nor the overshoots they would bring) than any other, and every stretch is
    killed about as often (what ``coverage`` counts). It is still a SIGKILL at
    a wall-clock moment anywhere in the stretch, with no pause at any point.

    With no stretch (a workload that announces fewer than two crash points),
    the delay is drawn in ``window_s`` and counted from the start of work.
    """
    if not stretches:
        return AfterDelay(round(rng.uniform(*window_s), 4))
    after, length = rng.choice(stretches)
    return AfterDelay(round(rng.random() * length, 4), after=after)


def _times_a_kill(point: str) -> bool:
    """Whether a timed kill can name ``point`` (as reached) and read it back from its text: a protocol point."""
    try:
        return parse_kill(f"{point}{DELAY_PREFIX}0") == AfterDelay(0.0, after=point)
    except KillSyntaxError:
        return False


def timed_window(golden: GoldenRun, upper_s: float | None = None) -> tuple[float, float]:
    """Where timed delays are drawn: ``[0, upper_s]`` when given, else the golden run's working period.

    The golden run's whole duration would include interpreter start-up and exit,
    where a kill lands before any work or never lands at all: a run that tests nothing.
    """
    if upper_s is not None:
        return 0.0, upper_s
    return golden.work_window_s or (0.0, golden.seconds)


@dataclass(frozen=True)
class RandomMode:
    """``runs`` schedules drawn from ``seed``; each run has its own derived seed, which replays it.

    Timed kills mixed in land in ``faults.timed_window_s``, else in the golden run's working period.
    """

    runs: int
    seed: int
    faults: RandomFaults = field(default_factory=RandomFaults)

    @property
    def needs_rendezvous(self) -> bool:
        return True

    def describe(self) -> str:
        return f"{self.runs} random schedules, seed {self.seed}"

    def batches(self, plan: Plan, drift: Drift | None = None) -> JobBatches:
        def batches(golden: GoldenRun) -> BatchGenerator:
            faults = replace(self.faults, timed_window_s=self.faults.timed_window_s or timed_window(golden))
            points = call_points_of(golden.points)
            yield [Job(index, random_schedule(plan, derived_seed(self.seed, index), faults, points),
                       derived_seed(self.seed, index), drift) for index in range(self.runs)]

        return batches


@dataclass(frozen=True)
class TimedMode:
    """``runs`` single timed kills at seeded delays: in ``[0, window_s]`` from the start of work, else between
    the golden run's crash points (``timed_delay``)."""

    runs: int
    seed: int
    window_s: float | None = None

    @property
    def needs_rendezvous(self) -> bool:
        return False

    def describe(self) -> str:
        return f"{self.runs} timed kills, seed {self.seed}"

    def batches(self, plan: Plan, drift: Drift | None = None) -> JobBatches:
        def batches(golden: GoldenRun) -> BatchGenerator:
            # An explicit window is drawn from the start of work, as asked; else between the crash points.
            stretches = timed_stretches(golden) if self.window_s is None else ()
            window = timed_window(golden, self.window_s)
            jobs = []
            for index in range(self.runs):
                run_seed = derived_seed(self.seed, index)
                kill = timed_delay(stretches, window, random.Random(run_seed))
                jobs.append(Job(index, (kill,), run_seed, drift))
            yield jobs

        return batches


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` -> (K, N), 1 <= K <= N <= the bound of ``limits.LIMITS["shards"]``."""
    try:
        number, _, count = text.partition("/")
        shard, shards = int(number), int(count)
    except ValueError:
        shard = shards = 0
    if not 1 <= shard <= shards <= LIMITS["shards"].high:
        raise ConfigError(f"--shard {text!r}: write K/N with 1 <= K <= N <= {LIMITS['shards'].high}, "
                          f"e.g. --shard 2/3")
    return shard, shards


def shard_of(job: Job, shards: int) -> int:
    """The shard (1..N) a job belongs to, from its first kill alone.

    Deeper schedules grow from their first kill, so a whole subtree lands in one
    shard: the shards partition the full set, whatever the depth.
    """
    return shard_of_first_kill(str(job.schedule[0]) if job.schedule else "", shards)


def shard_of_first_kill(kill: str, shards: int) -> int:
    """The shard (1..N) of every schedule whose first kill is ``kill`` (as text)."""
    return int.from_bytes(hashlib.sha256(kill.encode()).digest()[:8], "big") % shards + 1


def with_schedules(batches: JobBatches, change: Callable[[Schedule], Schedule]) -> JobBatches:
    """The same jobs with each schedule changed by ``change``: ``non_pausing`` (``--no-pause``), ``power_lost``.

    Exhaustive depth k+1 still grows from the points depth k reached: the
    outcomes it reads are those of the changed jobs, and the kills it adds are
    changed here in turn (``change`` leaves a changed kill as it is).
    """

    return each_batch(batches, lambda batch: [replace(job, schedule=change(job.schedule)) for job in batch])


def sharded(batches: JobBatches, shard: int, shards: int) -> JobBatches:
    """Only the jobs of shard ``shard`` of ``shards``."""

    return each_batch(batches, lambda batch: [job for job in batch if shard_of(job, shards) == shard])
