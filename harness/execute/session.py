"""A session: one golden run, then batches of schedules, each run judged.

This is where backend, runner, evidence readers and checker meet. Schedules
come in batches so exploration can grow from what earlier runs reached (depth
k+1 from the points reached at depth k); the runs of a batch are independent
and may run in parallel worker processes, sharing nothing but the read-only
scenario. Each run's verdict is written into its own directory, so the
evidence explains itself even if the harness dies next.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from killpoint.errors import ConfigError, WorkloadError
from killpoint.harness._safe_files import remove_tree
from killpoint.harness.backends import Backend, make_backend
from killpoint.harness.databases import postgres
from killpoint.harness.execute.point_snapshots import RunSharing
from killpoint.harness.execute.pool import WorkerPool
from killpoint.harness.execute.prefixes import Prefixes
from killpoint.harness.execute.run_record import new_run_record, write_json_atomically, write_run_record
from killpoint.harness.execute.runner import (carry_out_schedule, require_rendezvous, run_golden, save_incarnations,
                                              sweep_abandoned_control_dirs)
from killpoint.harness.execute.scratch import Scratch, open_scratch, sweep_abandoned
from killpoint.harness.execute.stop_signals import Terminated, raise_if_stopped
from killpoint.harness.faults import lazyfs
from killpoint.harness.judge.checker import check
from killpoint.harness.judge.evidence import Evidence, StoreReading, read_evidence
from killpoint.harness.judge.golden_store import check_golden_store
from killpoint.harness.layout import PREFIXES_NAME, RUN_RECORD_NAME, SCRATCH_COPY_NAME, VERDICT_NAME, RunPaths
from killpoint.harness.model import (AfterDelay, AfterPoint, GoldenRun, Incarnation, Job, JobBatches, Kill, RunOutcome,
                                     Scenario, Verdict, next_batch)
from killpoint.harness.repro.safety import recorded_origin
from killpoint.harness.repro.token import ReproToken
from killpoint.harness.schedules.schedule import Schedule, has_power_loss, parse_point_reached


class SessionInterrupted(KeyboardInterrupt):
    """A session ended by SIGINT or SIGTERM: what finished, and the run directories left under way."""

    def __init__(self, signum: int, outcomes: list[RunOutcome], interrupted: list[Path]) -> None:
        super().__init__(signum)
        self.signum, self.outcomes, self.interrupted = signum, outcomes, interrupted


def default_runs_dir(scenario: Scenario) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("killpoint-runs") / f"{stamp}-{scenario.name}-{os.getpid()}"


def token_for(scenario: Scenario, job: Job, verdict: Verdict, backend: Backend | None = None,
              schedule: Schedule | None = None) -> str:
    """The run's repro token; its paths are recorded so that it resolves from other folders (``recorded_origin``).

    Without ``backend`` the token takes ``ReproToken``'s own default, as a token made before it named one does.
    """
    return ReproToken(
        origin=recorded_origin(scenario.origin, Path.cwd()), plan_digest=scenario.plan.digest,
        catalogue_digest=scenario.catalogue_digest,
        schedule=tuple(str(kill) for kill in (schedule if schedule is not None else job.schedule)), seed=job.seed,
        expect=verdict.properties, drift=str(job.drift) if job.drift else None,
        backend=backend.name if backend else ReproToken.backend, backend_options=dict(backend.options) if backend else {},
        run=job.index,
    ).encode()


def pinned_schedule(job: Job, incarnations: tuple[Incarnation, ...], golden: GoldenRun) -> Schedule:
    """The schedule a token should replay: a timed kill pinned to the crash point it was observed after.

    When the workload speaks the rendezvous, "kill at the first point after the
    last one it announced" replays a timed kill deterministically. A workload
    that never rendezvoused keeps its timed kill (replay is then timing-bound).
    """
    pinned: list[Kill] = []
    for number, kill in enumerate(job.schedule):
        incarnation = incarnations[number] if number < len(incarnations) else None
        if isinstance(kill, AfterDelay) and golden.points and incarnation is not None and incarnation.points:
            last = parse_point_reached(incarnation.points[-1])
            kill = AfterPoint(last.point, last.call, kill.fault)
        pinned.append(kill)
    return tuple(pinned)


def run_job(scenario: Scenario, golden: GoldenRun, job: Job, runs_dir: Path, backend: Backend, *,
            keep_all: bool = False, scratch: Scratch | None = None) -> RunOutcome:
    """Run one schedule in its own directory and judge it; the verdict is saved beside the evidence.

    Unless ``keep_all``, a valid run's directory is then reduced to its verdict (``reduce_to_verdict``).
    With ``scratch``, a schedule with no power loss is carried out in its scratch
    run directory (``harness/execute/scratch.py``) and leaves the same on disk.
    """
    started = time.monotonic()
    run_dir = runs_dir / f"run-{job.index:05d}"
    # Saved before the first launch (Jepsen's save-0): a harness killed from here on leaves a run
    # directory that says what it was running (``killpoint show``).
    write_run_record(run_dir, new_run_record(
        scenario, run=job.index, schedule=tuple(str(kill) for kill in job.schedule), seed=job.seed,
        drift=str(job.drift) if job.drift else None, token=token_for(scenario, job, Verdict(None), backend),
        backend=backend.name, backend_options=backend.options))
    if scratch is not None and not has_power_loss(job.schedule) and scratch.has_room():
        return _run_in_scratch(scenario, golden, job, run_dir, scratch, backend, keep_all=keep_all, started=started)
    incarnations = tuple(carry_out_schedule(scenario, job.schedule, run_dir, backend, drift=job.drift))
    verdict = check(scenario, run_evidence(scenario, run_dir, golden), golden)
    outcome = _outcome(scenario, golden, job, run_dir, verdict, incarnations, backend, started)
    write_verdict(outcome)
    if verdict.valid and not keep_all:
        reduce_to_verdict(run_dir)
    return outcome


def _run_in_scratch(scenario: Scenario, golden: GoldenRun, job: Job, run_dir: Path, scratch: Scratch,
                    backend: Backend, *, keep_all: bool, started: float) -> RunOutcome:
    """``run_job`` carried out in its scratch run directory: a valid run leaves run.json and verdict.json in
    ``run_dir``, any other (or every one with ``keep_all``) its whole evidence too, copied before its verdict is saved.

    It starts from the state its schedule's prefix left, if that run saved it (``harness/execute/prefixes.py``).
    """
    scratch_run = scratch.run_dir(job.index)
    prefixes = Prefixes(scratch.folder / PREFIXES_NAME, golden.points)
    prefix = prefixes.find(job.schedule, job.drift)
    # A snapshot of every kill of the schedule is this run's alone, unless the runs that kill once more fall back on it.
    take = prefix is not None and prefix.kills == len(job.schedule) and not job.saves_prefix
    resumed = (prefix.restore(scratch_run, take=take) if prefix is not None else None) or []
    shared = prefix.whose(len(resumed)) if prefix is not None else ()
    sharing = RunSharing(prefixes, job.schedule, job.drift, job.index, shared) if job.saves_prefix else None
    incarnations = tuple(carry_out_schedule(scenario, job.schedule, scratch_run, backend, drift=job.drift, resumed=resumed,
                                     sharing=sharing))
    verdict = check(scenario, run_evidence(scenario, scratch_run, golden), golden)
    if prefix is not None and resumed:
        verdict = replace(verdict, notes=(*verdict.notes, prefix.note(len(resumed))))
    moved = _MovedRun(str(scratch_run), str(run_dir))
    verdict, incarnations = moved.verdict(verdict), tuple(map(moved.incarnation, incarnations))
    keep = keep_all or not verdict.valid
    left_out = scratch.keep_on_disk(scratch_run, run_dir) if keep else []
    if keep:  # the harness's record of the incarnations, in the words of the disk copy (a problem names a file)
        save_incarnations(RunPaths(run_dir).incarnations, list(incarnations))
    if left_out:
        verdict = replace(verdict, notes=(*verdict.notes, (
            f"the copy of this run's evidence from its scratch folder left out {len(left_out)} "
            f"entr{'y' if len(left_out) == 1 else 'ies'} ({SCRATCH_COPY_NAME} lists them); the first: {left_out[0]}")))
    outcome = replace(_outcome(scenario, golden, job, run_dir, verdict, incarnations, backend, started),
                      shared=len(resumed))
    write_verdict(outcome)
    if not keep:
        # After the verdict: a session stopped during the removal finds the run judged and saved, and drops
        # what is left of it (``_close_scratch``) rather than keep it as the partial evidence of a run interrupted.
        scratch.discard(scratch_run)
    return outcome


@dataclass(frozen=True)
class _MovedRun:
    """A run carried out in ``before`` and kept in ``after``: the harness's words about its files name ``after``."""

    before: str
    after: str

    def text(self, text: str) -> str:
        return text.replace(self.before, self.after)

    def verdict(self, verdict: Verdict) -> Verdict:
        return replace(
            verdict, notes=tuple(map(self.text, verdict.notes)),
            error=self.text(verdict.error) if verdict.error is not None else None,
            findings=tuple(replace(finding, message=self.text(finding.message),
                                   evidence=tuple(map(self.text, finding.evidence))) for finding in verdict.findings),
            rules=tuple(replace(rule, reason=self.text(rule.reason) if rule.reason is not None else None)
                        for rule in verdict.rules))

    def incarnation(self, incarnation: Incarnation) -> Incarnation:
        """Its protocol problems are the harness's words; its stderr is the workload's and stays as written."""
        return replace(incarnation, protocol_problems=tuple(map(self.text, incarnation.protocol_problems)))


