"""How a persisted value is checked as it is read back: the primitives each value's ``from_json`` is made of.

A run persists its incarnations (``incarnations.json``) and its outcome
(``verdict.json``, and each run of a JSON report); ``model`` gives each of
those values one ``to_json`` and one ``from_json``, and the evidence reader,
``killpoint show`` and ``killpoint merge`` read through them alone. What they
read was written by a workload's neighbour or handed in by a user, so reading
never trusts it: every field missing, ill-typed or out of bounds is named, and
the value is refused whole (``Undecodable``), for each reader to answer as it
must (a run unknown, or exit 2 naming the file).

An outcome carries the version of its shape (``SCHEMA``), and has every key of
it; one without it was written before versions were and reads as version 1,
a key added before then (``rules``, ``shared_incarnations``, an incarnation's
``escaped``) as what its absence meant.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from killpoint.errors import InternalError

T = TypeVar("T")

SCHEMA = 1  # the version of an outcome's shape, written with it as "schema"
NONE = type(None)
MAX_SECONDS = 366 * 24 * 3600  # no duration a session writes is longer (a negative or astronomic one was forged)


class Undecodable(InternalError):
    """A persisted value that is not as killpoint writes it; ``problems`` names each field and what is wrong."""

    def __init__(self, problems: list[str] | tuple[str, ...]) -> None:
        super().__init__("; ".join(problems))
        self.problems = tuple(problems)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.problems,)


def decode_all(decode: Callable[..., T], items: Iterable[tuple[str, tuple[Any, ...]]]) -> tuple[list[T], list[str]]:
    """What ``decode(*arguments)`` makes of each item, and every problem of those it refuses, each prefixed with
    its item's ``where`` (``findings[2].``): all named in one pass, as a user fixes them."""
    decoded, problems = [], []
    for where, arguments in items:
        try:
            decoded.append(decode(*arguments))
        except Undecodable as wrong:
            problems += [f"{where}{problem}" for problem in wrong.problems]
    return decoded, problems


def is_of(value: Any, kinds: tuple[type, ...]) -> bool:
    """``isinstance``, except that a bool is a number only where ``kinds`` names bool (JSON tells them apart)."""
    return isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)


def field_problems(data: dict[str, Any], types: dict[str, tuple[type, ...]], *, text_lists: tuple[str, ...] = (),
                   text_tables: tuple[str, ...] = (), exact: bool = True) -> list[str]:
    """Every field of ``types`` missing from ``data`` or of another JSON type, and (if ``exact``) every field
    ``types`` does not name; ``text_lists`` must hold text, ``text_tables`` map names to text."""
    problems = [f"{name}: missing" for name in types if name not in data]
    if exact:
        problems += [f"{name}: unknown field" for name in sorted(set(data) - set(types))]
    for name, kinds in types.items():
        if name not in data:
            continue
        value = data[name]
        if not is_of(value, kinds):
            wanted = " or ".join(kind.__name__ for kind in kinds)
            problems.append(f"{name}: {type(value).__name__} {value!r:.40}, not {wanted}")
        elif name in text_lists and not all(isinstance(item, str) for item in value):
            problems.append(f"{name}: must be a list of text")
        elif name in text_tables and not all(isinstance(item, str) for item in value.values()):
            problems.append(f"{name}: must map names to text")
    return problems


def seconds_problems(durations: dict[str, Any]) -> list[str]:
    """Each of ``durations`` (field -> value) that is no number of seconds from 0 to MAX_SECONDS."""
    return [f"{field}: {value!r:.40} is not a number of seconds from 0 to {MAX_SECONDS}"
            for field, value in durations.items()
            if not (is_of(value, (int, float)) and 0 <= value <= MAX_SECONDS)]


def schema_problems(entry: dict[str, Any]) -> list[str]:
    """Why ``entry`` is of a shape this killpoint does not read (a later version's), or []."""
    version = entry.get("schema", SCHEMA)
    if version == SCHEMA and is_of(version, (int,)):
        return []
    return [f"schema: {version!r:.40}, but this killpoint reads version {SCHEMA}: read it with the killpoint that "
            f"wrote it"]
