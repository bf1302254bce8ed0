"""The scenario file's fields, as one table: what each holds, and the fix when it does not.

Every field a scenario file may have is a row here; ``scenario_problems``
checks a whole document against the table and returns every problem at once,
each naming the file, the field and the fix, so a bad file is refused before
anything runs. The values that become paths (world files, service areas, the
scenario's name, which names its evidence folder) are confined here too: none
may reach outside the world or the runs folder.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from killpoint.harness.model import BACKENDS

# A name that is one safe path component: an evidence folder, a state area.
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
SCHEDULE_MODES = ("exhaustive", "random")
MAX_DEPTH = 6
MAX_EXTRA_INCARNATIONS = 100

Check = Callable[[Any], str | None]  # what is wrong with a value, or None


@dataclass(frozen=True)
class Field:
    key: str
    check: Check
    fix: str


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _string(value: Any) -> str | None:
    return None if isinstance(value, str) else f"{value!r} is not a string"


def _within(low: int, high: int) -> Check:
    def check(value: Any) -> str | None:
        if not _whole(value):
            return f"{value!r} is not a whole number"
        return None if low <= value <= high else f"{value} is outside {low}..{high}"

    return check


def _one_of(choices: tuple[str, ...]) -> Check:
    def check(value: Any) -> str | None:
        if value in choices:
            return None
        close = difflib.get_close_matches(str(value), choices, n=1)
        return f"{value!r} is not one of {', '.join(choices)}" + (f" (did you mean {close[0]!r}?)" if close else "")

    return check


def _name(value: Any) -> str | None:
    if not isinstance(value, str) or not SAFE_NAME.match(value):
        return f"{value!r} is not a plain name (it names the evidence folder)"
    return None


def _workload(value: Any) -> str | None:
    if isinstance(value, str):
        try:
            value = shlex.split(value)
        except ValueError as error:
            return f"the command does not parse as a shell would split it ({error})"
    if not isinstance(value, list) or not value or not all(isinstance(word, str) for word in value):
        return "missing or not a command"
    return None


def _timeout(value: Any) -> str | None:
    if not _number(value) or not math.isfinite(value) or value <= 0:
        return f"{value!r} is not a positive number of seconds"
    return None


def _plan(value: Any) -> str | None:
    return None if isinstance(value, str | dict) else f"{value!r} is neither a table nor a file name"


def _table(value: Any) -> str | None:
    return None if isinstance(value, dict) else f"{value!r} is not a table"


SCENARIO_FIELDS = (
    Field("name", _name, 'name = "my-scenario" (letters, digits, ".", "_", "-"; at most 100)'),
    Field("description", _string, 'description = "what this scenario exercises"'),
    Field("workload", _workload, 'workload = ["{python}", "-m", "my_runtime"]'),
    Field("catalogue", _string, 'catalogue = "reference" or the path of a catalogue file'),
    Field("timeout", _timeout, "timeout = 20 (seconds one incarnation may take)"),
    Field("max_incarnations", _within(1, MAX_EXTRA_INCARNATIONS),
          f"max_incarnations = 3 (incarnations allowed after the last kill, 1..{MAX_EXTRA_INCARNATIONS})"),
    Field("plan", _plan, '[plan] with task_id and [[plan.calls]], or plan = "plan.json"'),
    Field("world", _table, '[world.files] "notes/a.txt" = "text" and [world.state.AREA] ...'),
    Field("schedule", _table, '[schedule] mode = "exhaustive" (depth = 1) or mode = "random" (runs = 50, seed = 0)'),
    Field("backend", _one_of(BACKENDS), 'backend = "forkserver", "subprocess" or "docker"'),
    Field("image", _string, 'image = "killpoint-host:1" (a local Docker image)'),
)


def _kill_list(value: Any) -> str | None:
    if not isinstance(value, list) or not all(isinstance(kill, str) for kill in value):
        return f"{value!r} is not a list of kill points"
    return None


SCHEDULE_FIELDS = (
    Field("mode", _one_of(SCHEDULE_MODES), 'mode = "exhaustive" or "random"'),
    Field("depth", _within(1, MAX_DEPTH), f"depth = 2 (kills per schedule, 1..{MAX_DEPTH})"),
    Field("runs", _within(1, 1_000_000), "runs = 200 (random schedules)"),
    Field("seed", _within(0, 2**63 - 1), "seed = 0"),
    Field("kill_at", _kill_list, 'kill_at = ["c1:after_effect"] (a list: one kill per incarnation)'),
)


def table_problems(where: str, data: dict[str, Any], fields: tuple[Field, ...]) -> list[str]:
    """Every unknown key and every ill-typed value of one table."""
    known = {row.key: row for row in fields}
    problems = []
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            problems.append(f"{where}: unknown key {key!r}; {hint}known keys: {', '.join(sorted(known))}")
            continue
        wrong = known[key].check(data[key])
        if wrong is not None:
            problems.append(f"{where}: {key}: {wrong}; write {known[key].fix}")
    return problems


def world_problems(where: str, world: dict[str, Any]) -> list[str]:
    """The world's files stay inside ``files/``, its areas are plain names, and everything is JSON."""
    problems = table_problems(where + ": world", world, (
        Field("files", _table, '[world.files] "notes/a.txt" = "text"'),
        Field("state", _table, "[world.state.AREA] key = value"),
    ))
    files = world.get("files", {})
    for relative, text in (files.items() if isinstance(files, dict) else ()):
        pure = PurePosixPath(relative)
        if not relative or pure.is_absolute() or ".." in pure.parts or "\x00" in relative:
            problems.append(f"{where}: world.files.{relative!r}: a world file is a relative path inside the world "
                            f"(no '/' at the start, no '..'), e.g. \"notes/todo.txt\"")
        if not isinstance(text, str):
            problems.append(f"{where}: world.files.{relative!r}: {text!r} is not text; write the file's content "
                            f'as a string, e.g. "5"')
    state = world.get("state", {})
    for area, value in (state.items() if isinstance(state, dict) else ()):
        if not SAFE_NAME.match(area) or "." in area:
            problems.append(f"{where}: world.state.{area!r}: a service area is a plain name (letters, digits, _ -), "
                            f"e.g. [world.state.alarms]")
        elif (wrong := not_json(value)) is not None:
            problems.append(f"{where}: world.state.{area}: {wrong}")
    return problems + _latency_problems(where, state)


