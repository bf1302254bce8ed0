"""Bug: like the original runtime, the journal scan keeps only the most recent
entries (a cap of 200 there; 6 here, scaled to the demo's plan), and op ids are
numbered from what was kept. After a restart, early operations are forgotten: their
calls look NOT_STARTED and run again, and new op ids collide with old ones."""

from __future__ import annotations

import sys
from typing import Any

from killpoint import protocol as p
from killpoint.scenarios.reference_runtime import Journal, ReferenceRuntime, main

CAUGHT_BY = "journal-well-formed"

JOURNAL_CAP = 6


class JournalCapReusesOpIds(ReferenceRuntime):
    def open_journal(self) -> Journal:
        self.scanned: list[dict[str, Any]] = []
        journal = super().open_journal()
        self.operations.clear()
        for record in self.scanned[-JOURNAL_CAP:]:
            if record.get("kind") != p.FINISHED or any(op.op == record["op"] for op in self.operations.values()):
                super().fold(record)
        return journal

    def fold(self, record: dict[str, Any]) -> None:
        if hasattr(self, "scanned") and not hasattr(self, "journal"):
            self.scanned.append(record)
        super().fold(record)


if __name__ == "__main__":
    sys.exit(main(JournalCapReusesOpIds))
