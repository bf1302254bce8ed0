"""The fields of a scenario file and of a plan, as tables: what each holds, and the fix when it does not.

Every key a scenario may have is a row of a table here (the file's top level,
``[schedule]``, ``[world]``, the plan and each of its calls); ``table_problems``
checks one table of a document against its rows and returns every problem at
once, each naming the file, the field (as a dotted TOML path) and the fix, so a
bad file is refused before anything runs. A row may be required, and a
``[schedule]`` row says in which modes it acts: a key that would not act is a
problem, as a CLI flag that would not act is. The values that become paths
(world files, service areas, the scenario's name, which names its evidence
folder) are confined here too: none may reach outside the world or the runs
folder.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from killpoint.harness.config.limits import LIMITS, MAX_SECONDS, Limit
from killpoint.harness.model import BACKENDS

# A name that is one safe path component: an evidence folder, a state area.
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
EXHAUSTIVE, RANDOM, GIVEN = "exhaustive", "random", "given"  # GIVEN: [schedule] kill_at lists the kills itself
SCHEDULE_MODES = (EXHAUSTIVE, RANDOM)
# A world file's name ends up in a temporary name (".NAME.tmp") that must fit the file system's 255 bytes.
MAX_WORLD_NAME_BYTES = 200
MAX_WORLD_PATH_BYTES = 1024

Check = Callable[[Any], str | None]  # what is wrong with a value, or None


@dataclass(frozen=True)
class Field:
    """One key of a table: its check, the fix shown when the check fails, and when it must or may appear."""

    key: str
    check: Check
    fix: str
    required: bool = False
    modes: tuple[str, ...] = ()  # [schedule]: the modes in which the key acts (empty: every mode)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _string(value: Any) -> str | None:
    return None if isinstance(value, str) else f"{value!r} is not a string"


def _boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"{value!r} is not true or false"


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) and value.strip() else f"{value!r} is not a non-empty string"


def _within(limit: Limit) -> Check:
    """A whole number within ``limit``, one of ``limits.LIMITS``, the table the CLI's flags are checked with too."""
    def check(value: Any) -> str | None:
        if not _whole(value):
            return f"{value!r} is not a whole number"
        return None if limit.allows(value) else f"{value} is outside {limit.low}..{limit.high}"

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
        return "not a command"
    if any("\x00" in word for word in value):
        return "a word of the command holds a NUL byte, which no command line can carry"
    return None


def _timeout(value: Any) -> str | None:
    return None if LIMITS["timeout"].allows(value) else f"{value!r} is not {LIMITS['timeout'].wanted()}"


def _plan(value: Any) -> str | None:
    return None if isinstance(value, str | dict) else f"{value!r} is neither a table nor a file name"


def _table(value: Any) -> str | None:
    return None if isinstance(value, dict) else f"{value!r} is not a table"


def _call_id(value: Any) -> str | None:
    if (wrong := _text(value)) is not None:
        return wrong
    return f"{value!r} contains ':', which separates call and point in a kill point" if ":" in value else None


def _calls(value: Any) -> str | None:
    if not isinstance(value, list):
        return f"{value!r:.60} is not a list of calls"
    return None if value else "empty: a plan makes at least one call"


def _args(value: Any) -> str | None:
    return _table(value) or not_json(value)


def _kill_list(value: Any) -> str | None:
    if not isinstance(value, list) or not value or not all(isinstance(kill, str) for kill in value):
        return f"{value!r:.60} is not a list of kill points (one kill per incarnation, at least one)"
    return None


SCENARIO_FIELDS = (
    Field("name", _name, 'name = "my-scenario" (letters, digits, ".", "_", "-"; at most 100)'),
    Field("description", _string, 'description = "what this scenario exercises"'),
    Field("workload", _workload, 'workload = ["{python}", "-m", "my_runtime"]', required=True),
    Field("catalogue", _string, 'catalogue = "reference" or the path of a catalogue file'),
    Field("timeout", _timeout, f"timeout = 20 (seconds one incarnation may take, at most {MAX_SECONDS})"),
    Field("max_incarnations", _within(LIMITS["max_incarnations"]),
          f"max_incarnations = 3 (incarnations allowed after the last kill, 1..{LIMITS['max_incarnations'].high})"),
    Field("plan", _plan, '[plan] with task_id and [[plan.calls]], or plan = "plan.json"', required=True),
    Field("world", _table, '[world.files] "notes/a.txt" = "text" and [world.state.AREA] ...'),
    Field("schedule", _table, '[schedule] mode = "exhaustive" (depth = 1) or mode = "random" (runs = 50, seed = 0)'),
    Field("backend", _one_of(BACKENDS), 'backend = "forkserver", "subprocess" or "docker"'),
    Field("image", _text, 'image = "killpoint-host:1" (a local Docker image)'),
    # Its keys are the store readers' (judge.stores.journal_problems checks them with the scenario).
    Field("world_on_device", _boolean, "world_on_device = true (a power loss drops what the fake tools never "
                                       "fsynced in the world too: their own durability under test)"),
    Field("journal", _table, '[journal] format = "killpoint" (the runtime\'s own durable record: '
                             'docs/journal-mapping.md)'),
    Field("agent", _table, '[agent] (the workload is an unmodified agent, pointed at the model and tools killpoint '
                           'serves: docs/agents.md)'),
    # Its keys are config/database_table's (checked with the scenario).
    Field("database", _table, '[database] postgres = true (a PostgreSQL server for each run: docs/frameworks.md)'),
)

