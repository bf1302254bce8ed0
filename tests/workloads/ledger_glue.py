"""A runtime that RETRIES an interrupted NON_IDEMPOTENT call (a real bug) and, in its first
incarnation, leaves an unterminated line at the end of the ledger just before the ``after_effect``
point of the demo's c4 (an append). The harness's kill marker must still start a line of its own, or the bug hides."""

import os
import sys

from killpoint import protocol
from killpoint.client import Rendezvous, WorkloadEnv
from killpoint.scenarios.mutants.retry_non_idempotent import RetryNonIdempotent
from killpoint.scenarios.reference_runtime import main


class TearsLedgerBeforeC4Effect(Rendezvous):
    def point(self, point: str, *, call: str | None = None, op: str | None = None) -> None:
        if (point, call) == (protocol.AFTER_EFFECT, "c4") and self.incarnation == 0:
            with open(os.environ[protocol.ENV_LEDGER], "ab") as ledger:
                ledger.write(b'{"note": "half a rec')
        super().point(point, call=call, op=op)


class LedgerGlue(RetryNonIdempotent):
    def __init__(self, env: WorkloadEnv) -> None:
        super().__init__(env)
        self.rendezvous = TearsLedgerBeforeC4Effect(env.control_path, env.incarnation)


sys.exit(main(LedgerGlue))
