"""Benchmark: what a power loss costs per schedule, against the same sessions with plain kills, in one run.

The demo exhaustive (30 schedules) on the fork server, once with plain kills and once with
``--power-loss`` (each run's storage on a lazy FUSE file system, mounted, dropped at the kill,
unmounted), alternating ``--rounds`` times so drift in the machine's load falls on both alike.
Prints the median seconds per schedule of each, the ratio, and the difference: the lazy file
system's price per schedule (its mount, its writes, the drop and the copies of the storage).

    .venv/bin/python bench/power_loss_sessions.py [--rounds 3] [--jobs 1]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.frontends.spec import build_spec, run_spec

DEMO = Path(__file__).resolve().parent.parent / "scenarios" / "demo.toml"


def seconds_per_schedule(power_loss: bool, jobs: int) -> float:
    """One exhaustive session's wall seconds per schedule (the golden run excluded)."""
    with tempfile.TemporaryDirectory() as runs_dir:
        spec = build_spec(load_scenario(DEMO), exhaustive=True, power_loss=power_loss, backend="forkserver",
                          jobs=jobs, runs_dir=Path(runs_dir))
        started = time.perf_counter()
        golden, outcomes = run_spec(spec)
        seconds = time.perf_counter() - started - golden.seconds
    assert all(outcome.verdict.valid for outcome in outcomes), "the reference runtime must pass"
    return seconds / len(outcomes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    plain, lazy = [], []
    for _ in range(args.rounds):
        plain.append(seconds_per_schedule(False, args.jobs))
        lazy.append(seconds_per_schedule(True, args.jobs))
    plain_s, lazy_s = statistics.median(plain), statistics.median(lazy)
    print(f"demo --exhaustive, forkserver, -j {args.jobs}, median of {args.rounds} alternating rounds:")
    print(f"  plain kills     {plain_s * 1000:8.1f} ms per schedule")
    print(f"  --power-loss    {lazy_s * 1000:8.1f} ms per schedule   ({lazy_s / plain_s:.1f}x; "
          f"+{(lazy_s - plain_s) * 1000:.1f} ms for the lazy file system)")


if __name__ == "__main__":
    main()
