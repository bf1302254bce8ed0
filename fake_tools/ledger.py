"""The side-effect ledger as the fake tools write it (protocol v1, "Ledger").

One O_APPEND write per record, no fsync: the ledger lives outside the killed
process, and a SIGKILL loses nothing the kernel already accepted.
"""

from __future__ import annotations

import os
from pathlib import Path

from killpoint import protocol
from killpoint.client import AppendOnlyFile


class Ledger:
    """Records a process's tool invocations, effects and probes, stamped with its pid."""

    def __init__(self, path: str | os.PathLike[str], incarnation: int, *, fd: int | None = None) -> None:
        """``fd``: the ledger already opened for appending (``AppendOnlyFile``'s)."""
        self._file = AppendOnlyFile(Path(path), durable=False, fd=fd)
        self.incarnation = incarnation
        self.pid = os.getpid()

    def invoked(self, tool: str, call: str) -> None:
        self._append(protocol.LEDGER_INVOKED, tool, call=call)

    def effect(self, name: str, *, tool: str, call: str) -> None:
        self._append(protocol.LEDGER_EFFECT, name, call=call, tool=tool)

    def probe(self, name: str, *, tool: str, call: str) -> None:
        self._append(protocol.LEDGER_PROBE, name, call=call, tool=tool)

    def _append(self, kind: str, value: str, **fields: str) -> None:
        """One record keyed by its kind (one of ``protocol.TOOL_LEDGER_KINDS``), stamped with who wrote it."""
        self._file.append({kind: value, **fields, "incarnation": self.incarnation, "pid": self.pid})

    def close(self) -> None:
        self._file.close()