def _outcome(scenario: Scenario, golden: GoldenRun, job: Job, run_dir: Path, verdict: Verdict,
             incarnations: tuple[Incarnation, ...], backend: Backend, started: float) -> RunOutcome:
    token = token_for(scenario, job, verdict, backend, pinned_schedule(job, incarnations, golden))
    return RunOutcome(job, run_dir, verdict, incarnations, token, round(time.monotonic() - started, 4))


def run_evidence(scenario: Scenario, run_dir: Path, golden: GoldenRun) -> Evidence:
    """A run's evidence as the checker judges it: with a ``[journal]`` scenario, its store's copies too."""
    if scenario.journal is None:
        return read_evidence(run_dir)
    return read_evidence(run_dir, StoreReading(scenario.journal.reader, scenario.plan, golden.run_dir))


def write_verdict(outcome: RunOutcome) -> None:
    """Save the run's verdict.json (``RunOutcome.to_json``) in its directory, beside its evidence."""
    write_json_atomically(RunPaths(outcome.run_dir).verdict, outcome.to_json())


def reduce_to_verdict(run_dir: Path) -> None:
    """Delete a valid run's evidence but verdict.json and run.json, which keep its schedule, incarnations and token.

    A passing run's journal, ledger, world, copies and output are most of a
    session's size and prove nothing (its token regenerates them). Only a valid
    verdict is ever reduced: a failing or unknown run is evidence, kept whole.
    Deletion is best effort (a file a container left unwritable stays); it never
    follows a symbolic link out of the run directory.
    """
    for entry in run_dir.iterdir():
        if entry.name not in (VERDICT_NAME, RUN_RECORD_NAME):
            with contextlib.suppress(OSError):
                remove_tree(entry)


