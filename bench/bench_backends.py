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
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from killpoint.harness.backends._engine import DEFAULT_IMAGE
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.frontends.spec import build_spec, run_spec
from killpoint.harness.model import BatchGenerator, GoldenRun, JobBatches, Plan, PlannedCall, Scenario, next_batch

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "scenarios" / "demo.toml"
DOC = ROOT / "docs" / "performance.md"
TMPFS = Path("/dev/shm")


def median_seconds(action: Callable[[], object], samples: int) -> float:
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


def interpreter_floor(*imports: str) -> float:
    statement = "; ".join(f"import {module}" for module in imports) or "pass"
    return median_seconds(lambda: subprocess.run([sys.executable, "-c", statement], check=True, cwd=ROOT), 20)


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

    def write_and_sync() -> None:
        os.write(fd, b"x" * 100 + b"\n")
        os.fsync(fd)

    try:
        return median_seconds(write_and_sync, 200)
    finally:
        os.close(fd)


RENDEZVOUS_CLIENT = """
import sys, time
from killpoint.client import Rendezvous
rendezvous = Rendezvous(sys.argv[1], 0)
rendezvous.point("warm-up")
started = time.perf_counter()
for _ in range(int(sys.argv[2])):
    rendezvous.point("after_started", call="c1", op="t-op1")  # the wire name: this script runs alone
print((time.perf_counter() - started) / int(sys.argv[2]))
"""


def rendezvous_round_trip(directory: Path, points: int = 5000) -> float:
    from killpoint.harness.execute.rendezvous import RendezvousServer

    server = RendezvousServer(directory / "rv.sock")
    child = subprocess.Popen([sys.executable, "-c", RENDEZVOUS_CLIENT, str(server.path), str(points)],
                             stdout=subprocess.PIPE, text=True)
    server.serve(child.pid, None, started=time.monotonic(), deadline=time.monotonic() + 60)
    seconds = float(child.communicate()[0])
    server.close()
    return seconds


@dataclass(frozen=True)
class SessionCost:
    schedules: int
    incarnations: int  # the golden run's included
    journal_records: int  # each one a write and an fsync by the workload
    seconds: float


def session_cost(scenario: Scenario, depth: int, backend: str, jobs: int, under: Path | None = None,
                 most: int | None = None) -> SessionCost:
    """Run one ``--exhaustive --depth DEPTH`` session (its first ``most`` schedules, if given; runs directory in
    ``under``, else the system's temp directory) and time it."""
    with tempfile.TemporaryDirectory(prefix="killpoint-bench-", dir=under) as runs_dir:
        spec = build_spec(scenario, exhaustive=True, depth=depth, backend=backend, jobs=jobs,
                          runs_dir=Path(runs_dir) / "s")
        started = time.perf_counter()
        _, outcomes = run_spec(spec, track=lambda batches: first(batches, most) if most else batches)
        seconds = time.perf_counter() - started
        records = sum(len(journal.read_bytes().splitlines()) for journal in Path(runs_dir).glob("s/*/workload/journal.jsonl"))
    assert all(outcome.verdict.valid for outcome in outcomes), f"reference runtime failed on {backend}"
    return SessionCost(len(outcomes), 1 + sum(len(outcome.incarnations) for outcome in outcomes), records, seconds)


