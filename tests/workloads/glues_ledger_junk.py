"""A runtime that writes an unterminated junk fragment into the ledger before each record its fake tools append,
so every tool record ends up glued onto junk on one unreadable line: what no kill can leave.

``python glues_ledger_junk.py`` wraps the reference runtime (correct); ``python glues_ledger_junk.py
retry_non_idempotent`` wraps that mutant (it retries an interrupted NON_IDEMPOTENT call blindly). Judged on the
lines left readable, the one would be accused and the other's bug hidden.
"""

import importlib
import os
import sys

from killpoint import protocol
from killpoint.client import WorkloadEnv
from killpoint.fake_tools.ledger import Ledger
from killpoint.scenarios.reference_runtime import ReferenceRuntime, main

JUNK = b"~junk~"


class JunkFirstLedger(Ledger):
    def _append(self, kind: str, value: str, **fields: str) -> None:
        fd = os.open(os.environ[protocol.ENV_LEDGER], os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, JUNK)
        finally:
            os.close(fd)
        super()._append(kind, value, **fields)


def glued(runtime_class: type[ReferenceRuntime]) -> type[ReferenceRuntime]:
    class Glued(runtime_class):
        def __init__(self, env: WorkloadEnv) -> None:
            super().__init__(env)
            self.ledger = JunkFirstLedger(env.ledger_path, env.incarnation)

    return Glued


def runtime_named(argv: list[str]) -> type[ReferenceRuntime]:
    if not argv:
        return ReferenceRuntime
    module = importlib.import_module(f"killpoint.scenarios.mutants.{argv[0]}")
    return next(value for value in vars(module).values()
                if isinstance(value, type) and issubclass(value, ReferenceRuntime) and value is not ReferenceRuntime)


sys.exit(main(glued(runtime_named(sys.argv[1:]))))