def _run_in_worker(scenario: Scenario, golden: GoldenRun, runs_dir: Path, keep_all: bool, scratch: Scratch | None,
                   job: Job, backend: Backend) -> RunOutcome:
    """``run_job`` as a worker of the pool carries it out, with the worker's backend."""
    return run_job(scenario, golden, job, runs_dir, backend, keep_all=keep_all, scratch=scratch)


def mark_interrupted(run_dir: Path, signum: int) -> bool:
    """Say in a run directory left under way that the run was interrupted, not judged; False if it never started."""
    if not run_dir.is_dir() or RunPaths(run_dir).verdict.exists():
        return False
    RunPaths(run_dir).interrupted.write_text(json.dumps(
        {"outcome": "interrupted", "signal": signal.Signals(signum).name,
         "note": "the harness was stopped while this run was under way; its evidence is partial and was not judged"},
        indent=1))
    return True


def _sweep_leftovers(scratch_root: Path | None) -> None:
    """Remove what harness processes now gone left (control and scratch folders, PostgreSQL clusters, lazy file system
    mounts), quietly.

    They are other sessions' housekeeping, not this session's news: a user's test output is no place for them.
    ``killpoint clean`` does the same and names each; a process a gone harness left is still named when killed.
    """
    sweep_abandoned_control_dirs()
    sweep_abandoned(scratch_root)
    postgres.sweep()
    lazyfs.unmount_stale(Path("/"))


