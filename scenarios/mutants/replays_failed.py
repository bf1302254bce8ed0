"""Bug: the recovery treats a FAILED operation as unfinished ("it may have half-worked"),
so it is RETRIED or VERIFIED by its class and runs again, though a replay does not
turn a failure into a success and the planner, not the recovery, must re-decide."""

from __future__ import annotations

import sys

from killpoint import protocol as p
from killpoint.scenarios.reference_runtime import Operation, ReferenceRuntime, main

SCENARIO = "refund"
CAUGHT_BY = "failed-not-replayed"


class ReplaysFailed(ReferenceRuntime):
    def decide(self, found: str, operation: Operation | None) -> str:
        return super().decide(p.OUTCOME_UNKNOWN if found == p.FAILED else found, operation)


if __name__ == "__main__":
    sys.exit(main(ReplaysFailed))
