"""Bug: the journal scan assumes a ``verified`` record always found the effect and
looks up the ``finished`` record it expects next, so a crash between a VERIFY that
found nothing and its redo makes every later start crash: a recovery loop."""

from __future__ import annotations

import sys
from typing import Any

from killpoint import protocol as p
from killpoint.scenarios.reference_runtime import Journal, ReferenceRuntime, main

CAUGHT_WITH = ("--exhaustive", "--depth", "2")
CAUGHT_BY = "liveness"


class CrashAfterFailedVerify(ReferenceRuntime):
    recovering_from_file = False  # true while the start-up scan folds the journal's records

    def fold(self, record: dict[str, Any]) -> None:
        if record.get("kind") == p.VERIFIED and not record["effect_found"] and self.recovering_from_file:
            raise KeyError(f"no finished record for verified op {record['op']}")
        super().fold(record)

    def open_journal(self) -> Journal:
        self.recovering_from_file = True
        journal = super().open_journal()
        self.recovering_from_file = False
        return journal


if __name__ == "__main__":
    sys.exit(main(CrashAfterFailedVerify))
