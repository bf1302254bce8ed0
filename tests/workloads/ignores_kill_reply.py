"""The reference runtime speaking protocol v1 as first written: any reply line means "go on".

It reads a ``kill`` reply as it reads ``ok`` and carries on, so a non-pausing kill
(``c3:after_effect/now``) ends it only because the harness strikes right after replying.
With ``--retry-non-idempotent`` it is that mutant (it retries an interrupted NON_IDEMPOTENT call).
"""

from __future__ import annotations

import socket
import sys

from killpoint.client import Rendezvous, WorkloadEnv, encode_record
from killpoint.scenarios.mutants.retry_non_idempotent import RetryNonIdempotent
from killpoint.scenarios.reference_runtime import ReferenceRuntime, main

RUNTIME = RetryNonIdempotent if "--retry-non-idempotent" in sys.argv[1:] else ReferenceRuntime


class AnyReplyRendezvous(Rendezvous):
    """One connection; each point waits for a reply line, whatever it says."""

    def __init__(self, control_path: str | None, incarnation: int) -> None:
        super().__init__(control_path, incarnation)
        self.connection: socket.socket | None = None

    def point(self, point: str, *, call: str | None = None, op: str | None = None) -> None:
        if not self.control_path:
            return
        if self.connection is None:
            self.connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.connection.connect(self.control_path)
            self.replies = self.connection.makefile("rb")
        self.connection.sendall(encode_record({"point": point, "call": call, "op": op,
                                               "incarnation": self.incarnation}))
        if not self.replies.readline():
            raise ConnectionError(f"harness closed the control socket at {point} {call}")


class IgnoresKillReply(RUNTIME):  # type: ignore[valid-type,misc]
    def __init__(self, env: WorkloadEnv) -> None:
        super().__init__(env)
        self.rendezvous = AnyReplyRendezvous(env.control_path, env.incarnation)


if __name__ == "__main__":
    sys.exit(main(IgnoresKillReply))