def run_session(
    scenario: Scenario,
    batches: JobBatches,
    runs_dir: Path,
    *,
    backend_name: str,
    backend_options: dict[str, str],
    jobs: int,
    needs_rendezvous: bool,
    stop_at_first_failure: bool,
    keep_all: bool,
    scratch_root: Path | None,
    golden_on_lazy_fs: bool,
    hold_golden: Callable[[str], bool] | None,
    on_outcome: Callable[[RunOutcome], None],
) -> tuple[GoldenRun, list[RunOutcome]]:
    """The golden run, then every batch; ``jobs`` > 1 runs a batch in that many worker processes.

    Called through ``spec.run_spec``, which holds every default; here nothing is defaulted.

    With ``stop_at_first_failure`` the session ends after the first run that is not valid
    (runs already under way in workers finish and are reported too). A valid run's
    directory keeps only its verdict.json unless ``keep_all``; failing and unknown
    runs and the golden run are always kept whole. With ``scratch_root``, runs with no power
    loss are carried out in a scratch folder made there for the session (``harness/execute/scratch.py``),
    removed when it ends; a run it ends before its verdict has its evidence copied to disk all the same.
    With ``golden_on_lazy_fs`` (a session with power losses) the golden run is carried out on a lazy file system.
    With ``hold_golden`` (a sweep whose first kills pause at their points and may share prefixes) the golden run,
    carried out in scratch, is held at each point for the runs whose first kill is there (``point_snapshots``)
    and which the session runs: ``hold_golden`` tells them by that kill's text.
    """
    if (runs_dir / "golden").exists():
        raise ConfigError(f"--runs-dir {runs_dir} already holds a session's evidence, which is never overwritten; "
                          f"give a new directory")
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file in its way (./killpoint-runs, where the default one goes), no permission
        raise ConfigError(f"--runs-dir {runs_dir}: cannot be made ({error.strerror or error}); give a folder you "
                          f"can write") from None
    _sweep_leftovers(scratch_root)
    backend = make_backend(backend_name, **backend_options)
    outcomes: list[RunOutcome] = []
    shared: dict[object, object] = {}  # what outcomes hold equal, one object each (``_compacted``)
    under_way = [runs_dir / "golden"]  # run directories of the jobs started and not yet reported
    pool = None
    scratch = None
    try:
        scratch = open_scratch(scratch_root) if scratch_root is not None else None
        golden = _golden_run(scenario, runs_dir / "golden", backend, None if golden_on_lazy_fs else scratch,
                             on_lazy_fs=golden_on_lazy_fs, hold=hold_golden)
        if needs_rendezvous:
            require_rendezvous(scenario, golden)
        under_way = []
        workers = 1  # never more than a batch has schedules: -j 64 on one schedule forks no 63 idle workers
        generator, done = batches(golden), None
        while (batch := next_batch(generator, done)) is not None:
            under_way = [runs_dir / f"run-{job.index:05d}" for job in batch]
            if min(jobs, len(batch)) > workers:  # a deeper level may have more schedules: a bigger pool for it
                if pool is not None:
                    pool.close()
                workers = min(jobs, len(batch))
                pool = WorkerPool(workers, backend_name, backend_options)
            if pool is None:
                finished: Iterator[RunOutcome] = (
                    run_job(scenario, golden, job, runs_dir, backend, keep_all=keep_all, scratch=scratch)
                    for job in batch)
            else:
                finished = pool.outcomes(_run_in_worker, (scenario, golden, runs_dir, keep_all, scratch), batch)
            done = []  # this batch's outcomes, handed to the batches as the next is asked for
            for outcome in (_compacted(outcome, shared) for outcome in finished):
                under_way.remove(outcome.run_dir)
                on_outcome(outcome)
                done.append(outcome)
                outcomes.append(outcome)
                raise_if_stopped()  # a Ctrl-C swallowed on its way is raised here, between two runs
                if stop_at_first_failure and not outcome.verdict.valid:
                    break
            if stop_at_first_failure and any(not outcome.verdict.valid for outcome in outcomes):
                break
        outcomes.sort(key=lambda outcome: outcome.job.index)
        return golden, outcomes
    except KeyboardInterrupt as interrupt:
        signum = signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT
        # A second Ctrl-C must not break off the clean-up, which is bounded by pool.WORKER_STOP_TIMEOUT_S.
        handlers = {stop: signal.signal(stop, signal.SIG_IGN) for stop in (signal.SIGINT, signal.SIGTERM)}
        try:
            if pool is not None:
                pool.stop()
                # A worker stopped inside its run's clean-up, or SIGKILLed past the timeout, leaves its run's
                # control folder; its owner is gone now, so the sweep takes it.
                sweep_abandoned_control_dirs()
            interrupted = [run_dir for run_dir in under_way if mark_interrupted(run_dir, signum)]
        finally:
            for stop, handler in handlers.items():
                signal.signal(stop, handler)
        outcomes.sort(key=lambda outcome: outcome.job.index)
        raise SessionInterrupted(signum, outcomes, interrupted) from None
    finally:
        if pool is not None:
            pool.close()
        backend.close()
        if scratch is not None:
            _close_scratch(scratch, runs_dir)


