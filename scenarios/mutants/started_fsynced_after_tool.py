"""Bug: the ``started`` record is written before the tool runs but fsynced only after it returned
(one fsync saved per call, "the tool is quick"). Under a kill the record is there, in the page cache;
at a power loss during the tool it is lost while the tool's effect stands, and the recovery runs the
call again as NOT_STARTED."""

from __future__ import annotations

import sys
from typing import cast

from killpoint.client import AppendOnlyFile
from killpoint.scenarios.reference_runtime import ReferenceRuntime, main

CAUGHT_BY = "write-ahead"
CAUGHT_WITH = ("--exhaustive", "--power-loss")


class StartedFsyncedAfterTool(ReferenceRuntime):
    def open_journal(self) -> AppendOnlyFile:
        self.file = cast(AppendOnlyFile, super().open_journal())  # the reference's journal.jsonl
        return self.file

    def journal_started(self, call_id: str, op: str, attempt: int) -> None:
        self.file.durable = False
        super().journal_started(call_id, op, attempt)
        self.file.durable = True

    def run_tool(self, call_id: str, op: str) -> bool:
        ok = super().run_tool(call_id, op)
        self.file.sync()
        return ok


if __name__ == "__main__":
    sys.exit(main(StartedFsyncedAfterTool))
