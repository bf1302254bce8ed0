"""Bug: write-ahead broken. The ``started`` record is written after the tool
returns ("journal what we did"), so a crash inside the tool leaves an effect the
journal knows nothing about, and the recovery runs the call again as NOT_STARTED."""

from __future__ import annotations

import sys

from killpoint.scenarios.reference_runtime import ReferenceRuntime, main

CAUGHT_BY = "write-ahead"


class StartedAfterTool(ReferenceRuntime):
    def journal_started(self, call_id: str, op: str, attempt: int) -> None:
        self.pending_start = (call_id, op, attempt)

    def run_tool(self, call_id: str, op: str) -> bool:
        ok = super().run_tool(call_id, op)
        super().journal_started(*self.pending_start)
        return ok


if __name__ == "__main__":
    sys.exit(main(StartedAfterTool))
