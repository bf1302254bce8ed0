"""Attack: at its first kill point the runtime swaps its journal for a symlink to a file outside the run.

The path of that file is the first argument. The harness copies the journal
at every kill and tears its last record when asked: as root, following the
link would copy the outside file into the evidence (which the next
incarnation and any reader of the run see) and truncate it. It must refuse
both, and the run, whose journal is gone, cannot be judged.
"""

from __future__ import annotations

import os
import sys

from killpoint import protocol
from killpoint.client import Rendezvous, WorkloadEnv
from killpoint.scenarios.reference_runtime import ReferenceRuntime, main


class SwapsJournalAtAfterStarted(Rendezvous):
    """The rendezvous, swapping the journal for the symlink just before it announces ``after_started``."""

    def point(self, point: str, *, call: str | None = None, op: str | None = None) -> None:
        run_dir = os.environ[protocol.ENV_RUN_DIR]
        # Not in the crash-free run (its folder is named golden): the session must get as far as a kill.
        if point == protocol.AFTER_STARTED and self.incarnation == 0 and "/golden/" not in run_dir:
            journal = os.path.join(run_dir, protocol.JOURNAL_NAME)
            os.replace(journal, journal + ".real")
            os.symlink(sys.argv[1], journal)
        super().point(point, call=call, op=op)


class SwapsJournal(ReferenceRuntime):
    def __init__(self, env: WorkloadEnv) -> None:
        super().__init__(env)
        self.rendezvous = SwapsJournalAtAfterStarted(env.control_path, env.incarnation)


def put_the_journal_back() -> None:
    """In the recovery: the real journal returns, so whatever harms the outside file is the harness's doing."""
    journal = os.path.join(os.environ[protocol.ENV_RUN_DIR], protocol.JOURNAL_NAME)
    if os.path.exists(journal + ".real"):
        os.replace(journal + ".real", journal)


if __name__ == "__main__":
    put_the_journal_back()
    sys.exit(main(SwapsJournal))
