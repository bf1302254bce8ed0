"""Bug: a recovery that finds an earlier recovery's decision for an operation takes it
as handled and SKIPs it. Harmless after one crash; after a crash during a RETRY
or a VERIFY the interrupted operation is abandoned. Only a second crash shows it."""

from __future__ import annotations

import sys
from typing import Any

from killpoint import protocol as p
from killpoint.scenarios.reference_runtime import Operation, ReferenceRuntime, main

CAUGHT_WITH = ("--exhaustive", "--depth", "2")
CAUGHT_BY = "interrupted-action"


class SecondCrashSkips(ReferenceRuntime):
    decided_before: set[str]

    def fold(self, record: dict[str, Any]) -> None:
        if record.get("kind") == p.DECISION and record.get("action") != p.SKIP:
            self.__dict__.setdefault("decided_before", set()).add(record["call"])
        super().fold(record)

    def decide(self, found: str, operation: Operation | None) -> str:
        if operation is not None and operation.call in self.__dict__.get("decided_before", set()):
            return p.SKIP
        return super().decide(found, operation)


if __name__ == "__main__":
    sys.exit(main(SecondCrashSkips))
