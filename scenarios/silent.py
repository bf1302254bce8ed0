"""Run a runtime with the rendezvous hidden from it, as an uninstrumented runtime would be.

    python -m killpoint.scenarios.silent killpoint.scenarios.mutants.retry_non_idempotent

Such a runtime can still be tested: killpoint kills it after a seeded delay
(``--timed``) or when the journal or ledger shows an event (``--kill-on``).
"""

from __future__ import annotations

import os
import runpy
import sys

from killpoint import protocol

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m killpoint.scenarios.silent RUNTIME_MODULE")
    os.environ.pop(protocol.ENV_CONTROL, None)
    module = sys.argv.pop(1)
    runpy.run_module(module, run_name="__main__", alter_sys=True)
