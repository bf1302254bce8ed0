"""Bug: the user-interaction special case is forgotten, so an interrupted
``ask_user`` (classified NON_IDEMPOTENT) is VERIFIED instead of simply asked again."""

from __future__ import annotations

import sys

from killpoint import protocol as p
from killpoint.scenarios.reference_runtime import Operation, ReferenceRuntime, main

CAUGHT_BY = "interrupted-action"


class VerifiesQuestions(ReferenceRuntime):
    def decide(self, found: str, operation: Operation | None) -> str:
        if found == p.OUTCOME_UNKNOWN and operation is not None and operation.interactive:
            return p.VERIFY if operation.tool_class in (p.NON_IDEMPOTENT, p.UNKNOWN) else p.RETRY
        return super().decide(found, operation)


if __name__ == "__main__":
    sys.exit(main(VerifiesQuestions))
