"""An agent's own store, read for what it kept of each planned call: evidence beside the seams' verdict.

An agent judged at its network seams may keep its conversation somewhere it
finds again after a restart: the Agents SDK's ``SQLiteSession``, LangGraph's
``SqliteSaver``, Pydantic AI's message history dumped to JSON, a journal of
its own. Whatever the framework, the tool-call ids in it are the scripted
model's (``call_kp_c2``, ``call_kp_c2_2`` for a redo, ``call_kp_c2_verify`` for
a probe), so one reader serves them all: it walks every value the store holds
(a SQLite database's every table, a JSON document, JSON lines; JSON text in a
column and msgpack blobs decoded as plain data, no extension type built and
no code run) for objects that are a tool call's **result** in the shapes the
APIs and frameworks give one (a chat ``tool`` message, a Responses
``function_call_output``, an Anthropic ``tool_result``, LangChain's
``ToolMessage``, Pydantic AI's ``tool-return`` part), and for any other value
that **names** an id (the model's choice of it).

What it finds is quoted in the findings about each call, copy by copy, so a
reader sees why the agent did what the services saw: "the session held
c2's function_call but not its output at kill 0". It decides nothing: how a
framework resumes from what it kept (LangGraph drops writes of a checkpoint
never saved) is the framework's, and the verdict stays the seams'.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from killpoint import protocol
from killpoint.harness.agents.script import ID_PREFIX, planned_call_of, tells_unknown
from killpoint.harness.judge.stores._langgraph import msgpack_module
from killpoint.harness.judge.stores._sqlite_copy import SIDE_FILES, read_database, run_query
from killpoint.harness.judge.stores._store_file import StoreUnreadable, read_store, store_files, store_path
from killpoint.harness.model import DurableState, Plan, StepRecord

FORMAT = "agent-store"
SQLITE_HEADER = b"SQLite format 3\x00"
QUOTED_CHARS = 200
MARKER_SCAN_CHARS = 2_000  # of a result that is no text: how much is searched for a word saying "unknown"
EXCERPT_DEPTH = 32
# Values walked in one copy at most, and text decoded inside text (JSON in a column holding JSON) at most this deep.
VALUE_LIMIT = 2_000_000
NESTED_DECODING = 4
_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
# How the tool-call ids' strength of evidence ranks: a result outranks a result marked unknown, which outranks a name.
RESULT, RESULT_UNKNOWN, NOTE, NAMED = "result", "result marked unknown", "note", "named"
_RANK = {RESULT: 0, RESULT_UNKNOWN: 1, NOTE: 2, NAMED: 3}
# A tool-call id inside a text (a note telling the model a call may already have run), as a whole word.
_ID_IN_TEXT = re.compile(rf"(?<![A-Za-z0-9_-]){ID_PREFIX}[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Sighting:
    """One place the store holds a tool-call id: as what, where (file and place in it), and an excerpt there."""

    tool_call_id: str
    kind: str  # RESULT, RESULT_UNKNOWN, NOTE or NAMED
    where: str
    excerpt: str

    def quote(self) -> str:
        said = {RESULT: f"holds the result of {self.tool_call_id}",
                RESULT_UNKNOWN: f"holds a result of {self.tool_call_id} that says its outcome is unknown",
                NOTE: f"holds a text saying {self.tool_call_id}'s outcome is unknown",
                NAMED: f"names {self.tool_call_id}, with no result of it"}[self.kind]
        return f"{self.where} {said}: {self.excerpt}"

    def as_record(self) -> StepRecord:
        """Carried out of the reading child as a record keyed by the id (the child's answer is records)."""
        return StepRecord(self.tool_call_id, self.kind, json.dumps([self.where, self.excerpt]))

    @classmethod
    def of_record(cls, record: StepRecord) -> Sighting | None:
        try:
            where, excerpt = json.loads(record.quote)
        except (ValueError, TypeError):
            return None
        known = record.status in _RANK and isinstance(where, str) and isinstance(excerpt, str)
        return cls(record.call, record.status, where, excerpt) if known else None


@dataclass(frozen=True)
class AgentStore:
    """The files of an agent's own store (``[agent] store``), each a SQLite database, a JSON document or JSON lines."""

    paths: tuple[str, ...]
    name: str = FORMAT

    def files(self, plan: Plan) -> tuple[str, ...]:
        return tuple(file for path in self.paths for file in store_files(path, plan, SIDE_FILES))

    def held(self, folder: Path, plan: Plan) -> list[str]:
        """The store's files the copy in ``folder`` holds (a file the agent had not made yet is not there)."""
        held = []
        for template in self.paths:
            with contextlib.suppress(StoreUnreadable):
                if os.path.lexists(folder / (path := store_path(template, plan))):
                    held.append(path)
        return held

    def read(self, folder: Path, plan: Plan) -> DurableState:
        """Per planned call, the strongest sighting of each of its tool-call ids, a line each in its record's
        quote: SUCCEEDED when the store holds an attempt's result not marked unknown, else RUNNING. Never raises."""
        strongest: dict[str, Sighting] = {}
        problems: list[str] = []
        for template in self.paths:
            state = _read_file(folder, template, plan)
            problems += state.problems
            for record in state.records.values():
                if (sighting := Sighting.of_record(record)) is not None:
                    _keep_strongest(strongest, sighting)
        if problems:
            return DurableState.unreadable(True, *problems)
        return DurableState(_by_call(strongest.values(), plan), True, None)


def _by_call(sightings: Iterable[Sighting], plan: Plan) -> dict[str, StepRecord]:
    seen: dict[str, list[Sighting]] = {}
    attempt_results: set[str] = set()
    for sighting in sorted(sightings, key=lambda each: each.tool_call_id):
        named = planned_call_of(sighting.tool_call_id)
        if named is None or plan.call(named[0]) is None:
            continue
        seen.setdefault(named[0], []).append(sighting)
        if sighting.kind == RESULT and not named[1]:
            attempt_results.add(named[0])
    return {call: StepRecord(call, protocol.SUCCEEDED if call in attempt_results else protocol.RUNNING,
                             "\n".join(sighting.quote() for sighting in each)) for call, each in seen.items()}


def _read_file(folder: Path, template: str, plan: Plan) -> DurableState:
    """One file's sightings as records keyed by tool-call id (``Sighting.as_record``); none when it is absent."""
    try:
        path = store_path(template, plan)
        data = read_store(folder, path)
    except StoreUnreadable as problem:
        return DurableState.unreadable(True, *problem.args)
    if data is None:
        return DurableState({}, True, None)
    if data.startswith(SQLITE_HEADER):
        msgpack_module()  # imported here: the reading child, nobody, may not be allowed to read the installation
        return read_database(folder, template, plan, DurableState({}, True, None), _read_sqlite)
    try:
        found = _Walk(path).text_file(data)
    except StoreUnreadable as problem:
        return DurableState.unreadable(True, *problem.args)
    return DurableState({sighting.tool_call_id: sighting.as_record() for sighting in found}, True, None)


def _read_sqlite(connection: sqlite3.Connection, path: str, plan: Plan) -> DurableState:
    """Every value of every table (in the reading child): what a SQLite store holds of the tool-call ids."""
    walk = _Walk(path)
    for (table,) in run_query(connection, _TABLES)[1]:
        quoted = '"' + str(table).replace('"', '""') + '"'
        try:
            columns, rows = run_query(connection, f"SELECT rowid, * FROM {quoted}")
            keyed = True
        except sqlite3.OperationalError:  # a WITHOUT ROWID table
            columns, rows = run_query(connection, f"SELECT * FROM {quoted}")
            keyed = False
        for number, row in enumerate(rows, 1):
            where = f"{table}(rowid={row[0]})" if keyed else f"{table}(row {number})"
            for column, value in zip(columns[keyed:], row[keyed:], strict=True):
                walk.value(value, f"{where}.{column}")
    return DurableState({sighting.tool_call_id: sighting.as_record() for sighting in walk.found()}, True, None)


class _Walk:
    """Finds tool-call ids in values, keeping each id's strongest sighting; bounded by ``VALUE_LIMIT`` values."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.strongest: dict[str, Sighting] = {}
        self.walked = 0

    def found(self) -> list[Sighting]:
        return list(self.strongest.values())

    def text_file(self, data: bytes) -> list[Sighting]:
        """A JSON document, or JSON lines (each line its own value); lines that are no JSON are passed over."""
        text = data.decode(errors="replace")
        document = _json(text)
        if document is not _NOT_JSON:
            self.value(document, "the document", decoded=0)
        else:
            for number, line in enumerate(text.splitlines(), 1):
                if (record := _json(line)) is not _NOT_JSON:
                    self.value(record, f"line {number}", decoded=0)
        return self.found()

    def value(self, value: object, where: str, decoded: int = 0) -> None:
        """Walk ``value`` (found at ``where``), decoding JSON text and msgpack blobs inside it as plain data."""
        stack: list[object] = [value]
        while stack:
            self.walked += 1
            if self.walked > VALUE_LIMIT:
                raise StoreUnreadable(f"{self.path}: it holds over {VALUE_LIMIT} values; it was not read to the end")
            item = stack.pop()
            if isinstance(item, dict):
                self._object(item, where)  # which quotes its ids whole: they are not walked again alone
                stack.extend(value for value in item.values()
                             if not (isinstance(value, str) and planned_call_of(value) is not None))
            elif isinstance(item, list | tuple):
                stack.extend(item)
            elif isinstance(item, str):
                self._text(item, where, decoded)
            elif isinstance(item, bytes) and decoded < NESTED_DECODING:
                inner = _unpacked(item)
                if inner is _NOT_JSON:
                    inner = _json(item.decode(errors="replace"))
                if inner is not _NOT_JSON:
                    self.value(inner, where, decoded + 1)

    def _text(self, text: str, where: str, decoded: int) -> None:
        if planned_call_of(text) is not None:
            self._saw(Sighting(text, NAMED, f"{self.path}: {where}", _cut(text)))
        elif ID_PREFIX in text and tells_unknown(text) and text[:1] not in ("{", "["):
            for named in dict.fromkeys(match.group() for match in _ID_IN_TEXT.finditer(text)):
                if planned_call_of(named) is not None:
                    self._saw(Sighting(named, NOTE, f"{self.path}: {where}", _cut(text)))
        elif text[:1] in ("{", "[") and decoded < NESTED_DECODING and (inner := _json(text)) is not _NOT_JSON:
            self.value(inner, where, decoded + 1)

    def _object(self, item: dict[Any, Any], where: str) -> None:
        """A tool result in any shape the APIs and frameworks give one: its id, and whether it says unknown."""
        tool_call_id = _result_id(item)
        if tool_call_id is not None and planned_call_of(tool_call_id) is not None:
            content = next((item[key] for key in ("content", "output") if key in item), "")
            said = content if isinstance(content, str) else _excerpt(content, MARKER_SCAN_CHARS)
            kind = RESULT_UNKNOWN if tells_unknown(said) else RESULT
            self._saw(Sighting(tool_call_id, kind, f"{self.path}: {where}", _excerpt(item)))
            return
        for value in item.values():  # the model's choice of a call, or any record naming it: quoted whole
            if isinstance(value, str) and planned_call_of(value) is not None:
                self._saw(Sighting(value, NAMED, f"{self.path}: {where}", _excerpt(item)))

    def _saw(self, sighting: Sighting) -> None:
        _keep_strongest(self.strongest, sighting)


def _keep_strongest(strongest: dict[str, Sighting], sighting: Sighting) -> None:
    """Keep ``sighting`` unless a stronger sighting of its id came first: of equal ones the last place wins, the
    one nearest the kill (a journal's "started" line after the model's choice it copied)."""
    kept = strongest.get(sighting.tool_call_id)
    if kept is None or _RANK[sighting.kind] <= _RANK[kept.kind]:
        strongest[sighting.tool_call_id] = sighting


def _result_id(item: dict[Any, Any]) -> str | None:
    """The tool-call id ``item`` is the result of, or None when it is no tool result: a chat ``tool`` message or
    LangChain ``ToolMessage`` (``tool_call_id``), a Pydantic AI ``tool-return`` part, a Responses
    ``function_call_output`` (``call_id``), an Anthropic ``tool_result`` (``tool_use_id``)."""
    kind = item.get("type")
    if kind == "function_call_output":
        key = "call_id"
    elif kind == "tool_result":
        key = "tool_use_id"
    elif item.get("role") == "tool" or kind == "tool" or item.get("part_kind") == "tool-return":
        key = "tool_call_id"
    else:
        return None
    found = item.get(key)
    return found if isinstance(found, str) else None


_NOT_JSON = object()


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _unpacked(blob: bytes) -> object:
    """A msgpack blob as plain data (LangGraph's checkpoints and writes), each extension's payload unpacked the
    same way (a LangChain message is one: module, class name, fields); _NOT_JSON when it is no msgpack."""
    ormsgpack = msgpack_module()
    if ormsgpack is None:
        return _NOT_JSON
    depth = [0]

    def extension(code: int, data: bytes) -> object:
        if depth[0] >= NESTED_DECODING:
            return None
        depth[0] += 1
        try:
            return ormsgpack.unpackb(data, ext_hook=extension)
        except (ormsgpack.MsgpackDecodeError, ValueError, TypeError, RecursionError):
            return None
        finally:
            depth[0] -= 1

    try:
        return ormsgpack.unpackb(blob, ext_hook=extension)
    except (ormsgpack.MsgpackDecodeError, ValueError, TypeError, RecursionError):
        return _NOT_JSON


def _excerpt(value: object, limit: int = QUOTED_CHARS) -> str:
    """The start of ``value`` as JSON text (its repr where JSON has no word, as for msgpack's keys), rendered only
    as far as ``limit`` characters: a store may nest a megabyte under every object that names an id, and
    rendering each whole to quote its start would take time as the square of the store's size."""
    parts: list[str] = []
    size = 0
    for part in _rendered(value, 0):
        parts.append(part)
        size += len(part)
        if size > limit:
            return "".join(parts)[:limit] + "…"
    return "".join(parts)


def _rendered(value: object, depth: int) -> Iterator[str]:
    """``value``'s JSON text piece by piece, each string cut to a quote's length, nesting past EXCERPT_DEPTH elided."""
    if depth > EXCERPT_DEPTH:
        yield "…"
    elif isinstance(value, dict):
        yield "{"
        for index, (key, item) in enumerate(value.items()):
            yield f"{', ' if index else ''}{_scalar(key)}: "
            yield from _rendered(item, depth + 1)
        yield "}"
    elif isinstance(value, list | tuple):
        yield "["
        for index, item in enumerate(value):
            yield ", " if index else ""
            yield from _rendered(item, depth + 1)
        yield "]"
    else:
        yield _scalar(value)


def _scalar(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value[:MARKER_SCAN_CHARS])
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    return repr(value)[:QUOTED_CHARS]


def _cut(text: str) -> str:
    return text if len(text) <= QUOTED_CHARS else text[:QUOTED_CHARS] + "…"