def _golden_run(scenario: Scenario, golden_dir: Path, backend: Backend, scratch: Scratch | None, *,
                on_lazy_fs: bool, hold: Callable[[str], bool] | None) -> GoldenRun:
    """The crash-free run, carried out where the session's runs are (in ``scratch`` if it has one; on a lazy
    file system with ``on_lazy_fs``), kept whole in ``golden_dir``: its point times bound the timed kills, so it
    must pay the storage the runs pay. A store mapping that cannot see what it did is bad input, before any
    verdict (``golden_store``)."""
    golden = _carried_out_golden(scenario, golden_dir, backend, scratch, on_lazy_fs=on_lazy_fs, hold=hold)
    check_golden_store(scenario, golden_dir, RunPaths(golden_dir).ledger)
    return golden


def _carried_out_golden(scenario: Scenario, golden_dir: Path, backend: Backend, scratch: Scratch | None, *,
                        on_lazy_fs: bool, hold: Callable[[str], bool] | None) -> GoldenRun:
    if scratch is None:
        return run_golden(scenario, golden_dir, backend, on_lazy_fs=on_lazy_fs)
    in_scratch = scratch.folder / "golden"
    moved = _MovedRun(str(in_scratch), str(golden_dir))
    # Its points are not known yet, and no state of it is saved after a kill, which is what they are checked for.
    sharing = RunSharing.of_golden(Prefixes(scratch.folder / PREFIXES_NAME, ()), hold) if hold is not None else None
    try:
        golden = run_golden(scenario, in_scratch, backend, sharing=sharing)
    except WorkloadError as error:  # its evidence is named in the message: kept on disk, and named there
        raise WorkloadError(moved.text(str(error))) from None
    finally:
        scratch.keep_on_disk(in_scratch, golden_dir)
    return replace(golden, run_dir=golden_dir)


def _compacted(outcome: RunOutcome, shared: dict[object, object]) -> RunOutcome:
    """``outcome`` with its repeated parts shared with the session's other outcomes (``shared`` holds them).

    A session keeps every outcome until its report, each unpickled anew from a
    worker: a 30,000-run session grew by 7 KiB a run, most of it crash-point
    names, rule results and kills that thousands of runs hold equal. Crash points
    become interned strings; rule results and kills (frozen, hashable) one object each.
    """
    def one(value: Any) -> Any:
        return shared.setdefault(value, value)

    return replace(
        outcome,
        job=replace(outcome.job, schedule=tuple(map(one, outcome.job.schedule))),
        verdict=replace(outcome.verdict, rules=tuple(map(one, outcome.verdict.rules))),
        incarnations=tuple(replace(incarnation, points=tuple(map(sys.intern, incarnation.points)))
                           for incarnation in outcome.incarnations))


def _close_scratch(scratch: Scratch, runs_dir: Path) -> None:
    """Copy to disk the evidence of every run the session left in ``scratch`` unjudged (it ended mid-run), then
    remove it.

    Best effort, as the session is ending (perhaps for a signal): a failure
    leaves the folder for the next session's sweep, and never hides why it ended.
    """
    with contextlib.suppress(OSError):
        for left in sorted(scratch.folder.iterdir()):
            with contextlib.suppress(OSError):
                # The shared prefixes are copies of runs' evidence, which their runs keep; a run judged and saved
                # was stopped while its scratch copy was being removed.
                if left.name == PREFIXES_NAME or (runs_dir / left.name / VERDICT_NAME).exists():
                    remove_tree(left)
                else:
                    scratch.keep_on_disk(left, runs_dir / left.name)
        scratch.close()
