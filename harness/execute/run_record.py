"""run.json: what a run directory is running, written before the run's first launch (Jepsen's save-0).

A run directory fills in stages: ``run.json`` before anything starts (the
scenario and its digests, the schedule, seed and token, the harness's argv and
versions, the backend), ``incarnations.json`` as each incarnation ends, and
``verdict.json`` last. So a directory left by a harness that was SIGKILLed
still says what it was running and how far it got (``killpoint show``).

``write_json_atomically`` is the one way these files are written: a reader
(``show``, the checker) never sees half of one, whatever kills the writer.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import killpoint
from killpoint._json import strict_json
from killpoint.errors import ConfigError
from killpoint.harness._safe_files import read_bounded
from killpoint.harness.execute._process_tree import own_identity
from killpoint.harness.codec import NONE, field_problems
from killpoint.harness.layout import RunPaths
from killpoint.harness.repro.safety import recorded_origin

if TYPE_CHECKING:
    from killpoint.harness.model import Scenario

FORMAT = "killpoint-run/1"  # bumped when a field changes meaning; a reader refuses a format it does not know


@dataclass(frozen=True)
class RunRecord:
    """What a run was asked to do, as ``run.json`` holds it; every field is plain JSON."""

    scenario: str  # its name
    origin: dict[str, str] = field(hash=False)  # where it came from, as the token records it
    scenario_digest: str  # of everything in the scenario that changes what a run does
    plan_digest: str
    catalogue_digest: str
    schedule: tuple[str, ...]  # the kills, as ``--kill-at`` spells them
    seed: int | None
    drift: str | None  # "tool=CLASS", the catalogue recovery incarnations are handed
    run: int  # the run's index in its session (run-00003 is 3)
    token: str  # the token of the run as scheduled; verdict.json's pins timed kills and names the findings
    backend: str
    backend_options: dict[str, str] = field(hash=False)
    argv: tuple[str, ...]  # the harness's command line
    harness_pid: int
    killpoint_version: str
    python_version: str
    started: str  # ISO 8601, UTC
    # PID:TICKS (``_process_tree.process_identity``): tells the live harness from a later process given its pid,
    # where the wall-clock ``started`` cannot (the clock may be stepped). Absent from records of killpoint 0.x
    # before it, which are still read.
    harness_identity: str | None = field(default=None, compare=False)
    format: str = FORMAT


def scenario_digest(scenario: Scenario) -> str:
    """A digest of what makes a run do what it does: workload, plan, catalogue, world, timeout, incarnation bound.

    The name and the file's path are left out: renaming a scenario does not change a run.
    """
    what_runs = {"workload": list(scenario.workload), "plan": scenario.plan.to_json(),
                 "catalogue": scenario.catalogue.to_protocol(), "world_files": scenario.world_files,
                 "world_state": scenario.world_state, "timeout_s": scenario.timeout_s,
                 "max_extra_incarnations": scenario.max_extra_incarnations}
    return hashlib.sha256(json.dumps(what_runs, sort_keys=True, default=str).encode()).hexdigest()[:12]


def new_run_record(scenario: Scenario, *, run: int, schedule: tuple[str, ...], seed: int | None, drift: str | None,
                   token: str, backend: str, backend_options: Mapping[str, str], argv: tuple[str, ...] | None = None) -> RunRecord:
    """The record of a run about to start in this process (its pid, versions and clock); ``argv`` defaults to ``sys.argv``."""
    return RunRecord(
        scenario=scenario.name, origin=recorded_origin(scenario.origin, Path.cwd()), scenario_digest=scenario_digest(scenario),
        plan_digest=scenario.plan.digest, catalogue_digest=scenario.catalogue_digest, schedule=tuple(schedule),
        seed=seed, drift=drift, run=run, token=token, backend=backend, backend_options=dict(backend_options),
        argv=tuple(sys.argv if argv is None else argv), harness_pid=os.getpid(),
        killpoint_version=killpoint.__version__, python_version=platform.python_version(),
        started=datetime.now(UTC).isoformat(timespec="milliseconds"), harness_identity=own_identity(),
    )


def write_json_atomically(path: Path, value: Any, *, replace: bool = True, indent: int | None = 1) -> None:
    """Write ``value`` as JSON to ``path`` so that a reader sees the old file or the new one, never part of one.

    The text goes to a temporary file in the same folder, then is renamed over
    ``path`` (or, with ``replace=False``, linked to it, which fails with
    FileExistsError if ``path`` exists: evidence is never overwritten). It is
    not fsynced: the page cache outlives a killed harness, and an fsync per
    file of every run was most of a sweep's disk time. ``indent=None`` (a file
    rewritten often, read by programs) is encoded several times faster.
    """
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as stream:
            stream.write(json.dumps(value, indent=indent))
        if replace:
            os.replace(temporary, path)
        else:
            os.link(temporary, path)
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)


def write_run_record(run_dir: Path, record: RunRecord) -> Path:
    """Create ``run_dir`` and write its ``run.json``; FileExistsError if the directory already has one."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = RunPaths(run_dir).run_record
    write_json_atomically(path, asdict(record), replace=False)
    return path


