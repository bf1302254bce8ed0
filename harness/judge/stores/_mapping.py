"""The fold shared by the mapped formats (json, jsonl, sqlite): records with the runtime's field names and
statuses become killpoint's per-call states.

A record updates its op (the last record of an op wins); a call with several
ops takes the state of its last op (the one that first appeared last: the
runtime's newest attempt). Records naming no planned call are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from killpoint import protocol
from killpoint.harness.judge.stores._state import quote_columns
from killpoint.harness.model import DurableState, Plan, StepRecord


@dataclass(frozen=True)
class FieldMapping:
    """Where a record keeps its op, call, status and class, and which runtime values mean which status."""

    call: str
    status: str
    op: str | None
    tool_class: str | None
    statuses: dict[str, str]  # the runtime's value -> protocol status

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> FieldMapping:
        fields = table["fields"]
        return cls(fields["call"], fields["status"], fields.get("op"), fields.get("class"),
                   {value: status for status, values in table["status"].items() for value in values})

    @property
    def records_start(self) -> bool:
        return protocol.RUNNING in self.statuses.values()

    def shown(self) -> tuple[str, ...]:
        """The field names a record's quote shows (op, call, status, class: those the mapping names)."""
        return tuple(name for name in (self.op, self.call, self.status, self.tool_class) if name is not None)


@dataclass(frozen=True)
class MappedRecord:
    """One record of the runtime's journal: where it is (for quotes) and its fields (already looked up)."""

    where: str  # e.g. "task-1.json: operations[2]" or "journal.jsonl:4"
    values: dict[str, Any]  # field name -> value, for the fields the mapping names


def fold_mapped(records: list[MappedRecord], mapping: FieldMapping, plan: Plan) -> DurableState:
    """Per-call states of a mapped journal; a record the mapping cannot read is a problem (and no state)."""
    problems: list[str] = []
    latest: dict[object, StepRecord] = {}  # op -> its latest record; ops in the order they first appeared
    for record in records:
        call, status = record.values.get(mapping.call), record.values.get(mapping.status)
        op = record.values.get(mapping.op) if mapping.op else call
        if not isinstance(call, str):
            problems.append(f"{record.where}: {mapping.call} is {call!r}, not a call id (a string)")
        elif not isinstance(status, str) or status not in mapping.statuses:
            problems.append(f"{record.where}: {mapping.status} {status!r} is not in the journal.status table "
                            f"({', '.join(map(repr, mapping.statuses))}); map it, or fix the record")
        elif isinstance(op, bool) or not isinstance(op, str | int):
            problems.append(f"{record.where}: {mapping.op} is {op!r}, not an op id (a string or a number)")
        else:
            shown = {name: record.values.get(name) for name in mapping.shown()}
            latest[op] = StepRecord(call, mapping.statuses[status], f"{record.where} {{{quote_columns(shown)}}}")
    if problems:
        return DurableState.unreadable(mapping.records_start, *problems)
    by_call = {step.call: step for step in latest.values() if plan.call(step.call) is not None}
    return DurableState(by_call, mapping.records_start, None)
