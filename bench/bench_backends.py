"""Benchmark: schedules per second per backend against the physical floors, in one run.

    .venv/bin/python bench/bench_backends.py [--docker] [--write-doc]

Measures, side by side on this machine:
- schedules/s of ``--exhaustive --depth 2`` on the demo plan per backend at -j 1 and -j 2
  (docker, when an engine answers and --docker is given, on the first 60 schedules only);
- the floors: fork()+wait of a warm interpreter, a bare interpreter start, a bare
  ``docker run`` of a trivial container, an fsync;
- the rendezvous round trip per crash point;
- each backend's cost per incarnation as a multiple of its floor;
- cost against plan length at depth 1 (5, 10, 20, 40 calls).
With --write-doc the table goes to docs/performance.md with the command that made it.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from harness import explore
from harness.backends._engine import DEFAULT_IMAGE
from harness.runner import GoldenRun
from harness.scenario import Plan, PlannedCall, Scenario, load_scenario
from harness.session import Job, JobBatches, RunOutcome, run_session

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "scenarios" / "demo.toml"
DOC = ROOT / "docs" / "performance.md"


def median_seconds(action, samples: int) -> float:
    timings = []
    for _ in range(samples):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def fork_floor() -> float:
    def fork_and_wait() -> None:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    return median_seconds(fork_and_wait, 200)


def interpreter_floor() -> float:
    return median_seconds(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), 20)


def docker_floor(image: str) -> float | None:
    """``docker run --rm`` of ``true``; the host's /usr is mounted as the backend mounts it for its image."""
    command = ["docker", "run", "--rm", "--network", "none", "-v", "/usr:/usr:ro", image, "/usr/bin/true"]
    try:
        subprocess.run(command, check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return median_seconds(lambda: subprocess.run(command, check=True, capture_output=True), 5)


def fsync_floor(directory: Path) -> float:
    fd = os.open(directory / "fsync.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        return median_seconds(lambda: (os.write(fd, b"x" * 100 + b"\n"), os.fsync(fd)), 200)
    finally:
        os.close(fd)


RENDEZVOUS_CLIENT = """
import sys, time
from harness.client import Rendezvous
rendezvous = Rendezvous(sys.argv[1], 0)
rendezvous.point("warm-up")
started = time.perf_counter()
for _ in range(int(sys.argv[2])):
    rendezvous.point("after_started", call="c1", op="t-op1")
print((time.perf_counter() - started) / int(sys.argv[2]))
"""


def rendezvous_round_trip(directory: Path, points: int = 5000) -> float:
    from harness.rendezvous import RendezvousServer

    server = RendezvousServer(directory / "rv.sock")
    child = subprocess.Popen([sys.executable, "-c", RENDEZVOUS_CLIENT, str(server.path), str(points)],
                             stdout=subprocess.PIPE, text=True)
    server.serve(child.pid, None, started=time.monotonic(), deadline=time.monotonic() + 60)
    seconds = float(child.communicate()[0])
    server.close()
    return seconds


def session_rate(scenario: Scenario, batches: JobBatches, backend: str, jobs: int) -> tuple[int, int, float]:
    """(schedules, incarnations, seconds) for one session, golden run excluded from neither."""
    with tempfile.TemporaryDirectory(prefix="killpoint-bench-") as runs_dir:
        started = time.perf_counter()
        _, outcomes = run_session(scenario, batches, Path(runs_dir) / "s", backend_name=backend, jobs=jobs)
        seconds = time.perf_counter() - started
    assert all(outcome.verdict.valid for outcome in outcomes), f"reference runtime failed on {backend}"
    return len(outcomes), 1 + sum(len(outcome.incarnations) for outcome in outcomes), seconds


def first(batches: JobBatches, count: int) -> JobBatches:
    def limited(golden: GoldenRun, outcomes: list[RunOutcome]) -> Iterator[list[Job]]:
        remaining = count
        for batch in batches(golden, outcomes):
            yield batch[:remaining]
            remaining -= len(batch[:remaining])
            if remaining <= 0:
                return

    return limited


def long_plan(scenario: Scenario, calls: int) -> Scenario:
    cycle = itertools.cycle(scenario.plan.calls)
    planned = tuple(PlannedCall(f"c{index + 1}", call.tool, call.args) for index, call in zip(range(calls), cycle))
    return replace(scenario, plan=Plan("long", planned))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docker", action="store_true", help="include the docker backend (needs an engine)")
    parser.add_argument("--image", default=DEFAULT_IMAGE, help="for the docker floor (default: the backend's own)")
    parser.add_argument("--write-doc", action="store_true")
    args = parser.parse_args()
    demo = load_scenario(DEMO)
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="killpoint-floors-") as scratch:
        floors = {"fork": fork_floor(), "interpreter": interpreter_floor(), "fsync": fsync_floor(Path(scratch)),
                  "rendezvous": rendezvous_round_trip(Path(scratch))}
    floors["docker"] = docker_floor(args.image) if args.docker else None
    floor_of = {"forkserver": floors["fork"], "subprocess": floors["interpreter"], "docker": floors["docker"]}
    backends = ["forkserver", "subprocess"] + (["docker"] if floors["docker"] else [])
    rows.append("| backend | -j | schedules | incarnations | seconds | schedules/s | per incarnation | floor | × floor |")
    rows.append("|---|---|---|---|---|---|---|---|---|")
    for backend, jobs in itertools.product(backends, (1, 2)):
        batches = explore.exhaustive_batches(2)
        if backend == "docker":
            batches = first(batches, 60)
        schedules, incarnations, seconds = session_rate(demo, batches, backend, jobs)
        per = seconds * jobs / incarnations
        rows.append(f"| {backend} | {jobs} | {schedules} | {incarnations} | {seconds:.1f} | {schedules / seconds:.1f} | "
                    f"{per * 1000:.1f} ms | {floor_of[backend] * 1000:.1f} ms | {per / floor_of[backend]:.1f} |")
        print(rows[-1], flush=True)
    scaling = ["| calls | schedules (depth 1) | seconds | ms per schedule |", "|---|---|---|---|"]
    for calls in (5, 10, 20, 40):
        schedules, _, seconds = session_rate(long_plan(demo, calls), explore.exhaustive_batches(1), "forkserver", 2)
        scaling.append(f"| {calls} | {schedules} | {seconds:.1f} | {seconds / schedules * 1000:.1f} |")
        print(scaling[-1], flush=True)
    floor_lines = [
        f"- fork()+wait of a warm interpreter: {floors['fork'] * 1000:.2f} ms",
        f"- bare interpreter start (`python -c pass`): {floors['interpreter'] * 1000:.1f} ms",
        f"- bare `docker run` of a trivial container: "
        + (f"{floors['docker'] * 1000:.0f} ms" if floors["docker"] else "not measured (no engine, or --docker not given)"),
        f"- fsync of one journal record: {floors['fsync'] * 1000:.3f} ms",
        f"- rendezvous round trip per crash point: {floors['rendezvous'] * 1e6:.0f} µs",
    ]
    print("\n".join(floor_lines))
    if args.write_doc:
        command = "python bench/bench_backends.py" + (" --docker" if args.docker else "") + " --write-doc"
        DOC.write_text("\n".join([
            "# Performance", "", f"Measured on this project's 2-core machine with `{command}`.", "",
            "## Floors", "", *floor_lines, "",
            "## Exhaustive depth 2 on the demo plan", "",
            "Cost per incarnation is wall time × jobs / incarnations; the floor is the backend's least possible start:",
            "a fork of a warm interpreter (forkserver), an interpreter start (subprocess), `docker run` (docker).", "",
            *rows, "", "## Plan length at depth 1 (forkserver, -j 2)", "", *scaling, "",
        ]))
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