_TYPES: dict[str, tuple[type, ...]] = {
    "scenario": (str,), "origin": (dict,), "scenario_digest": (str,), "plan_digest": (str,),
    "catalogue_digest": (str,), "schedule": (list,), "seed": (int, NONE), "drift": (str, NONE),
    "run": (int,), "token": (str,), "backend": (str,), "backend_options": (dict,), "argv": (list,),
    "harness_pid": (int,), "killpoint_version": (str,), "python_version": (str,), "started": (str,),
    "format": (str,),
}
_OPTIONAL_TYPES: dict[str, tuple[type, ...]] = {"harness_identity": (str, NONE)}  # checked when present
_TEXT_LISTS = ("schedule", "argv")
WHAT_IT_IS = "run.json is written by killpoint before a run's first launch"


def read_run_record(run_dir: Path) -> RunRecord:
    """The record in ``run_dir``/run.json; ConfigError naming the file, every problem and the fix if it is not one."""
    path = RunPaths(run_dir).run_record
    data = read_json_file(path, WHAT_IT_IS)
    if isinstance(data, dict) and data.get("format") == FORMAT:
        present = {name: kinds for name, kinds in _OPTIONAL_TYPES.items() if name in data}
        problems = field_problems(data, {**_TYPES, **present}, text_lists=_TEXT_LISTS,
                                  text_tables=("origin", "backend_options"))
    else:
        problems = [_format_problem(data)]
    if problems:
        raise ConfigError(f"{path}: not a run record as killpoint {killpoint.__version__} writes it ({WHAT_IT_IS}); "
                          f"it cannot say what the run was", tuple(problems))
    return RunRecord(**{**data, **{name: tuple(data[name]) for name in _TEXT_LISTS}})


def _format_problem(data: Any) -> str:
    if not isinstance(data, dict):
        return f"holds {type(data).__name__}, not an object"
    return (f"format {data.get('format')!r}: this killpoint reads {FORMAT!r} "
            f"(if a newer killpoint wrote it, show it with that one)")


def read_json_file(path: Path, what_it_is: str) -> Any:
    """The JSON in ``path``, a file killpoint wrote; ConfigError with the path, the reason and the fix otherwise."""
    try:
        return strict_json(read_bounded(path))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file ({what_it_is}); give a run directory such as "
                          f"killpoint-runs/<session>/run-00000") from None
    except OSError as error:  # not a regular file, too big, not readable
        raise ConfigError(f"{path}: cannot be read ({error}); {what_it_is}: give a run directory it wrote, "
                          f"readable by you") from None
    except ValueError as error:
        raise ConfigError(f"{path}: not JSON ({error}); {what_it_is} and never leaves one half-written, so "
                          f"something else changed it: rerun the run (its token is in the harness's output)") from None
