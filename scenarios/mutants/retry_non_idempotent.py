"""Bug: retry-safety computed as ``class != UNKNOWN``, so an interrupted
NON_IDEMPOTENT call (a tap, an append) is RETRIED blindly instead of VERIFIED."""

from __future__ import annotations

import sys

from killpoint import protocol as p
from killpoint.scenarios.reference_runtime import Operation, ReferenceRuntime, main

CAUGHT_BY = "interrupted-action"


class RetryNonIdempotent(ReferenceRuntime):
    def decide(self, found: str, operation: Operation | None) -> str:
        if found == p.OUTCOME_UNKNOWN and operation is not None and operation.tool_class == p.NON_IDEMPOTENT:
            return p.RETRY
        return super().decide(found, operation)


if __name__ == "__main__":
    sys.exit(main(RetryNonIdempotent))
