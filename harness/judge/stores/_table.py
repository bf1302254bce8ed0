"""The ``[journal]`` table of a scenario: which keys each format takes, and every problem of one table.

The harness-core validator quotes these problems as the scenario's own; a
reader is only built (``reader_for``) from a table that has none.
"""

from __future__ import annotations

import difflib
import re
from pathlib import PurePosixPath
from typing import Any

from killpoint import protocol
from killpoint.harness.judge.stores._sql_text import select_problem
from killpoint.harness.model import Plan

TASK_ID = "{task_id}"
STATUSES = (protocol.RUNNING, protocol.SUCCEEDED, protocol.FAILED)
FIELD_NAMES = ("op", "call", "status", "class")
STEPS = ("name", "order")

_MAPPED = ("path", "fields", "status")
# Every key each format takes (``format`` aside), and the ones it needs.
FORMAT_KEYS: dict[str, tuple[str, ...]] = {
    "killpoint": ("path",),
    "json": _MAPPED + ("records",),
    "jsonl": _MAPPED,
    "sqlite": _MAPPED + ("query",),
    "langgraph-sqlite": ("path", "steps", "thread"),
    "dbos-sqlite": ("path", "workflow"),
    # The same frameworks on PostgreSQL: the store is the scenario's [database], not a file.
    "langgraph-postgres": ("steps", "thread", "schema"),
    "dbos-postgres": ("workflow", "schema"),
}
# The formats whose store is in the scenario's database server ([database]), dumped at each kill.
DATABASE_FORMATS = ("langgraph-postgres", "dbos-postgres")
REQUIRED_KEYS: dict[str, tuple[str, ...]] = {
    "killpoint": (), "json": _MAPPED, "jsonl": _MAPPED, "sqlite": _MAPPED + ("query",),
    "langgraph-sqlite": (), "dbos-sqlite": (), "langgraph-postgres": (), "dbos-postgres": (),
}
# Where a format's store lives when the table gives no path: where killpoint's own runtime and
# the killpoint.frameworks instrumentation write it.
DEFAULT_PATHS = {"killpoint": protocol.JOURNAL_NAME, "langgraph-sqlite": "checkpoints.sqlite",
                 "dbos-sqlite": "dbos.sqlite"}
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def with_task_id(template: str | None, plan: Plan) -> str | None:
    """A ``thread`` or ``workflow`` key's value for ``plan`` (``{task_id}`` put in), or None when none is given."""
    return template.replace(TASK_ID, plan.task_id) if template else None


def journal_problems(table: object, where: str) -> list[str]:
    """Every problem of a ``[journal]`` table, each naming ``where: journal.KEY``, what is wrong and the fix."""
    if not isinstance(table, dict):
        return [f"{where}: journal: must be a table (format = ..., path = ...), not {type(table).__name__}"]
    form = table.get("format")
    if not isinstance(form, str) or form not in FORMAT_KEYS:
        return [f"{where}: journal.format: {_unknown(form, FORMAT_KEYS)}; give one of {', '.join(FORMAT_KEYS)}"]
    problems = [f"{where}: journal.{key}: {_unknown(key, FORMAT_KEYS[form], 'key')} for format {form!r}; "
                f"it takes {', '.join(FORMAT_KEYS[form])}" for key in table if key != "format"
                and key not in FORMAT_KEYS[form]]
    problems += [f"{where}: journal.{key}: missing; format {form!r} needs it (see docs/journal-mapping.md)"
                 for key in REQUIRED_KEYS[form] if key not in table]
    for key, check in _CHECKS.items():
        if key in table and key in FORMAT_KEYS[form]:
            problems += [f"{where}: journal.{key}: {problem}" for problem in check(table[key])]
    return problems


def _unknown(value: object, known: Any, what: str = "format") -> str:
    if not isinstance(value, str):
        return f"{what} {value!r} is not a string" if value is not None else f"no {what} given"
    close = difflib.get_close_matches(value, list(known), n=1)
    return f"unknown {what} {value!r}" + (f" (did you mean {close[0]!r}?)" if close else "")


