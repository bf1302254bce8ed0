"""Bug: optimistic journaling: ``finished SUCCEEDED`` is written before the tool is
called, so a crash between the two leaves a SUCCEEDED operation that never ran."""

from __future__ import annotations

import sys

from killpoint import protocol as p
from killpoint.scenarios.reference_runtime import ReferenceRuntime, main

CAUGHT_BY = "write-ahead"


class FinishedBeforeTool(ReferenceRuntime):
    def run_then_finish(self, call_id: str, op: str) -> None:
        self.finish(call_id, op, p.SUCCEEDED)
        self.run_tool(call_id, op)


if __name__ == "__main__":
    sys.exit(main(FinishedBeforeTool))
