"""Formats ``json`` and ``jsonl``: a runtime's own journal as one JSON document or as JSON lines.

``json`` is a snapshot (the reference agent's store: one file per task,
rewritten whole by temp file + fsync + rename, an ``operations`` array);
``jsonl`` is event-sourced (a later line updates its op), read by the
protocol's one torn-tail rule (``killpoint.client.parse_json_lines``): a last
line with no newline is a cut write, never trusted, never a problem.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from killpoint.client import parse_json_lines
from killpoint.harness.judge.stores._mapping import FieldMapping, MappedRecord, fold_mapped
from killpoint.harness.judge.stores._store_file import StoreUnreadable, read_store, store_files, store_path
from killpoint.harness.model import DurableState, Plan


def lookup(value: Any, key: str) -> Any:
    """``value[key]``, where a dotted key not found whole reaches into nested objects; None when absent."""
    if not isinstance(value, dict):
        return None
    if key in value:
        return value[key]
    head, dot, rest = key.partition(".")
    return lookup(value.get(head), rest) if dot else None


def _mapped(where: str, record: dict[str, Any], mapping: FieldMapping) -> MappedRecord:
    return MappedRecord(where, {name: lookup(record, name) for name in mapping.shown()})


@dataclass(frozen=True)
class _MappedFile:
    path: str
    mapping: FieldMapping

    def files(self, plan: Plan) -> tuple[str, ...]:
        return store_files(self.path, plan)

    def read(self, folder: Path, plan: Plan) -> DurableState:
        try:
            path = store_path(self.path, plan)
            data = read_store(folder, path)
            if data is None:
                return DurableState({}, self.mapping.records_start, None)
            return fold_mapped(self.records(path, data), self.mapping, plan)
        except StoreUnreadable as problem:
            return DurableState.unreadable(self.mapping.records_start, *problem.args)

    def records(self, path: str, data: bytes) -> list[MappedRecord]:
        raise NotImplementedError


@dataclass(frozen=True)
class JsonDocument(_MappedFile):
    records_key: str | None = None  # a dotted key path to the array; None: the document is the array
    name: str = "json"

    def records(self, path: str, data: bytes) -> list[MappedRecord]:
        try:
            document = json.loads(data.decode())
        except (UnicodeDecodeError, ValueError, RecursionError) as error:
            raise StoreUnreadable(f"{path}: not a JSON document ({type(error).__name__}: {str(error)[:80]})") from None
        array = lookup(document, self.records_key) if self.records_key else document
        where = f"{path}: {self.records_key or 'the document'}"
        if not isinstance(array, list):
            raise StoreUnreadable(f"{where} is {type(array).__name__}, not an array of operation records; "
                                  "check journal.records")
        strays = [index for index, item in enumerate(array) if not isinstance(item, dict)]
        if strays:
            raise StoreUnreadable(f"{where}[{strays[0]}] is {type(array[strays[0]]).__name__}, not a record (an object)")
        return [_mapped(f"{path}: {self.records_key or ''}[{index}]", item, self.mapping)
                for index, item in enumerate(array)]


@dataclass(frozen=True)
class JsonLinesJournal(_MappedFile):
    name: str = "jsonl"

    def records(self, path: str, data: bytes) -> list[MappedRecord]:
        parsed = parse_json_lines(data)
        if parsed.problems:
            raise StoreUnreadable(*(f"{path}:{number}: {why}: {raw[:80]!r}" for number, why, raw in parsed.problems))
        return [_mapped(f"{path}:{number}", record, self.mapping) for number, record in parsed.records]
