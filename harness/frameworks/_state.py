"""What a store reader hands the checker: each planned call's durable record, and what could not be read.

Kept apart from the package's ``__init__`` so each format's module can build
these values without importing the registry of formats that imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from killpoint.harness.model import Plan

# A quoted value is cut here: a quote names a row, it does not reproduce it.
QUOTE_VALUE_CHARS = 80


@dataclass(frozen=True)
class StepRecord:
    """What the store durably holds for one planned call, with the row(s) that say so."""

    call: str
    status: str  # protocol.SUCCEEDED, protocol.FAILED or protocol.RUNNING
    quote: str  # e.g. "checkpoints.sqlite: writes(task_path='~__pregel_pull, c2', channel='order')"


@dataclass(frozen=True)
class DurableState:
    """A store copy read as per-call durable states.

    ``records`` holds planned calls only: a call absent has no durable record.
    A state with ``problems`` is incomplete (its records are then empty): the
    rules that need it are unknown, never judged on what is left.
    """

    records: dict[str, StepRecord]
    records_start: bool  # the store records a step when it begins (a RUNNING status exists)
    completed: bool | None  # the store says the task/workflow finished (None: it cannot say)
    problems: tuple[str, ...] = ()

    @classmethod
    def unreadable(cls, records_start: bool, *problems: str) -> DurableState:
        """The state of a copy that could not be read: no records, the problems, no word on completion."""
        return cls({}, records_start, None, problems)


class StoreReader(Protocol):
    @property
    def name(self) -> str:
        """The format, for reports."""
        ...

    def files(self, plan: Plan) -> tuple[str, ...]:
        """Paths relative to the workload folder to copy at each kill (a SQLite database with its side files)."""
        ...

    def read(self, folder: Path, plan: Plan) -> DurableState:
        """The durable state held by the copy of ``files()`` in ``folder``; never raises."""
        ...


def quote_value(value: object) -> str:
    """One column's value as a quote shows it: its repr, cut to a readable length."""
    text = repr(value)
    return text if len(text) <= QUOTE_VALUE_CHARS else text[:QUOTE_VALUE_CHARS - 3] + "..."


def quote_columns(columns: dict[str, object]) -> str:
    """``name='value', ...`` for the plain columns a quote names."""
    return ", ".join(f"{name}={quote_value(value)}" for name, value in columns.items())
