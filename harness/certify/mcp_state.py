"""A server's state beyond its world: the read tools that show it, and the creator tools that build it.

Two kinds of the server's own tools help certify a third (issue 28, items 2 and 4):

- *Read tools* (``readOnlyHint: true``, no required argument) show what the
  server keeps, in its memory too: every snapshot holds what each returns
  (``mcp: NAME``), so an effect kept only in memory is compared like a file.
  Only reads whose answer is a view of the state are used: two calls on a
  fresh world answer alike, leave the world as it was, and a second server on
  another fresh world answers the same (``mcp.stable_reads``). A clock, a
  toggle or a read that writes would otherwise make every trial differ.
- *Creator tools* (their name or hints say they create, add or write) build
  a state for a tool that acts only on what another tool made: the setup of
  ``trials.StateBuilder``, whose names the tool's arguments then draw from.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

READ_KEY = "mcp: "  # a snapshot key holding a read tool's answer (a world's keys are relative paths)
NAME_KEYS = re.compile(r"name$|^id$|id$|^key$|^title$", re.IGNORECASE)
MAX_VIEW = 4096  # a longer answer is kept as its length and digest: a certificate stays readable
CREATES = frozenset({"create", "new", "make", "init"})
ADDS = frozenset({"add", "insert", "write", "save", "put", "append", "upload", "push", "store"})


def is_read(entry: dict[str, Any]) -> bool:
    """A tool that says it only reads and needs no argument: what it returns is a view of the server's state.

    A read that needs arguments names a part of the world (a file, a revision),
    which the world's snapshot already holds; one with none shows the whole.
    """
    schema = entry.get("inputSchema") or {}
    return (entry.get("annotations") or {}).get("readOnlyHint") is True and not schema.get("required")


def is_creator(entry: dict[str, Any]) -> bool:
    """A tool that may write and whose name says it creates, adds or writes, or whose hints say it only adds."""
    hints = entry.get("annotations") or {}
    if hints.get("readOnlyHint") is True:
        return False
    return bool(words(str(entry.get("name"))) & (CREATES | ADDS)) or hints.get("destructiveHint") is False


def words(name: str) -> set[str]:
    """The words of a tool name, lower case: ``create_entities``, ``createEntities`` and ``create-entities`` alike."""
    return {word.lower() for word in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name)}


def creator_order(name: str) -> tuple[bool, str]:
    """Tools that create come first: Hypothesis shrinks a setup toward its first creator."""
    return not words(name) & CREATES, name


def names_in(setup: tuple[dict[str, Any], ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What the setup calls named: (the strings given to name-like keys, every string they were given), in order.

    An entity's ``name`` is what a later call names it by (``entityName``,
    ``from``); its type or its observations rarely are, so draws prefer the former.
    """
    named: list[str] = []
    every: list[str] = []

    def walk(value: Any, key: str) -> None:
        if isinstance(value, str) and value:
            every.append(value)
            if NAME_KEYS.search(key):
                named.append(value)
        elif isinstance(value, list):
            for item in value:
                walk(item, key)
        elif isinstance(value, dict):
            for inner, item in value.items():
                walk(item, str(inner))

    for step in setup:
        walk(step["args"], "")
    return tuple(dict.fromkeys(named)), tuple(dict.fromkeys(every))


def shown_view(text: str) -> str:
    """A read tool's answer as a snapshot holds it: JSON indented, keys sorted (a diff shows the change), else as is."""
    try:
        text = json.dumps(json.loads(text), indent=1, sort_keys=True, ensure_ascii=False)
    except ValueError:
        pass
    if len(text) <= MAX_VIEW:
        return text
    return f"{len(text)} characters, sha256:{hashlib.sha256(text.encode()).hexdigest()}"
