"""Which schedules a session runs: exhaustive to depth k, random, timed, or given.

Each function returns ``JobBatches``: a generator of job batches that may look
at the golden run and at every outcome so far. That is how depth k+1 grows
from the points actually reached at depth k, so a point that cannot be reached
is never counted as covered.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator

from harness.errors import ConfigError
from harness.runner import Drift, GoldenRun
from harness.scenario import Plan
from harness.schedule import KillPoint, RandomFaults, Schedule, children, derived_seed, random_schedule, torn_variants
from harness.session import Job, JobBatches, RunOutcome


def exhaustive_batches(depth: int, *, torn: bool = False, drift: Drift | None = None) -> JobBatches:
    """Every schedule of up to ``depth`` kills, level by level, each kill at a point really reached."""

    def batches(golden: GoldenRun, outcomes: list[RunOutcome]) -> Iterator[list[Job]]:
        level: list[Schedule] = children((), golden.points)
        index = 0
        for kills in range(1, depth + 1):
            schedules = level + (torn_variants(level) if torn else [])
            jobs = [Job(index + offset, schedule, drift=drift) for offset, schedule in enumerate(schedules)]
            index += len(jobs)
            yield jobs
            if kills == depth:
                return
            by_index = {outcome.job.index: outcome for outcome in outcomes}
            level = []
            for job in jobs:
                outcome = by_index.get(job.index)  # None: another shard's
                if outcome is not None and job.schedule[-1].torn is None and len(outcome.incarnations) > kills:
                    level += children(job.schedule, outcome.incarnations[kills].points)

    return batches


def random_batches(plan: Plan, seed: int, runs: int, faults: RandomFaults, *, drift: Drift | None = None,
                   window_from_golden: bool = False) -> JobBatches:
    """``runs`` schedules drawn from ``seed``; each run has its own derived seed, which replays it."""

    def batches(golden: GoldenRun, outcomes: list[RunOutcome]) -> Iterator[list[Job]]:
        run_faults = faults
        if window_from_golden:
            run_faults = RandomFaults(faults.max_kills, faults.torn_rate, faults.timed_rate, golden.seconds)
        yield [Job(index, random_schedule(plan, derived_seed(seed, index), run_faults), derived_seed(seed, index), drift)
               for index in range(runs)]

    return batches


def timed_batches(seed: int, runs: int, window_s: float | None, *, drift: Drift | None = None) -> JobBatches:
    """``runs`` single timed kills at seeded delays within the window (default: the golden run's duration)."""

    def batches(golden: GoldenRun, outcomes: list[RunOutcome]) -> Iterator[list[Job]]:
        window = window_s if window_s is not None else golden.seconds
        jobs = []
        for index in range(runs):
            run_seed = derived_seed(seed, index)
            delay = round(random.Random(run_seed).uniform(0, window), 4)
            jobs.append(Job(index, (KillPoint(after_s=delay),), run_seed, drift))
        yield jobs

    return batches


def given_batches(schedule: Schedule, *, seed: int | None = None, drift: Drift | None = None) -> JobBatches:
    def batches(golden: GoldenRun, outcomes: list[RunOutcome]) -> Iterator[list[Job]]:
        yield [Job(0, schedule, seed, drift)]

    return batches


def coverage(outcomes: list[RunOutcome]) -> dict[int, dict[str, int]]:
    """Kills actually made, per incarnation: {incarnation: {"c3:after_effect": count}}."""
    covered: dict[int, dict[str, int]] = {}
    for outcome in outcomes:
        for incarnation in outcome.incarnations:
            if not incarnation.killed_at or incarnation.killed_at == "timeout":
                continue
            trigger = incarnation.killed_at.split("/")[0]
            if trigger[:1] == "@" or trigger.startswith(("ledger:", "journal:")) or trigger.endswith("+"):
                # Not a rendezvous kill: it covered the stretch after the last point announced.
                trigger = incarnation.points[-1] + "+" if incarnation.points else "start+"
            per = covered.setdefault(incarnation.number, {})
            per[trigger] = per.get(trigger, 0) + 1
    return covered


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` -> (K, N), 1 <= K <= N."""
    try:
        number, _, count = text.partition("/")
        shard, shards = int(number), int(count)
    except ValueError:
        shard = shards = 0
    if not 1 <= shard <= shards:
        raise ConfigError(f"--shard {text!r}: write K/N with 1 <= K <= N, e.g. --shard 2/3")
    return shard, shards


def shard_of(job: Job, shards: int) -> int:
    """The shard (1..N) a job belongs to, from its first kill alone.

    Deeper schedules grow from their first kill, so a whole subtree lands in one
    shard: the shards partition the full set, whatever the depth.
    """
    root = str(job.schedule[0]) if job.schedule else ""
    return int.from_bytes(hashlib.sha256(root.encode()).digest()[:8], "big") % shards + 1


def sharded(batches: JobBatches, shard: int, shards: int) -> JobBatches:
    """Only the jobs of shard ``shard`` of ``shards``."""

    def filtered(golden: GoldenRun, outcomes: list[RunOutcome]) -> Iterator[list[Job]]:
        for batch in batches(golden, outcomes):
            yield [job for job in batch if shard_of(job, shards) == shard]

    return filtered
