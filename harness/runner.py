"""The subprocess backend: launches incarnations, serves their crash points, restarts them.

``execute_run`` carries out one schedule in one run directory and leaves all
its evidence there; it judges nothing. Each incarnation runs in its own
session (process group) with its output captured; the nemesis kills it at the
scheduled point; the next incarnation starts from the same run directory and
world, until the task completes or the incarnation bound is reached.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from fake_tools.world import World, seed_world
from harness import nemesis, protocol
from harness.errors import WorkloadError
from harness.evidence import Incarnation, journal_at_kill_path, read_lines, run_paths
from harness.rendezvous import RendezvousServer, Served
from harness.scenario import Scenario
from harness.schedule import KillPoint, Schedule

STDERR_TAIL_BYTES = 600


def prepare_run_dir(scenario: Scenario, run_dir: Path) -> dict[str, Path]:
    """Lay out a fresh run directory: plan, catalogue, seeded world, empty ledger."""
    paths = run_paths(run_dir)
    paths["workload"].mkdir(parents=True)
    paths["plan"].write_text(json.dumps(scenario.plan.to_json(), indent=1))
    paths["catalogue"].write_text(json.dumps(scenario.catalogue.to_protocol(), indent=1))
    seed_world(paths["world"], scenario.world_files, scenario.world_state)
    paths["ledger"].touch()
    return paths


def task_completed(journal_path: Path) -> bool:
    return any(
        line.get("kind") == protocol.TASK and line.get("status") == protocol.COMPLETED
        for line in read_lines(journal_path).lines
    )


def _stderr_tail(path: Path) -> str:
    with path.open("rb") as stream:
        stream.seek(max(0, path.stat().st_size - STDERR_TAIL_BYTES))
        return stream.read().decode(errors="replace").strip()


def _launch(scenario: Scenario, paths: dict[str, Path], control: Path, number: int, run_dir: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        protocol.ENV_RUN_DIR: str(paths["workload"].resolve()),
        protocol.ENV_PLAN: str(paths["plan"].resolve()),
        protocol.ENV_CATALOGUE: str(paths["catalogue"].resolve()),
        protocol.ENV_WORLD: str(paths["world"].resolve()),
        protocol.ENV_LEDGER: str(paths["ledger"].resolve()),
        protocol.ENV_CONTROL: str(control),
        protocol.ENV_INCARNATION: str(number),
        "PYTHONHASHSEED": "0",
    }
    with open(run_dir / f"incarnation-{number}.stdout", "wb") as stdout, \
         open(run_dir / f"incarnation-{number}.stderr", "wb") as stderr:
        try:
            return subprocess.Popen(
                scenario.workload, cwd=scenario.cwd, env=env, stdin=subprocess.DEVNULL,
                stdout=stdout, stderr=stderr, start_new_session=True, close_fds=True,
            )
        except OSError as error:
            raise WorkloadError(
                f"workload {' '.join(scenario.workload)!r} cannot start: {error.strerror}"
                f" (cwd {scenario.cwd}); check the workload command"
            ) from None


def _end_incarnation(process: subprocess.Popen[bytes], served: Served, paths: dict[str, Path],
                     run_dir: Path, number: int, kills: int) -> tuple[str | None, int | None]:
    """Kill if the rendezvous says so (or the deadline passed); return (kill point, exit code)."""
    if served.hit is None and not served.timed_out:
        exit_code = process.wait()
        nemesis.kill_stragglers(process)
        return None, exit_code
    nemesis.kill_tree(process)
    point = str(served.hit) if served.hit is not None else "timeout"
    nemesis.mark_kill(paths["ledger"], number, point)
    if paths["journal"].exists():
        shutil.copyfile(paths["journal"], journal_at_kill_path(run_dir, kills))
    else:
        journal_at_kill_path(run_dir, kills).touch()
    return point, None


def execute_run(scenario: Scenario, schedule: Schedule, run_dir: Path, *, max_incarnations: int | None = None) -> list[Incarnation]:
    """Carry out ``schedule`` against the workload in ``run_dir``; return what each incarnation did."""
    paths = prepare_run_dir(scenario, run_dir)
    nemesis.become_subreaper()
    bound = max_incarnations or len(schedule) + scenario.max_extra_incarnations
    control_dir = Path(tempfile.mkdtemp(prefix="kp-"))
    server = RendezvousServer(control_dir / "control.sock")
    incarnations: list[Incarnation] = []
    try:
        for number in range(bound):
            kill_point: KillPoint | None = schedule[number] if number < len(schedule) else None
            started = time.monotonic()
            process = _launch(scenario, paths, server.path, number, run_dir)
            try:
                served = server.serve(process, kill_point, started + scenario.timeout_s)
            except BaseException:
                nemesis.kill_tree(process)
                raise
            kills = sum(1 for incarnation in incarnations if incarnation.killed_at is not None)
            killed_at, exit_code = _end_incarnation(process, served, paths, run_dir, number, kills)
            server.drop_connections()
            leftovers = nemesis.sweep_leftovers(str(paths["workload"].resolve()))
            incarnations.append(Incarnation(
                number=number, pid=process.pid, exit_code=exit_code, killed_at=killed_at,
                timed_out=served.timed_out, points=tuple(served.points),
                seconds=round(time.monotonic() - started, 4),
                stderr_tail=_stderr_tail(run_dir / f"incarnation-{number}.stderr"),
                leftovers=tuple(leftovers),
            ))
            if killed_at is None and task_completed(paths["journal"]):
                break
    finally:
        server.close()
        shutil.rmtree(control_dir, ignore_errors=True)
        paths["incarnations"].write_text(json.dumps([asdict(i) for i in incarnations], indent=1))
    return incarnations


@dataclass(frozen=True)
class GoldenRun:
    """The crash-free run of a scenario: the world every recovered run must reach."""

    run_dir: Path
    world: dict[str, str]
    effects_per_call: dict[str, int]
    points: tuple[str, ...]
    seconds: float


def run_golden(scenario: Scenario, run_dir: Path) -> GoldenRun:
    """Run the plan once with no kill; a workload that cannot do that is a workload error."""
    incarnations = execute_run(scenario, (), run_dir, max_incarnations=1)
    paths = run_paths(run_dir)
    only = incarnations[0]
    if only.timed_out or only.exit_code != 0 or not task_completed(paths["journal"]):
        why = (f"hung past the timeout of {scenario.timeout_s:g}s" if only.timed_out
               else f"exited with code {only.exit_code}" if only.exit_code != 0
               else "exited 0 without journaling task COMPLETED")
        tail = only.stderr_tail or "(stderr empty)"
        raise WorkloadError(
            f"workload error: {' '.join(scenario.workload)!r} could not run the plan even without a crash: "
            f"it {why}. Its stderr ends with:\n{tail}\nEvidence: {run_dir}"
        )
    effects = Counter(
        line.get("call") for line in read_lines(paths["ledger"]).lines if "effect" in line.record
    )
    return GoldenRun(run_dir, World(paths["world"]).snapshot(), dict(effects), only.points, only.seconds)


def require_rendezvous(scenario: Scenario, golden: GoldenRun) -> None:
    """Crash-point schedules need a workload that speaks the control socket; say so if it never did."""
    if not golden.points:
        raise WorkloadError(
            f"workload error: {' '.join(scenario.workload)!r} completed the plan but never connected to the "
            f"control socket (${protocol.ENV_CONTROL}), so it cannot be killed at crash points. "
            f"Make it send a crash point at each protocol point (docs/protocol.md). Evidence: {golden.run_dir}"
        )
