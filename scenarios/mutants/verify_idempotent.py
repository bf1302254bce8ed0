"""Bug (over-cautious): every interrupted call is VERIFIED, READ_ONLY and
IDEMPOTENT_WRITE ones included. Safe, but against the matrix, and it leaves reads
and whole-file writes waiting on probes the planner then has to interpret."""

from __future__ import annotations

import sys

from killpoint import protocol as p
from killpoint.scenarios.reference_runtime import Operation, ReferenceRuntime, main

CAUGHT_BY = "interrupted-action"


class VerifyIdempotent(ReferenceRuntime):
    def decide(self, found: str, operation: Operation | None) -> str:
        action = super().decide(found, operation)
        return p.VERIFY if action == p.RETRY and operation is not None and not operation.interactive else action


if __name__ == "__main__":
    sys.exit(main(VerifyIdempotent))