def path_problems(path: object) -> list[str]:
    if not isinstance(path, str) or not path.strip():
        return ["must be a non-empty string: a file under the workload folder ($KILLPOINT_RUN_DIR)"]
    problems = _name_problems(path)
    if escape := path_escape(path):
        problems.append(f"{path!r} {escape}; give a path relative to the workload folder, inside it")
    return problems


def path_escape(path: str) -> str | None:
    """Why ``path`` does not name a file inside the workload folder, or None when it does."""
    if "\0" in path or "\\" in path:
        return "holds a NUL or a backslash"
    pure = PurePosixPath(path)
    if pure.is_absolute():
        return "is absolute"
    if ".." in pure.parts:
        return "climbs out with '..'"
    if not pure.parts or pure.parts[-1] == ".":
        return "names no file"
    return None


def resolved_path(template: str, task_id: str) -> str | None:
    """The store's path for a plan (``{task_id}`` filled in), or None when the filled path leaves the folder."""
    path = template.replace(TASK_ID, task_id)
    return None if path_escape(path) else str(PurePosixPath(path))


def _fields_problems(fields: object) -> list[str]:
    if not isinstance(fields, dict):
        return [("must be a table naming where each record keeps its op, call, status (and class): "
                'fields = { call = "llmCallId", status = "status" }')]
    problems = [f"unknown field {name!r}; the fields are {', '.join(FIELD_NAMES)}"
                for name in fields if name not in FIELD_NAMES]
    problems += [f"missing {name!r}; name the record's key (or column) holding the {name}"
                 for name in ("call", "status") if name not in fields]
    problems += [f"{name} must be a non-empty string (a key or a column name), not {value!r}"
                 for name, value in fields.items() if name in FIELD_NAMES and (not isinstance(value, str) or not value)]
    return problems


def _status_problems(status: object) -> list[str]:
    if not isinstance(status, dict):
        return ['must be a table from killpoint\'s statuses to the runtime\'s: status = { SUCCEEDED = ["done"], ... }']
    problems = [f"{name!r} is not a status killpoint reads; the keys are {', '.join(STATUSES)}"
                for name in status if name not in STATUSES]
    if protocol.SUCCEEDED not in status:
        problems.append("missing SUCCEEDED; name the runtime's value(s) for a step that completed")
    seen: dict[str, str] = {}
    for name, values in status.items():
        if not isinstance(values, list) or not values or not all(isinstance(value, str) for value in values):
            problems.append(f"{name}: must be a non-empty list of the runtime's status strings, not {values!r}")
            continue
        for value in values:
            if seen.setdefault(value, name) != name:
                problems.append(f"{value!r} is mapped to both {seen[value]} and {name}; map it to one")
    return problems


def _query_problems(query: object) -> list[str]:
    if not isinstance(query, str) or not query.strip():
        return ["must be one SELECT statement (a string)"]
    problem = select_problem(query)
    return [problem] if problem else []


def _one_of(choices: tuple[str, ...]) -> Any:
    def check(value: object) -> list[str]:
        return [] if value in choices else [f"{value!r} is not one of {', '.join(map(repr, choices))}"]
    return check


def _name_problems(value: object) -> list[str]:
    if not isinstance(value, str) or not value:
        return [f"must be a non-empty string ({TASK_ID} is the plan's task_id), not {value!r}"]
    return [f"{placeholder} is not a placeholder; only {TASK_ID} (the plan's task_id) is"
            for placeholder in _PLACEHOLDER.findall(value) if placeholder != TASK_ID]


def _schema_problems(schema: object) -> list[str]:
    if isinstance(schema, str) and _SCHEMA.fullmatch(schema):
        return []
    return [f"{schema!r:.80} is not a schema's name (lower-case letters, digits and _, as the framework's "
            "setting names it)"]


_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_CHECKS = {"path": path_problems, "fields": _fields_problems, "status": _status_problems,
           "query": _query_problems, "records": _name_problems, "steps": _one_of(STEPS),
           "thread": _name_problems, "workflow": _name_problems, "schema": _schema_problems}
