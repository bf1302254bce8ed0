"""A session: one golden run, then every requested schedule, each judged.

This is where runner, evidence readers and checker meet; it turns a list of
schedules into ``RunOutcome`` values and writes each run's verdict into its
run directory, so the evidence explains itself even if the harness dies next.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from harness.checker import Verdict, check
from harness.evidence import Incarnation, read_evidence
from harness.runner import GoldenRun, execute_run, require_rendezvous, run_golden
from harness.scenario import Scenario
from harness.schedule import Schedule
from harness.token import ReproToken


@dataclass(frozen=True)
class Job:
    """One schedule to run; ``seed`` is set for runs drawn at random."""

    index: int
    schedule: Schedule
    seed: int | None = None


@dataclass(frozen=True)
class RunOutcome:
    job: Job
    run_dir: Path
    verdict: Verdict
    incarnations: tuple[Incarnation, ...]
    token: str
    seconds: float

    @property
    def unreached(self) -> tuple[str, ...]:
        """Scheduled kill points that the workload never reached."""
        killed = {incarnation.number for incarnation in self.incarnations if incarnation.killed_at}
        return tuple(str(kill) for number, kill in enumerate(self.job.schedule) if number not in killed)


def default_runs_dir(scenario: Scenario) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("killpoint-runs") / f"{stamp}-{scenario.name}-{os.getpid()}"


def token_for(scenario: Scenario, job: Job, verdict: Verdict) -> str:
    return ReproToken(
        origin=scenario.origin, plan_digest=scenario.plan.digest, catalogue_digest=scenario.catalogue_digest,
        schedule=tuple(str(kill) for kill in job.schedule), seed=job.seed, expect=verdict.properties,
    ).encode()


def run_job(scenario: Scenario, golden: GoldenRun, job: Job, runs_dir: Path) -> RunOutcome:
    """Run one schedule in its own directory and judge it; the verdict is saved beside the evidence."""
    started = time.monotonic()
    run_dir = runs_dir / f"run-{job.index:05d}"
    incarnations = tuple(execute_run(scenario, job.schedule, run_dir))
    verdict = check(scenario, read_evidence(run_dir), golden)
    outcome = RunOutcome(job, run_dir, verdict, incarnations, token_for(scenario, job, verdict),
                         round(time.monotonic() - started, 4))
    (run_dir / "verdict.json").write_text(json.dumps(outcome_to_json(outcome), indent=1))
    return outcome


def run_session(
    scenario: Scenario,
    jobs: Iterable[Job],
    runs_dir: Path,
    *,
    on_outcome: Callable[[RunOutcome], None] = lambda outcome: None,
) -> tuple[GoldenRun, list[RunOutcome]]:
    """The golden run, then every job in order. Raises WorkloadError if the golden run fails."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    golden = run_golden(scenario, runs_dir / "golden")
    require_rendezvous(scenario, golden)
    outcomes = []
    for job in jobs:
        outcome = run_job(scenario, golden, job, runs_dir)
        on_outcome(outcome)
        outcomes.append(outcome)
    return golden, outcomes


def outcome_to_json(outcome: RunOutcome) -> dict[str, object]:
    return {
        "index": outcome.job.index,
        "schedule": [str(kill) for kill in outcome.job.schedule],
        "seed": outcome.job.seed,
        "run_dir": str(outcome.run_dir),
        "valid": outcome.verdict.valid,
        "findings": [asdict(finding) for finding in outcome.verdict.findings],
        "notes": list(outcome.verdict.notes),
        "error": outcome.verdict.error,
        "unreached": list(outcome.unreached),
        "incarnations": [asdict(incarnation) for incarnation in outcome.incarnations],
        "token": outcome.token,
        "seconds": outcome.seconds,
    }
