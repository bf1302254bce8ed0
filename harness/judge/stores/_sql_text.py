"""Whether a ``journal.query`` is one SELECT, told from its tokens as SQLite splits them, before anything runs.

A query is one statement (a ``;`` may end it, nothing may follow) whose
main verb is ``SELECT`` or ``VALUES``, also after a ``WITH`` list of common
table expressions: ``WITH a AS (SELECT 1) INSERT ...`` is an INSERT. Words
inside strings, quoted names and comments are not words. The reader's
authorizer still refuses any write when the query runs; this says so at load
time, naming the field and the fix (exit 2).
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"""
    (?P<space>\s+|--[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<quoted>'(?:[^']|'')*'|"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\])
  | (?P<word>[\w$]+)
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)
_QUOTES = frozenset("'\"`[")
_READS = ("SELECT", "VALUES")


def select_problem(query: str) -> str | None:
    """Why ``query`` is not one SELECT statement, or None when it is."""
    tokens = [match.group() for match in _TOKEN.finditer(query) if match.lastgroup != "space"]
    if any(token in _QUOTES for token in tokens):
        return f"{_shown(query)} has an unterminated quote; give one SELECT statement"
    statements = _statements(tokens)
    if not statements:
        return f"{_shown(query)} holds no statement; give one SELECT statement"
    if len(statements) > 1:
        return (f"{_shown(query)} holds {len(statements)} statements; the store is only ever read: "
                "give one SELECT statement (nothing after its ';')")
    verb = _main_verb(statements[0])
    if verb not in _READS:
        shape = f"a WITH ... {verb}" if statements[0][0].upper() == "WITH" and verb else "not a SELECT"
        return f"{_shown(query)} is {shape}; the store is only ever read: give one SELECT statement"
    return None


def _shown(query: str) -> str:
    return repr(query if len(query) <= 120 else query[:117] + "...")


def _statements(tokens: list[str]) -> list[list[str]]:
    """The tokens split at each ``;``, empty statements dropped."""
    statements: list[list[str]] = [[]]
    for token in tokens:
        if token == ";":
            statements.append([])
        else:
            statements[-1].append(token)
    return [statement for statement in statements if statement]


def _main_verb(statement: list[str]) -> str | None:
    """The statement's main verb, upper-cased, past a WITH list; None where a WITH list does not parse."""
    if statement[0].upper() != "WITH":
        return statement[0].upper()
    at = 2 if len(statement) > 1 and statement[1].upper() == "RECURSIVE" else 1  # the first name
    while True:  # name [(columns)] AS [NOT] [MATERIALIZED] (select), ...
        at += 1  # past the name
        if at < len(statement) and statement[at] == "(":
            at = _after_group(statement, at)
        if at >= len(statement) or statement[at].upper() != "AS":
            return None
        at += 1
        for optional in ("NOT", "MATERIALIZED"):
            at += at < len(statement) and statement[at].upper() == optional
        if at >= len(statement) or statement[at] != "(":
            return None
        at = _after_group(statement, at)
        if at < len(statement) and statement[at] == ",":
            at += 1  # the next name
            continue
        return statement[at].upper() if at < len(statement) else None


def _after_group(statement: list[str], opening: int) -> int:
    """The index just past the ``)`` closing the ``(`` at ``opening`` (the statement's length if none does)."""
    depth = 0
    for at in range(opening, len(statement)):
        depth += {"(": 1, ")": -1}.get(statement[at], 0)
        if depth == 0:
            return at + 1
    return len(statement)
