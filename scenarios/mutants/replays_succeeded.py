"""Bug: the recovery only skips FAILED and NOT_STARTED operations, so a SUCCEEDED one
is decided by its class like an interrupted one, and READ_ONLY/IDEMPOTENT_WRITE
calls that had already succeeded run again."""

from __future__ import annotations

import sys

from killpoint import protocol as p
from killpoint.scenarios.reference_runtime import Operation, ReferenceRuntime, main

CAUGHT_BY = "succeeded-not-replayed"


class ReplaysSucceeded(ReferenceRuntime):
    def decide(self, found: str, operation: Operation | None) -> str:
        if found in (p.FAILED, p.NOT_STARTED) or operation is None:
            return p.SKIP
        return super().decide(p.OUTCOME_UNKNOWN, operation)


if __name__ == "__main__":
    sys.exit(main(ReplaysSucceeded))