SCHEDULE_FIELDS = (
    Field("mode", _one_of(SCHEDULE_MODES), 'mode = "exhaustive" or "random"', modes=SCHEDULE_MODES),
    Field("depth", _within(LIMITS["depth"]), f"depth = 2 (kills per schedule, 1..{LIMITS['depth'].high})",
          modes=(EXHAUSTIVE,)),
    Field("runs", _within(LIMITS["runs"]), "runs = 200 (random schedules)", modes=(RANDOM,)),
    Field("seed", _within(LIMITS["seed"]), "seed = 0", modes=(RANDOM,)),
    Field("kill_at", _kill_list, 'kill_at = ["c1:after_effect"] (a list: one kill per incarnation)', modes=(GIVEN,)),
)
# What a [schedule] must hold in a mode, beyond the mode itself.
SCHEDULE_NEEDS = {RANDOM: ("runs",)}

WORLD_FIELDS = (
    Field("files", _table, '[world.files] "notes/a.txt" = "text"'),
    Field("state", _table, "[world.state.AREA] key = value"),
)

PLAN_FIELDS = (
    Field("task_id", _text, 'task_id = "t1" (the task the plan carries out)', required=True),
    Field("calls", _calls, 'one call or more: [{"call_id": "c1", "tool": "read_file", "args": {"path": "a.txt"}}]',
          required=True),
)

CALL_FIELDS = (
    Field("call_id", _call_id, 'call_id = "c1" (unique in the plan; no ":")', required=True),
    Field("tool", _text, 'tool = "read_file" (`killpoint catalogue` lists the tools)', required=True),
    Field("args", _args, 'args = { path = "notes/a.txt" } (the tool\'s arguments, JSON values)'),
)


def table_problems(where: str, data: dict[str, Any], fields: tuple[Field, ...], field_path: str = "") -> list[str]:
    """Every unknown key, missing required key and ill-typed value of one table.

    A problem reads ``WHERE: FIELD_PATH.KEY: what is wrong; write FIX``; ``field_path``
    is the table's own dotted path in the document ("" for the top level).
    """
    known = {row.key: row for row in fields}
    problems = []
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            table = f" of {field_path}" if field_path else ""
            problems.append(f"{where}: unknown key {key!r}{table}; {hint}known keys: {', '.join(sorted(known))}")
            continue
        wrong = known[key].check(data[key])
        if wrong is not None:
            problems.append(f"{where}: {_dotted(field_path, key)}: {wrong}; write {known[key].fix}")
    problems += [f"{where}: {_dotted(field_path, row.key)}: missing; write {row.fix}"
                 for row in fields if row.required and row.key not in data]
    return problems


def _dotted(field_path: str, key: str) -> str:
    return f"{field_path}.{key}" if field_path else key


def file_schedule_mode(schedule: dict[str, Any]) -> str:
    """The mode a checked [schedule] chooses: GIVEN when it lists kill_at, else its mode, exhaustive by default."""
    return GIVEN if "kill_at" in schedule else str(schedule.get("mode", EXHAUSTIVE))


def schedule_problems(where: str, schedule: dict[str, Any]) -> list[str]:
    """The [schedule] table's own problems, and each key that would not act in the mode it chooses.

    ``kill_at`` chooses the kills itself (mode GIVEN); else ``mode``, exhaustive by default.
    The kill points themselves are checked against the plan by the scenario's reader.
    """
    problems = table_problems(where, schedule, SCHEDULE_FIELDS, "schedule")
    if problems:
        return problems
    mode = file_schedule_mode(schedule)
    chosen = {GIVEN: "kill_at gives the kills", EXHAUSTIVE: f'the mode is "{EXHAUSTIVE}"',
              RANDOM: f'the mode is "{RANDOM}"'}[mode]
    for row in SCHEDULE_FIELDS:
        if row.key in schedule and mode not in row.modes:
            goes_with = " or ".join("kill_at" if each == GIVEN else f'mode = "{each}"' for each in row.modes)
            problems.append(f"{where}: schedule.{row.key}: goes with {goes_with}, but here {chosen}; drop it, "
                            f"or choose the mode it goes with")
    fixes = {row.key: row.fix for row in SCHEDULE_FIELDS}
    problems += [f'{where}: schedule.{need}: missing; mode = "{mode}" needs it: write {fixes[need]}'
                 for need in SCHEDULE_NEEDS.get(mode, ()) if need not in schedule]
    return problems


