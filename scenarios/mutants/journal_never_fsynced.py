"""Bug: the journal's records are written but never fsynced ("the kernel will write them back"). The
journal's name is durable (its folder is fsynced when it is opened) but none of its records: a process
killed keeps them, as the page cache outlives it, but at a power loss the journal comes back empty,
so the effect of a tool whose ``started`` record was lost is run again as NOT_STARTED."""

from __future__ import annotations

import sys
from typing import cast

from killpoint.client import AppendOnlyFile
from killpoint.scenarios.reference_runtime import ReferenceRuntime, main

CAUGHT_BY = "write-ahead"
CAUGHT_WITH = ("--exhaustive", "--power-loss")


class JournalNeverFsynced(ReferenceRuntime):
    def open_journal(self) -> AppendOnlyFile:
        journal = cast(AppendOnlyFile, super().open_journal())  # the reference's journal.jsonl
        journal.durable = False
        return journal


if __name__ == "__main__":
    sys.exit(main(JournalNeverFsynced))
