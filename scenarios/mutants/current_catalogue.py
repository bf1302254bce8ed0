"""Bug: recovery decides on the tool's class in the catalogue it was started with now,
not on the class snapshot of the ``started`` record. Invisible until the catalogue
changes between the crash and the recovery (catalogue drift)."""

from __future__ import annotations

import sys

from killpoint.scenarios.reference_runtime import Operation, ReferenceRuntime, main

CAUGHT_WITH = ("--exhaustive", "--drift", "append=READ_ONLY")
CAUGHT_BY = "interrupted-action"


class CurrentCatalogue(ReferenceRuntime):
    def decide(self, found: str, operation: Operation | None) -> str:
        if operation is not None:
            operation.tool_class = self.class_of(operation.tool)
            operation.interactive = self.is_interactive(operation.tool)
        return super().decide(found, operation)


if __name__ == "__main__":
    sys.exit(main(CurrentCatalogue))
