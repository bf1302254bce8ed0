"""Event kills: watch the journal and ledger from outside the workload.

For runtimes that never speak the rendezvous socket: inotify wakes the runner
as soon as either file grows; the new lines are parsed and matched against the
awaited event (``ledger:effect:c3``, ``journal:started:c5``). The watcher's file
descriptor goes into the runner's selector beside the socket and the pidfd.

With no event to await, a watcher only notes when the workload first and last
wrote a record: in the crash-free run that is the workload's working period,
where timed kills are drawn for a runtime that announces no crash points.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inotify_simple import INotify, flags

from killpoint import protocol
from killpoint.client import parse_json_lines
from killpoint.harness.model import JOURNAL_SOURCE, LEDGER_SOURCE, OnEvent


@dataclass
class _Tail:
    """Reads only what was appended to one file since the last look."""

    path: Path
    offset: int = 0
    pending: bytes = b""

    def new_records(self) -> list[dict[str, Any]]:
        """The records completed since the last look; an unterminated last line waits for its newline.

        By the one torn-tail rule (``parse_json_lines``) the bytes after the last
        newline are kept as ``pending`` until the rest is written; a whole line
        that is no record matches no event.
        """
        try:
            with self.path.open("rb") as stream:
                stream.seek(self.offset)
                chunk = stream.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        parsed = parse_json_lines(self.pending + chunk)
        self.pending = parsed.torn_tail or b""
        return [record for _, record in parsed.records]


@dataclass
class EventWatcher:
    """Matches one awaited event (None: none, only watch); ``matched_at_ns`` is the file's mtime when it was seen.

    ``first_write_at`` and ``last_write_at`` are the monotonic times the watcher
    first and last saw a new record in either file.
    """

    event: OnEvent | None
    journal: Path
    ledger: Path
    inotify: INotify = field(default_factory=INotify)
    matched_at_ns: int | None = None
    first_write_at: float | None = None
    last_write_at: float | None = None
    _tails: dict[str, _Tail] = field(default_factory=dict)
    _calls_by_op: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.inotify.add_watch(str(self.journal.parent), flags.MODIFY | flags.CREATE)
        self.inotify.add_watch(str(self.ledger), flags.MODIFY)
        # Only records appended from now on count: the event is awaited in this incarnation.
        self._tails = {name: _Tail(path, path.stat().st_size if path.exists() else 0)
                       for name, path in (("journal", self.journal), ("ledger", self.ledger))}

    def fileno(self) -> int:
        return self.inotify.fileno()

    def check(self) -> bool:
        """Drain inotify and look at the new lines: has the awaited event happened?"""
        self.inotify.read(timeout=0)
        journal_records, ledger_records = self._tails["journal"].new_records(), self._tails["ledger"].new_records()
        if journal_records or ledger_records:
            self.last_write_at = time.monotonic()
            if self.first_write_at is None:
                self.first_write_at = self.last_write_at
        event = self.event
        for record in journal_records:
            op, call = record.get("op"), record.get("call")
            if record.get("kind") == protocol.STARTED and isinstance(op, str) and isinstance(call, str):
                self._calls_by_op[op] = call
            if (event is not None and event.source == JOURNAL_SOURCE and record.get("kind") == event.kind
                    and self._call_of(record) == event.call):
                return self._matched(self.journal)
        for record in ledger_records:
            if event is not None and event.source == LEDGER_SOURCE and event.kind in record and record.get("call") == event.call:
                return self._matched(self.ledger)
        return False

    def _call_of(self, record: dict[str, Any]) -> str | None:
        call, op = record.get("call"), record.get("op")
        if isinstance(call, str) and call:
            return call
        return self._calls_by_op.get(op) if isinstance(op, str) else None

    def _matched(self, path: Path) -> bool:
        self.matched_at_ns = path.stat().st_mtime_ns
        return True

    def latency_s(self) -> float | None:
        """Seconds from the event's write (file mtime) to now, i.e. to the confirmed kill."""
        return None if self.matched_at_ns is None else (time.time_ns() - self.matched_at_ns) / 1e9

    def close(self) -> None:
        self.inotify.close()
