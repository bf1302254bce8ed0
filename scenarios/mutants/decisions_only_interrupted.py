"""Bug: decision records are written only for the interrupted operations ("the
others need no decision"), so the journal does not show that SUCCEEDED, FAILED and
NOT_STARTED calls were considered and skipped before recovery acted."""

from __future__ import annotations

import sys

from killpoint import protocol as p
from killpoint.scenarios.reference_runtime import Operation, ReferenceRuntime, main

CAUGHT_BY = "journal-well-formed"


class DecisionsOnlyInterrupted(ReferenceRuntime):
    def write_decision(self, call_id: str, found: str, action: str, operation: Operation | None) -> None:
        if found == p.OUTCOME_UNKNOWN:
            super().write_decision(call_id, found, action, operation)


if __name__ == "__main__":
    sys.exit(main(DecisionsOnlyInterrupted))