def world_problems(where: str, world: dict[str, Any]) -> list[str]:
    """The world's files stay inside ``files/``, its areas are plain names, and everything is JSON."""
    problems = table_problems(where, world, WORLD_FIELDS, "world")
    files = world.get("files", {})
    if isinstance(files, dict):
        problems += _world_file_problems(where, files)
    state = world.get("state", {})
    for area, value in (state.items() if isinstance(state, dict) else ()):
        if not SAFE_NAME.match(area) or "." in area:
            problems.append(f"{where}: world.state.{area!r}: a service area is a plain name (letters, digits, _ -), "
                            f"e.g. [world.state.alarms]")
        elif (wrong := not_json(value)) is not None:
            problems.append(f"{where}: world.state.{area}: {wrong}")
    return problems + _latency_problems(where, state)


def _world_file_problems(where: str, files: dict[str, Any]) -> list[str]:
    """Each world file a relative path of plain names, within the file system's limits, none a folder of another."""
    problems = []
    folders = {str(parent) for relative in files for parent in PurePosixPath(relative).parents}
    for relative, text in files.items():
        pure = PurePosixPath(relative)
        here = f"{where}: world.files.{relative!r}"
        if not relative.strip() or not pure.parts or pure.is_absolute() or ".." in pure.parts or "\x00" in relative:
            problems.append(f"{here}: a world file is a relative path inside the world "
                            f"(no '/' at the start, no '..'), e.g. \"notes/todo.txt\"")
        elif (longest := max(len(part.encode()) for part in pure.parts)) > MAX_WORLD_NAME_BYTES \
                or len(relative.encode()) > MAX_WORLD_PATH_BYTES:
            problems.append(f"{here}: too long for a file name ({longest} bytes in one name, {len(relative.encode())} "
                            f"in all); keep each name within {MAX_WORLD_NAME_BYTES} bytes and the path within "
                            f"{MAX_WORLD_PATH_BYTES}")
        elif str(pure) in folders:
            problems.append(f"{here}: another world file lies inside it, so it would be a folder and a file; "
                            f"rename one of them")
        if not isinstance(text, str):
            problems.append(f"{here}: {text!r} is not text; write the file's content as a string, e.g. \"5\"")
    return problems


def _latency_problems(where: str, state: Any) -> list[str]:
    """``[world.state.latency]`` maps a tool to the seconds each of its calls takes."""
    latency = state.get("latency", {}) if isinstance(state, dict) else {}
    fix = "write it as [world.state.latency] tool_name = seconds (a number from 0 to 60)"
    if not isinstance(latency, dict):
        return [f"{where}: world.state.latency: {fix}"]
    return [f"{where}: world.state.latency.{tool}: {seconds!r} is not a delay; {fix}"
            for tool, seconds in latency.items() if not _number(seconds) or not 0 <= seconds <= 60]


def plan_problems(where: str, data: Any, field_path: str = "") -> list[str]:
    """Every problem of a plan: its own fields, each call's, and call ids given twice.

    ``field_path`` is where the plan sits in its document: "plan" inline in a
    scenario, "" for a plan file of its own.
    """
    if not isinstance(data, dict):
        return [f"{where}: {field_path or 'the plan'}: {data!r:.60} is not a plan; write "
                f'{{"task_id": "t1", "calls": [{{"call_id": "c1", "tool": "read_file", "args": {{}}}}]}}']
    problems = table_problems(where, data, PLAN_FIELDS, field_path)
    calls = data.get("calls")
    seen: set[str] = set()
    for index, call in enumerate(calls if isinstance(calls, list) else ()):
        call_path = f"{_dotted(field_path, 'calls')}[{index}]"
        if not isinstance(call, dict):
            problems.append(f"{where}: {call_path}: {call!r:.60} is not a call; write a table with call_id, "
                            f"tool and args")
            continue
        problems += table_problems(where, call, CALL_FIELDS, call_path)
        call_id = call.get("call_id")
        if isinstance(call_id, str) and call_id in seen:
            problems.append(f"{where}: {call_path}.call_id: {call_id!r} is used twice; call ids must be unique "
                            f"in a plan")
        seen.add(call_id if isinstance(call_id, str) else "")
    return problems


def not_json(value: Any) -> str | None:
    """Why ``value`` cannot travel as JSON (a TOML date, NaN), or None."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:
        return f"holds a value JSON cannot carry ({error}); use strings, numbers, booleans, lists and tables"
    return None


def scenario_problems(where: str, data: dict[str, Any]) -> list[str]:
    """Every problem of a scenario document's own fields and tables.

    The plan (inline or a file), the catalogue and the kill points of
    ``[schedule] kill_at`` are checked by the scenario's reader, which reports
    their problems with these.
    """
    problems = table_problems(where, data, SCENARIO_FIELDS)
    if isinstance(data.get("world"), dict):
        problems += world_problems(where, data["world"])
    if isinstance(data.get("schedule"), dict):
        problems += schedule_problems(where, data["schedule"])
    if data.get("backend") in BACKENDS and data["backend"] != "docker" and "image" in data:
        problems.append(f"{where}: image: goes with backend = \"docker\", but the backend here is "
                        f"{data['backend']!r}; drop image, or choose docker")
    return problems
