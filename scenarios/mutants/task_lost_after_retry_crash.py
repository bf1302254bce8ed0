"""Bug: a recovery that finds a RETRY already in flight (an operation RUNNING at
attempt 2 or more) assumes another worker owns the task and exits without finishing
it. After a crash during a RETRY the task is lost: it never completes."""

from __future__ import annotations

import sys

from killpoint import protocol as p
from killpoint.scenarios.reference_runtime import ReferenceRuntime, main

CAUGHT_WITH = ("--exhaustive", "--depth", "2")
CAUGHT_BY = "liveness"


class TaskLostAfterRetryCrash(ReferenceRuntime):
    def run(self) -> int:
        if not self.completed and any(op.status == p.RUNNING and op.attempt >= 2 for op in self.operations.values()):
            return 0
        return super().run()


if __name__ == "__main__":
    sys.exit(main(TaskLostAfterRetryCrash))
