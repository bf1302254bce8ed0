"""Bug: operations are matched by the model's tool-call id, which the model reuses
from turn to turn (``call_0``, ``call_1``, ``call_2``, then ``call_0`` again). After a
crash, a later call's state is read as an earlier one's: a SUCCEEDED call is taken
for the interrupted one and decided as if it were running."""

from __future__ import annotations

import sys
from typing import Any

from killpoint import protocol as p
from killpoint.scenarios.reference_runtime import Operation, ReferenceRuntime, main

CAUGHT_BY = "succeeded-not-replayed"

MODEL_IDS_PER_TURN = 3


class ReusedModelIds(ReferenceRuntime):
    def model_id(self, call_id: str) -> str:
        return f"call_{list(self.calls).index(call_id) % MODEL_IDS_PER_TURN}"

    def fold(self, record: dict[str, Any]) -> None:
        super().fold(record)
        if record.get("kind") == p.STARTED:
            self.by_model_id = {**getattr(self, "by_model_id", {}), self.model_id(record["call"]): record["call"]}

    def found_status(self, call_id: str) -> str:
        latest = getattr(self, "by_model_id", {}).get(self.model_id(call_id), call_id)
        return super().found_status(latest if call_id in self.operations else call_id)

    def decide(self, found: str, operation: Operation | None) -> str:
        return super().decide(found, operation if found != p.OUTCOME_UNKNOWN else self.running() or operation)

    def running(self) -> Operation | None:
        return next((op for op in self.operations.values() if op.status == p.RUNNING), None)


if __name__ == "__main__":
    sys.exit(main(ReusedModelIds))
