"""Benchmark: one kill-and-restart cycle in Docker against the same cycle in a subprocess, in one run.

A cycle is what a kill costs the harness: SIGKILL the incarnation at a crash
point, confirm it dead, sweep, then start the next incarnation and let it
recover up to its first crash point (``after_decisions``), where the next kill
lands. One run per backend with a schedule of ``--cycles`` kills at
``after_decisions`` (after a first kill in c3) measures it; each recovery
incarnation is one cycle. The split shows where the time goes: starting the
workload (``launch``), its own work up to the kill point, and kill + sweep.

    .venv/bin/python bench/bench_docker.py [--cycles 15] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

from killpoint.harness.backends import Backend, Launched, make_backend
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.execute.runner import carry_out_schedule
from killpoint.harness.model import AtPoint
from killpoint.protocol import AFTER_DECISIONS, AFTER_EFFECT

DEMO = Path(__file__).resolve().parent.parent / "scenarios" / "demo.toml"
T = TypeVar("T")


class Timings(defaultdict[str, list[float]]):
    """Seconds spent in each backend call, one entry per call."""

    def __init__(self) -> None:
        super().__init__(list)

    def timed(self, name: str, call: Callable[..., T], *args: object, **kwargs: object) -> T:
        started = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            self[name].append(time.perf_counter() - started)


def instrument(backend: Backend, timings: Timings) -> Backend:
    """Time ``launch``, and each incarnation's ``kill`` and ``sweep``, by wrapping them on the objects themselves."""
    launch = backend.launch

    def timed_launch(argv: tuple[str, ...], **kwargs: object) -> Launched:
        launched = timings.timed("launch", launch, argv, **kwargs)
        for name in ("kill", "sweep"):
            setattr(launched, name, partial(timings.timed, name, getattr(launched, name)))
        return launched

    backend.launch = timed_launch  # type: ignore[method-assign]
    return backend


def cycle_seconds(backend_name: str, cycles: int) -> dict[str, float]:
    """Median seconds of one cycle, and of its parts, over ``cycles`` kill-and-restart cycles."""
    scenario = load_scenario(DEMO)
    schedule = (AtPoint(AFTER_EFFECT, "c3"), *(AtPoint(AFTER_DECISIONS),) * cycles)
    timings = Timings()
    backend = instrument(make_backend(backend_name), timings)
    try:
        with tempfile.TemporaryDirectory() as runs_dir:
            incarnations = carry_out_schedule(scenario, schedule, Path(runs_dir) / "run", backend)
    finally:
        backend.close()
    recovered = incarnations[1:cycles + 1]
    assert [incarnation.kill for incarnation in recovered] == list(schedule[1:]), "every kill must land"
    kills = [kill + sweep for kill, sweep in zip(timings["kill"][1:], timings["sweep"][1:])]
    launches = timings["launch"][1:cycles + 1]
    cycle = [incarnation.seconds for incarnation in recovered]
    return {
        "cycle": statistics.median(cycle),
        "launch": statistics.median(launches),
        "to kill point": statistics.median(c - launch - kill for c, launch, kill in zip(cycle, launches, kills)),
        "kill + sweep": statistics.median(kills),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results = {name: min((cycle_seconds(name, args.cycles) for _ in range(args.repeat)), key=lambda r: r["cycle"])
               for name in ("subprocess", "docker")}
    print(f"kill-and-restart cycle, median of {args.cycles} cycles, best of {args.repeat} runs (ms):")
    print(f"  {'':14}{'subprocess':>12}{'docker':>12}{'ratio':>8}")
    for part in results["subprocess"]:
        subprocess_ms, docker_ms = results["subprocess"][part] * 1000, results["docker"][part] * 1000
        print(f"  {part:14}{subprocess_ms:12.1f}{docker_ms:12.1f}{docker_ms / subprocess_ms:7.1f}x")
    ratio = results["docker"]["cycle"] / results["subprocess"]["cycle"]
    print(f"one cycle costs {ratio:.1f}x as much in Docker as in a subprocess")


if __name__ == "__main__":
    main()
