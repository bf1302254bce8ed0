"""Field types of every journal and ledger record, checked before the checker trusts them.

The journal is written by the runtime under test, so anything may be in it: a
record whose fields have the wrong types is reported (``journal-well-formed``)
and left out of the judgement instead of crashing it. Ledger records that do not
fit are left out with a note. Evidence that could not be read at all
(``Evidence.unreadable``) is the checker's guards' business, not this module's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from killpoint import protocol as p
from killpoint.harness.codec import is_of
from killpoint.harness.judge.evidence import Evidence, JsonLines

_STR, _INT, _BOOL = (str,), (int,), (bool,)
JOURNAL_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    p.STARTED: {"op": _STR, "call": _STR, "tool": _STR, "class": _STR, "interactive": _BOOL, "attempt": _INT},
    p.FINISHED: {"op": _STR, "status": _STR},
    p.DECISION: {"found": _STR, "action": _STR, "incarnation": _INT},
    p.VERIFIED: {"op": _STR, "effect_found": _BOOL},
    p.TASK: {"status": _STR},
}
OPTIONAL_STRINGS = {p.DECISION: ("call", "op")}
LEDGER_KINDS = {p.LEDGER_INVOKED: _STR, p.LEDGER_EFFECT: _STR, p.LEDGER_PROBE: _STR, p.LEDGER_KILLED: _INT}


def journal_problem(record: dict[str, Any]) -> str | None:
    """Why a journal record cannot be trusted, or None."""
    kind = record.get("kind")
    if not isinstance(kind, str) or kind not in JOURNAL_FIELDS:
        return f"unknown record kind {kind!r}"
    wrong = [f"{name}={record.get(name)!r:.40}" for name, kinds in JOURNAL_FIELDS[kind].items()
             if not is_of(record.get(name), kinds)]
    wrong += [f"{name}={record[name]!r:.40}" for name in OPTIONAL_STRINGS.get(kind, ())
              if name in record and not is_of(record[name], _STR)]
    if kind == p.DECISION and not (is_of(record.get("call"), _STR) or is_of(record.get("op"), _STR)):
        wrong.append("neither call nor op")
    return f"{kind} record with {', '.join(wrong)}" if wrong else None


def ledger_problem(record: dict[str, Any]) -> str | None:
    kinds = [key for key in LEDGER_KINDS if key in record]
    if len(kinds) != 1:
        return f"a ledger record has exactly one of {', '.join(LEDGER_KINDS)}"
    if not is_of(record[kinds[0]], LEDGER_KINDS[kinds[0]]):
        return f"{kinds[0]}={record[kinds[0]]!r:.40}"
    if kinds[0] != p.LEDGER_KILLED and not is_of(record.get("call"), _STR):
        return f"call={record.get('call')!r:.40}"
    return None


def _keep(lines: JsonLines, problem_of: Callable[[dict[str, Any]], str | None]) -> tuple[JsonLines, list[str]]:
    kept, problems = [], []
    for line in lines.lines:
        problem = problem_of(line.record)
        if problem is None:
            kept.append(line)
        else:
            problems.append(f"{line.source}:{line.number}: {problem}; not trusted")
    return replace(lines, lines=tuple(kept)), problems


def trusted(evidence: Evidence) -> tuple[Evidence, list[str], list[str]]:
    """(evidence with ill-typed records left out, journal problems, ledger problems)."""
    journal, journal_problems = _keep(evidence.journal, journal_problem)
    at_kill = [_keep(copy, journal_problem)[0] for copy in evidence.journals_at_kill]
    found = [None if copy is None else _keep(copy, journal_problem)[0] for copy in evidence.journals_found]
    ledger, ledger_problems = _keep(evidence.ledger, ledger_problem)
    cleaned = replace(evidence, journal=journal, journals_at_kill=tuple(at_kill), journals_found=tuple(found),
                      ledger=ledger)
    return cleaned, journal_problems, ledger_problems
