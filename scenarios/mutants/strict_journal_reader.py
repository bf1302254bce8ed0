"""Bug: the journal is parsed strictly at start-up, so a torn last record (a crash in
the middle of its write) makes every later start crash: the task never completes."""

from __future__ import annotations

import json
import sys

from killpoint.client import AppendOnlyFile
from killpoint.scenarios.reference_runtime import ReferenceRuntime, main

CAUGHT_WITH = ("--exhaustive", "--torn-tail")
CAUGHT_BY = "liveness"


class StrictJournalReader(ReferenceRuntime):
    def open_journal(self) -> AppendOnlyFile:
        path = self.env.journal_path
        if path.exists():
            for line in path.read_text().splitlines():
                self.fold(json.loads(line))
        return AppendOnlyFile(path, durable=True)


if __name__ == "__main__":
    sys.exit(main(StrictJournalReader))