def _latency_problems(where: str, state: Any) -> list[str]:
    """``[world.state.latency]`` maps a tool to the seconds each of its calls takes."""
    latency = state.get("latency", {}) if isinstance(state, dict) else {}
    fix = "write it as [world.state.latency] tool_name = seconds (a number from 0 to 60)"
    if not isinstance(latency, dict):
        return [f"{where}: world.state.latency: {fix}"]
    return [f"{where}: world.state.latency.{tool}: {seconds!r} is not a delay; {fix}"
            for tool, seconds in latency.items() if not _number(seconds) or not 0 <= seconds <= 60]


def not_json(value: Any) -> str | None:
    """Why ``value`` cannot travel as JSON (a TOML date, NaN), or None."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as error:
        return f"holds a value JSON cannot carry ({error}); use strings, numbers, booleans, lists and tables"
    return None


def scenario_problems(where: str, data: dict[str, Any]) -> list[str]:
    """Every problem of a scenario document's own fields (the plan and catalogue are checked by their readers)."""
    problems = table_problems(where, data, SCENARIO_FIELDS)
    if "workload" not in data:
        problems.append(f'{where}: workload: missing; give the command, e.g. workload = ["{{python}}", "-m", "my_runtime"]')
    if isinstance(data.get("world"), dict):
        problems += world_problems(where, data["world"])
    if isinstance(data.get("schedule"), dict):
        problems += table_problems(f"{where}: [schedule]", data["schedule"], SCHEDULE_FIELDS)
    return problems
