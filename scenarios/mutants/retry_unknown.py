"""Bug: an interrupted call of an UNKNOWN tool (shell, HTTP, MCP) is RETRIED: the
runtime's retry-safety reads "not known to be unsafe" instead of "known to be safe"."""

from __future__ import annotations

import sys

from killpoint import protocol as p
from killpoint.scenarios.reference_runtime import Operation, ReferenceRuntime, main

CAUGHT_BY = "interrupted-action"


class RetryUnknown(ReferenceRuntime):
    def decide(self, found: str, operation: Operation | None) -> str:
        if found == p.OUTCOME_UNKNOWN and operation is not None and operation.tool_class == p.UNKNOWN:
            return p.RETRY
        return super().decide(found, operation)


if __name__ == "__main__":
    sys.exit(main(RetryUnknown))
