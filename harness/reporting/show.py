"""``killpoint show RUN_DIR``: what a run directory was running and how far it got.

It reads the staged evidence and nothing else: ``run.json`` (what was asked,
written before the first launch), ``incarnations.json`` (what each finished
incarnation did) and ``verdict.json`` (the judgement, written last). A run
directory left by a SIGKILLed harness has the first two, or only the first,
and is shown all the same: "no verdict" is an answer, not an error. A passing
run reduced to its verdict.json is shown from that file alone.
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TextIO

import psutil

from killpoint.errors import ConfigError
from killpoint.harness.config import limits
from killpoint.harness.execute._process_tree import identity_running
from killpoint.harness.codec import Undecodable
from killpoint.harness.execute.run_record import RunRecord, read_json_file, read_run_record
from killpoint.harness.judge.evidence import drop_lines
from killpoint.harness.layout import INTERRUPTED_NAME, RUN_RECORD_NAME, VERDICT_NAME, RunPaths
from killpoint.harness.model import Incarnation, RunOutcome
from killpoint.harness.repro.safety import repro_line

EXAMPLE = "killpoint show killpoint-runs/<session>/run-00000"


def add_show_parser(commands: argparse._SubParsersAction) -> None:
    show = commands.add_parser("show", help="say what a run directory was running and how far it got "
                                            "(also one left by a killed harness)")
    show.add_argument("run_dir", type=limits.path, metavar="RUN_DIR", help="a run's directory, e.g. killpoint-runs/<session>/run-00000")


def command_show(args: argparse.Namespace, out: TextIO) -> int:
    out.writelines(f"{line}\n" for line in describe_run_dir(args.run_dir))
    return 0


def describe_run_dir(run_dir: Path) -> list[str]:
    """The lines ``killpoint show`` prints; ConfigError (path and fix) for what is not a readable run directory."""
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: {'no such directory' if not run_dir.exists() else 'not a directory'}; "
                          f"give a run's directory: {EXAMPLE}")
    has_record, verdict_path = _is_there(RunPaths(run_dir).run_record), RunPaths(run_dir).verdict
    if not has_record and not _is_there(verdict_path):
        raise ConfigError(f"{run_dir}: not a run directory: it holds no {RUN_RECORD_NAME} (written before a run's "
                          f"first launch) and no {VERDICT_NAME}{_runs_inside(run_dir)}")
    record = read_run_record(run_dir) if has_record else None
    judged = read_verdict(verdict_path) if _is_there(verdict_path) else None
    lines = [f"run directory: {run_dir}"]
    if record is not None:
        lines += _what_was_asked(record)
    elif judged is not None:
        schedule = tuple(map(str, judged.job.schedule))
        lines.append(f"schedule: {_schedule(schedule, judged.job.seed)} (from {VERDICT_NAME}: this run kept no "
                     f"{RUN_RECORD_NAME}, so its scenario, backend and argv are not known)")
    incarnations = judged.incarnations if judged else _incarnations_so_far(run_dir)
    lines += _incarnations(incarnations)
    lines += _power_losses(run_dir, incarnations)
    lines += _verdict(judged) if judged else [f"verdict: none: {_why_no_verdict(run_dir, record)}"]
    token = judged.token if judged else record.token if record else None
    if token is not None:
        lines.append(f"reproduce: {repro_line(token)}")
    return lines


def _is_there(path: Path) -> bool:
    """Whether the run directory holds ``path``, whatever it is: a symlink too, even one to itself or to nothing,
    which ``Path.exists`` calls absent. Its reader then refuses it (exit 2) as it refuses a FIFO or a folder
    there, rather than the run be shown as if that stage were never written."""
    return os.path.lexists(path)


def _runs_inside(folder: Path) -> str:
    """For a session's folder given in place of a run's: the runs it holds, to pick from."""
    runs = sorted(path.name for path in folder.glob("run-*") if path.is_dir())
    if not runs:
        return f"; give a run's directory: {EXAMPLE}"
    return (f"; it looks like a session's folder, holding {len(runs)} run(s) ({', '.join(runs[:3])}"
            f"{', ...' if len(runs) > 3 else ''}): show one, e.g. killpoint show {folder / runs[0]}")


def _what_was_asked(record: RunRecord) -> list[str]:
    where = record.origin.get("scenario") or f"--workload {record.origin.get('workload', '?')!r}"
    options = ", ".join(f"{key} {value}" for key, value in sorted(record.backend_options.items()))
    drift = f", drift {record.drift}" if record.drift else ""
    return [
        (f"scenario: {record.scenario} ({where}); digest {record.scenario_digest}, plan {record.plan_digest}, "
         f"catalogue {record.catalogue_digest}"),
        f"schedule: run {record.run}, {_schedule(record.schedule, record.seed)}{drift}",
        f"backend: {record.backend}{f' ({options})' if options else ''}",
        (f"started: {record.started} by harness pid {record.harness_pid}, killpoint {record.killpoint_version}, "
         f"Python {record.python_version}"),
        f"argv: {shlex.join(record.argv)}",
    ]


def _schedule(schedule: tuple[str, ...], seed: int | None) -> str:
    kills = f"kill at {', '.join(schedule)}" if schedule else "no kill"
    return kills + (f", seed {seed}" if seed is not None else "")


def _incarnations_so_far(run_dir: Path) -> tuple[Incarnation, ...]:
    """What incarnations.json holds: none before the first incarnation ends; ConfigError if it cannot be read."""
    path = RunPaths(run_dir).incarnations
    if not _is_there(path):
        return ()
    entries = read_json_file(path, "incarnations.json is written by killpoint as each incarnation ends")
    try:
        return Incarnation.all_from_json(entries)
    except Undecodable as wrong:
        raise ConfigError(f"{path}: not the incarnations as killpoint writes them, so how far the run got cannot be "
                          f"told", wrong.problems) from None


def _incarnations(incarnations: tuple[Incarnation, ...]) -> Iterator[str]:
    yield f"incarnations: {len(incarnations) or 'none'} finished"
    for incarnation in incarnations:
        yield f"  incarnation {incarnation.number} (pid {incarnation.pid}, {incarnation.seconds:.3f}s): " \
              f"{incarnation_ending(incarnation)}"


def _power_losses(run_dir: Path, incarnations: tuple[Incarnation, ...]) -> Iterator[str]:
    """What each power loss of the run dropped, kill by kill, from its ``power-loss-N.json``."""
    kills = sum(1 for incarnation in incarnations if incarnation.killed_at is not None)
    for number in range(kills):
        dropped = drop_lines(run_dir, number)
        if dropped is not None:
            yield f"power loss at kill {number}:"
            yield from (f"  {line}" for line in dropped)


def incarnation_ending(incarnation: Incarnation) -> str:
    """How an incarnation ended, in the words of a timeline: killed at its point, at the timeout, or its exit."""
    return (f"KILLED at {incarnation.killed_at}" if incarnation.killed_at and not incarnation.timed_out
            else "hung, killed at the timeout" if incarnation.timed_out
            else f"exited {incarnation.exit_code}")


def _verdict(judged: RunOutcome) -> Iterator[str]:
    yield f"verdict: {judged.result}" + (f": {judged.verdict.error}" if judged.verdict.error else "")
    for finding in judged.verdict.findings:
        where = " ".join(part for part in (finding.call, f"(kill {finding.kill})" if finding.kill else None) if part)
        yield f"  [{finding.property}] {where + ': ' if where else ''}{finding.message}"
    yield from (f"  note: {note}" for note in judged.verdict.notes)
    if judged.unreached:
        yield f"  kill(s) that never came: {', '.join(judged.unreached)}"


def _why_no_verdict(run_dir: Path, record: RunRecord | None) -> str:
    interrupted = RunPaths(run_dir).interrupted
    if _is_there(interrupted):
        signal = _signal_of(interrupted)
        return (f"the harness was stopped{f' by {signal}' if signal else ''} while this run was under way "
                f"({INTERRUPTED_NAME}); the evidence is partial and was not judged")
    if record is not None and _still_running(record):
        return f"not yet: the harness (pid {record.harness_pid}) is still running"
    return "the harness stopped before judging (interrupted or killed); the evidence is partial"


def _signal_of(interrupted: Path) -> str | None:
    data = read_json_file(interrupted, f"{INTERRUPTED_NAME} is written by killpoint when a run is interrupted")
    signal = data.get("signal") if isinstance(data, dict) else None
    return signal if isinstance(signal, str) else None


def _still_running(record: RunRecord) -> bool:
    """The harness that wrote ``record`` is alive: the process it names (``harness_identity``) runs; for a record
    without one (an older killpoint's), its pid runs a process started, by the wall clock, no later than the record."""
    if record.harness_identity is not None:
        return identity_running(record.harness_identity)
    try:
        started = datetime.fromisoformat(record.started).timestamp()
        process = psutil.Process(record.harness_pid)
        return process.status() != psutil.STATUS_ZOMBIE and process.create_time() <= started + 1.0
    except (ValueError, psutil.Error):  # a record's clock we cannot read says nothing; a pid gone is not running
        return False


def read_verdict(path: Path) -> RunOutcome:
    """The run verdict.json holds (``RunOutcome.from_json``); ConfigError naming the file and every problem if it
    is not one killpoint wrote."""
    what_it_is = f"{VERDICT_NAME} is written by killpoint when it judges a run"
    try:
        return RunOutcome.from_json(read_json_file(path, what_it_is))
    except Undecodable as wrong:
        raise ConfigError(f"{path}: not a verdict as killpoint writes it ({what_it_is})", wrong.problems) from None
