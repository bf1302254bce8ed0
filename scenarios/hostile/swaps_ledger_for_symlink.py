"""Attack: at its first kill point the runtime swaps its ledger for a symlink to a file outside the run.

The path of that file is the first argument. The harness appends its kill
marker to the ledger after every kill: as root, following the link would write
into the outside file. It must refuse, say so, and judge the run unknown (the
marker that splits the ledger at the kill is missing), never crash or pass.
What the workload's own tools then write through the link is the workload's
doing; the harness's marker must never reach the outside file.
"""

from __future__ import annotations

import os
import sys

from killpoint import protocol
from killpoint.client import Rendezvous, WorkloadEnv
from killpoint.scenarios.reference_runtime import ReferenceRuntime, main


class SwapsLedgerAtAfterStarted(Rendezvous):
    """The rendezvous, swapping the ledger for the symlink just before it announces ``after_started``."""

    def point(self, point: str, *, call: str | None = None, op: str | None = None) -> None:
        ledger = os.environ[protocol.ENV_LEDGER]
        # Not in the crash-free run (its folder is named golden): the session must get as far as a kill.
        if point == protocol.AFTER_STARTED and self.incarnation == 0 and "/golden/" not in ledger:
            os.replace(ledger, ledger + ".real")
            os.symlink(sys.argv[1], ledger)
        super().point(point, call=call, op=op)


class SwapsLedger(ReferenceRuntime):
    def __init__(self, env: WorkloadEnv) -> None:
        super().__init__(env)
        self.rendezvous = SwapsLedgerAtAfterStarted(env.control_path, env.incarnation)


if __name__ == "__main__":
    sys.exit(main(SwapsLedger))