def first(batches: JobBatches, count: int) -> JobBatches:
    def limited(golden: GoldenRun) -> BatchGenerator:
        inner, done, remaining = batches(golden), None, count
        while remaining > 0 and (batch := next_batch(inner, done)) is not None:
            done = yield batch[:remaining]
            remaining -= len(batch[:remaining])

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
        floors = {"fork": fork_floor(), "interpreter": interpreter_floor(),
                  "imports": interpreter_floor("killpoint.scenarios.reference_runtime", "killpoint.fake_tools.tools"),
                  "fsync": fsync_floor(Path(scratch)), "rendezvous": rendezvous_round_trip(Path(scratch))}
    docker = docker_floor(args.image) if args.docker else None
    start_floor = {"forkserver": floors["fork"], "subprocess": floors["interpreter"]}
    if docker is not None:
        start_floor["docker"] = docker
    runs: list[tuple[str, int, Path | None]] = [(backend, jobs, None) for backend in start_floor for jobs in (1, 2)]
    if TMPFS.is_dir():  # the same work with fsync nearly free: what the harness itself costs
        runs += [("forkserver", jobs, TMPFS) for jobs in (1, 2)]
    rows.append("| backend | runs dir | -j | schedules | incarnations | seconds | schedules/s | per incarnation "
                "| floor | × floor |")
    rows.append("|---|---|---|---|---|---|---|---|---|---|")
    for backend, jobs, under in runs:
        cost = session_cost(demo, 2, backend, jobs, under, most=60 if backend == "docker" else None)
        per = cost.seconds * jobs / cost.incarnations
        # The least an incarnation can cost: its start, plus one fsync per journal record it writes.
        floor = start_floor[backend] + cost.journal_records / cost.incarnations * (0 if under else floors["fsync"])
        rows.append(f"| {backend} | {under or 'disk'} | {jobs} | {cost.schedules} | {cost.incarnations} | "
                    f"{cost.seconds:.1f} | {cost.schedules / cost.seconds:.1f} | {per * 1000:.1f} ms | "
                    f"{floor * 1000:.1f} ms | {per / floor:.1f} |")
        print(rows[-1], flush=True)
    scaling = ["| calls | schedules (depth 1) | seconds | ms per schedule |", "|---|---|---|---|"]
    per_schedule = {}
    for calls in (5, 10, 20, 40):
        cost = session_cost(long_plan(demo, calls), 1, "forkserver", 2)
        per_schedule[calls] = cost.seconds / cost.schedules * 1000
        scaling.append(f"| {calls} | {cost.schedules} | {cost.seconds:.1f} | {per_schedule[calls]:.1f} |")
        print(scaling[-1], flush=True)
    slope, intercept = statistics.linear_regression(list(per_schedule), list(per_schedule.values()))
    worst = max(abs(ms - (intercept + slope * calls)) / ms for calls, ms in per_schedule.items())
    scaling.append(f"\nLeast-squares line: {intercept:.1f} ms + {slope:.2f} ms per call per schedule "
                   f"(largest deviation from it {worst:.0%}).")
    print(scaling[-1], flush=True)
    floor_lines = [
        f"- fork()+wait of a warm interpreter: {floors['fork'] * 1000:.2f} ms",
        f"- bare interpreter start (`python -c pass`): {floors['interpreter'] * 1000:.1f} ms",
        f"- interpreter start importing the reference runtime and the fake tools: {floors['imports'] * 1000:.1f} ms"
        + (" (PYTHONDONTWRITEBYTECODE is set here, so every start compiles them)"
           if os.environ.get("PYTHONDONTWRITEBYTECODE") else ""),
        "- bare `docker run` of a trivial container: "
        + (f"{docker * 1000:.0f} ms" if docker is not None else "not measured (no engine, or --docker not given)"),
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
            "Cost per incarnation is wall time × jobs / incarnations. Its floor is the least an incarnation can",
            "cost: the backend's start (a fork of a warm interpreter, an interpreter start, `docker run`) plus one",
            "fsync per journal record the incarnation writes (none counted on tmpfs, where fsync is nearly free).", "",
            *rows, "", "## Plan length at depth 1 (forkserver, -j 2)", "",
            "Every schedule runs the whole plan, so cost per schedule should be a fixed part (start, kill, judge)",
            "plus a part proportional to the calls.", "",
            *scaling, "",
            "## Reading the table", "",
            "- The fork server's incarnation is the workload's own work (about 30 crash points, each a",
            "  rendezvous round trip; six tool calls; the journal's fsyncs) plus the runner's: a run",
            "  directory and world per schedule, the kill confirmed dead, the evidence read and judged.",
            "- The subprocess backend pays an interpreter start and the runtime's imports in every",
            "  incarnation. Where PYTHONDONTWRITEBYTECODE is set (as on this machine) every start also",
            "  compiles every module it imports; the fork server compiles `__main__` once.",
            "- Docker pays container creation, start, kill and removal through the engine per incarnation.",
            "- For the fastest local exploration put the evidence on tmpfs (`--runs-dir /dev/shm/...`) and",
            "  use `--backend forkserver -j N`; the journal's fsyncs then cost nothing (and prove nothing",
            "  about durability on a real disk).", "",
        ]))
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
