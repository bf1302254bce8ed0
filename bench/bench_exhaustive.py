"""Benchmark: schedules per second of ``--exhaustive`` on the demo plan, against its floor.

The floor is measured in the same run: the cost of one bare interpreter start
(``python -c pass``), the least any subprocess incarnation can cost. Each
schedule runs about two incarnations, so the figure to watch is the cost per
incarnation as a multiple of that floor.

    .venv/bin/python bench/bench_exhaustive.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.frontends.spec import build_spec, run_spec

DEMO = Path(__file__).resolve().parent.parent / "scenarios" / "demo.toml"


def interpreter_start_seconds(samples: int) -> float:
    timings = []
    for _ in range(samples):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def exhaustive_session(scenario_path: Path) -> tuple[int, int, float]:
    """(schedules, incarnations, seconds) of one exhaustive session, golden run included.

    On the subprocess backend, whose floor is the interpreter start measured beside it.
    """
    with tempfile.TemporaryDirectory() as runs_dir:
        spec = build_spec(load_scenario(scenario_path), exhaustive=True, backend="subprocess", runs_dir=Path(runs_dir))
        started = time.perf_counter()
        _, outcomes = run_spec(spec)
        seconds = time.perf_counter() - started
    assert all(outcome.verdict.valid for outcome in outcomes), "the reference runtime must pass"
    return len(outcomes), 1 + sum(len(outcome.incarnations) for outcome in outcomes), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    floor = interpreter_start_seconds(20)
    sessions = [exhaustive_session(DEMO) for _ in range(args.repeat)]
    schedules, incarnations, seconds = min(sessions, key=lambda session: session[2])
    per_incarnation = seconds / incarnations
    print(f"floor: python -c pass              {floor * 1000:8.1f} ms (median of 20)")
    print(f"demo --exhaustive:                 {schedules} schedules, {incarnations} incarnations, "
          f"{seconds:.2f} s (best of {args.repeat})")
    print(f"schedules per second:              {schedules / seconds:8.1f}")
    print(f"cost per incarnation:              {per_incarnation * 1000:8.1f} ms "
          f"= {per_incarnation / floor:.2f} x the interpreter-start floor")


if __name__ == "__main__":
    main()
