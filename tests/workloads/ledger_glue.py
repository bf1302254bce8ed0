"""A runtime that RETRIES an interrupted NON_IDEMPOTENT call (a real bug) and, in its first
incarnation, leaves an unterminated line at the end of the ledger just before the ``after_effect``
point of the demo's c4 (an append). The harness's kill marker must still start a line of its own, or the bug hides."""

import os
import sys

from killpoint import client, protocol
from killpoint.scenarios.mutants.retry_non_idempotent import RetryNonIdempotent
from killpoint.scenarios.reference_runtime import main

announce = client.Rendezvous.point


def point(self: client.Rendezvous, name: str, **where: str | None) -> None:
    if (name, where.get("call")) == ("after_effect", "c4") and os.environ.get(protocol.ENV_INCARNATION) == "0":
        with open(os.environ[protocol.ENV_LEDGER], "ab") as ledger:
            ledger.write(b'{"note": "half a rec')
    announce(self, name, **where)


client.Rendezvous.point = point
sys.exit(main(RetryNonIdempotent))
