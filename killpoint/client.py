"""The workload side of protocol v1: rendezvous, durable journal, ledger appends.

Standard library only, so any Python runtime can import it (or copy it) without
pulling the harness in. Every record is one ``write`` of one JSON line: a journal
record is fsynced before the caller goes on (write-ahead), a ledger record goes
through an O_APPEND descriptor so concurrent writers never interleave.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from killpoint import protocol


def encode_record(record: dict[str, Any]) -> bytes:
    """One compact JSON line, the unit of every journal and ledger write."""
    return (json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n").encode()


class AppendOnlyFile:
    """A JSON-lines file opened once with O_APPEND; ``durable`` adds an fsync per record."""

    def __init__(self, path: str | os.PathLike[str], *, durable: bool) -> None:
        self.path = Path(path)
        self.durable = durable
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def append(self, record: dict[str, Any]) -> None:
        os.write(self._fd, encode_record(record))
        if self.durable:
            os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


def read_json_lines(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], bytes | None]:
    """Parse a JSON-lines file; return (records, torn_tail).

    A last line without its newline, or one that does not parse, is what a crash
    mid-write leaves: it is returned as ``torn_tail`` and not trusted. A bad line
    anywhere else is corruption and raises ValueError naming the line.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return [], None
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
        except ValueError:
            if number == len(lines) and not tail:
                return records, line
            raise ValueError(f"{path}: line {number} is not JSON: {line[:80]!r}") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}: line {number} is not a JSON object")
        records.append(record)
    return records, (tail or None)


class Rendezvous:
    """The crash-point channel: one persistent connection per process.

    ``point`` sends one JSON line and blocks for the harness's reply; the harness
    either answers or SIGKILLs the process while it waits. With no control socket
    configured the workload runs freely and ``point`` returns at once.
    """

    def __init__(self, control_path: str | None, incarnation: int) -> None:
        self.control_path = control_path
        self.incarnation = incarnation
        self._sock: socket.socket | None = None
        self._reader: Any = None

    def connect(self) -> None:
        """Connect now rather than at the first point (a no-op when connected or with no control socket).

        A caller that must not act before it knows the harness is there (a tool
        with an effect) connects first; the error is the connect's own OSError.
        """
        if self.control_path and self._sock is None:
            self._sock, self._reader = _connected(self.control_path)

    def point(self, point: str, *, call: str | None = None, op: str | None = None) -> None:
        if not self.control_path:
            return
        self.connect()
        message = {"point": point, "call": call, "op": op, "incarnation": self.incarnation}
        self._sock.sendall(encode_record(message))
        if not self._reader.readline():
            raise ConnectionError(f"harness closed the control socket at {point} {call}")

    def close(self) -> None:
        if self._sock is not None:
            self._reader.close()
            self._sock.close()
            self._sock = self._reader = None


def _connected(control_path: str) -> tuple[socket.socket, Any]:
    """A connected socket and its line reader; a connect that fails closes the socket and raises its own error.

    Only a connected socket is kept, so ``close`` (in a caller's ``finally``)
    never meets a half-made one and hides the error that matters.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(control_path)
    except OSError:
        sock.close()
        raise
    return sock, sock.makefile("rb")


@dataclass(frozen=True)
class WorkloadEnv:
    """The protocol environment of one incarnation, read from os.environ."""

    run_dir: Path
    plan_path: Path
    catalogue_path: Path
    world: Path
    ledger_path: Path
    control_path: str | None
    incarnation: int

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> WorkloadEnv:
        env = os.environ if environ is None else environ
        missing = [
            name
            for name in (protocol.ENV_RUN_DIR, protocol.ENV_PLAN, protocol.ENV_CATALOGUE,
                         protocol.ENV_WORLD, protocol.ENV_LEDGER)
            if not env.get(name)
        ]
        if missing:
            raise RuntimeError(f"not started by killpoint: {', '.join(missing)} unset")
        return cls(
            run_dir=Path(env[protocol.ENV_RUN_DIR]),
            plan_path=Path(env[protocol.ENV_PLAN]),
            catalogue_path=Path(env[protocol.ENV_CATALOGUE]),
            world=Path(env[protocol.ENV_WORLD]),
            ledger_path=Path(env[protocol.ENV_LEDGER]),
            control_path=env.get(protocol.ENV_CONTROL) or None,
            incarnation=_whole_number(env, protocol.ENV_INCARNATION),
        )

    @property
    def journal_path(self) -> Path:
        return self.run_dir / protocol.JOURNAL_NAME


def _whole_number(env: Mapping[str, str], name: str) -> int:
    text = env.get(name, "0")
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a whole number") from None
