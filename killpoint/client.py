"""The workload side of protocol v1: rendezvous, durable journal, ledger appends.

Standard library only, so any Python runtime can import it (or copy it) without
pulling the harness in. Every record is one ``write`` of one JSON line: a journal
record is fsynced before the caller goes on (write-ahead), a ledger record goes
through an O_APPEND descriptor so concurrent writers never interleave.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from killpoint import protocol
from killpoint.errors import HarnessError, InternalError


def encode_record(record: dict[str, Any]) -> bytes:
    """One compact JSON line, the unit of every journal and ledger write."""
    return (json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n").encode()


def fsync_directory(path: str | os.PathLike[str]) -> None:
    """Make the entries of the directory ``path`` durable (a file created, renamed or removed in it).

    An fsync of a file makes its bytes durable, not its name: until its
    directory is fsynced too, a power loss may take a new file away whole.
    """
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class AppendOnlyFile:
    """A JSON-lines file opened once with O_APPEND; ``durable`` adds an fsync per record.

    A durable file also has its directory fsynced once, at every open: the
    open may have created it, or an earlier incarnation may have created it and
    been killed before its own directory fsync, and either way the records
    fsynced into it would be lost with its name at a power loss.
    """

    def __init__(self, path: str | os.PathLike[str], *, durable: bool, fd: int | None = None) -> None:
        """``fd``: a descriptor the caller opened on ``path`` itself, with O_APPEND (the harness, which opens
        what a workload could have replaced without following it); by default ``path`` is opened here."""
        self.path = Path(path)
        self.durable = durable
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644) if fd is None else fd
        if durable:
            fsync_directory(self.path.parent)

    def append(self, record: dict[str, Any]) -> None:
        os.write(self._fd, encode_record(record))
        if self.durable:
            self.sync()

    def sync(self) -> None:
        """Make every record appended so far durable (what ``append`` does per record when ``durable``)."""
        os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


@dataclass(frozen=True)
class ParsedLines:
    """JSON-lines bytes split by the one torn-tail rule (``parse_json_lines``)."""

    records: tuple[tuple[int, dict[str, Any]], ...]  # (line number, record) of each line that is a JSON object
    problems: tuple[tuple[int, str, bytes], ...]  # (line number, why, the raw line) of each line that is not
    torn_tail: bytes | None  # the bytes after the last newline, or None when the data ends with one


def parse_json_lines(data: bytes) -> ParsedLines:
    """Split JSON lines by the one torn-tail rule every reader of the protocol's files shares.

    The bytes after the last newline are a record whose write was cut (a crash
    or the nemesis's tear): ``torn_tail``, never parsed, never trusted. Every
    newline-terminated line was written whole, so one that is not a JSON object
    (not UTF-8, not JSON, a key given twice, nested past the parser) is
    corruption: a ``problem`` with its line number, whatever its place. Lines are
    decoded as UTF-8 here because ``json.loads`` would sniff UTF-16 or UTF-32 in
    bytes; a key given twice is refused because readers disagree on which value
    counts.
    """
    *lines, tail = data.split(b"\n")
    records: list[tuple[int, dict[str, Any]]] = []
    problems: list[tuple[int, str, bytes]] = []
    for number, raw in enumerate(lines, start=1):
        try:
            record = json.loads(raw.decode(), object_pairs_hook=_keys_once)
        except UnicodeDecodeError:
            problems.append((number, "not UTF-8", raw))
        except _KeyTwice as twice:
            problems.append((number, str(twice), raw))
        except ValueError:
            problems.append((number, "not JSON", raw))
        except RecursionError:
            problems.append((number, "JSON nested too deeply to read", raw))
        else:
            if isinstance(record, dict):
                records.append((number, record))
            else:
                problems.append((number, "not a JSON object", raw))
    return ParsedLines(tuple(records), tuple(problems), tail or None)


class _KeyTwice(InternalError, ValueError):
    """A JSON object names one key twice."""


def _keys_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    record = dict(pairs)
    if len(record) < len(pairs):
        twice = sorted(key for key, count in Counter(key for key, _ in pairs).items() if count > 1)
        raise _KeyTwice(f"key(s) {', '.join(map(repr, twice))} given twice in one object")
    return record


def read_json_lines(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], bytes | None]:
    """A workload's strict read of a JSON-lines file: (records, torn_tail); a missing file has none.

    The torn tail (``parse_json_lines``) is returned apart for the caller to
    cut off before appending. A bad newline-terminated line is corruption and
    raises ValueError naming the file, the line and why.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return [], None
    parsed = parse_json_lines(data)
    if parsed.problems:
        number, why, raw = parsed.problems[0]
        raise ValueError(f"{path}: line {number}: {why}: {raw[:80]!r}")
    return [record for _, record in parsed.records], parsed.torn_tail


class ControlReplyError(HarnessError, ConnectionError):
    """The harness replied to a crash point with a line that is neither ``ok`` nor ``kill``."""


@dataclass(frozen=True)
class ArmedPoints:
    """The crash points at which this incarnation may be killed (``$KILLPOINT_ARMED``); None: any of them.

    A round trip per crash point is most of an incarnation's time in a sweep,
    and only the kill's own point needs one: at every other point the workload
    tells the harness it passed (for coverage) and goes on without a reply. A
    value the client cannot read makes it wait everywhere, as a v1 client does,
    so a mistake costs speed, never a kill.
    """

    at: frozenset[tuple[str, str | None]] | None = None
    # A non-pausing kill's point: announce it and SIGKILL the group at once, with no round trip to the harness
    # (whose ``kill`` reply would leave the other threads a fraction of a millisecond to run on).
    now: bool = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> ArmedPoints:
        return cls.parse((os.environ if environ is None else environ).get(protocol.ENV_ARMED))

    @classmethod
    def parse(cls, text: str | None) -> ArmedPoints:
        """The points ``$KILLPOINT_ARMED``'s value ``text`` names (None or empty: unset)."""
        if not text:
            return cls()
        try:
            armed = json.loads(text)
            listed = [(point, call) for point, call in armed["at"]]
            now = armed.get(protocol.ARMED_NOW) is True
        except (ValueError, KeyError, TypeError, AttributeError):
            return cls()
        if not all(isinstance(point, str) and (call is None or isinstance(call, str)) for point, call in listed):
            return cls()
        return cls(frozenset(listed), now=now)

    def waits(self, point: str, call: str | None) -> bool:
        """The workload must wait for a reply here: the point is armed (as ``point`` of any call, or of ``call``)."""
        return self.at is None or (point, call) in self.at or (point, None) in self.at


class Rendezvous:
    """The crash-point channel: one persistent connection per process.

    ``point`` sends one JSON line and blocks for the harness's reply; the harness
    answers ``ok``, or answers ``kill`` (``die_now``), or SIGKILLs the process
    while it waits. With no control socket configured the workload runs freely
    and ``point`` returns at once.
    """

    def __init__(self, control_path: str | None, incarnation: int, armed: ArmedPoints | None = None) -> None:
        self.control_path = control_path
        self.incarnation = incarnation
        self.armed = ArmedPoints.from_environ() if armed is None else armed
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
        assert self._sock is not None  # connect() made it
        message = {"point": point, "call": call, "op": op, "incarnation": self.incarnation}
        if not self.armed.waits(point, call):
            self._sock.sendall(encode_record({**message, protocol.NO_WAIT_FIELD: False,
                                              protocol.SENT_FIELD: time.monotonic()}))
            return
        self._sock.sendall(encode_record(message))
        if self.armed.now and self.armed.at is not None:  # only an armed point waits here: the kill's own
            die_now()
        reply = self._reader.readline()
        if reply == protocol.REPLY_KILL:
            die_now()
        if not reply:
            raise ConnectionError(f"harness closed the control socket at {point} {call}")
        if reply != protocol.REPLY_OK:
            raise ControlReplyError(f"the harness replied {reply[:80]!r} at {point} {call}; protocol v1 replies "
                                    f"are {protocol.REPLY_OK!r} and {protocol.REPLY_KILL!r}")

    def close(self) -> None:
        if self._sock is not None:
            self._reader.close()
            self._sock.close()
            self._sock = self._reader = None


def die_now() -> None:
    """SIGKILL this process's whole group at once, as a ``kill`` reply asks: no thread of the workload runs on.

    The harness starts every incarnation as the leader of its own process group,
    so the group is the workload (its tools' processes too) and never the
    harness. A process the kill spares is the init of a PID namespace (a
    container's PID 1 ignores SIGKILL from inside it): it exits at once, which
    ends every thread of it and every process of its namespace, and runs no
    Python cleanup. The harness's own kill follows either way.
    """
    os.killpg(os.getpgrp(), signal.SIGKILL)
    os._exit(128 + signal.SIGKILL)


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
    world_durable: bool = False  # the fake world is on the device a power loss drops from (ENV_WORLD_DURABLE)

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
            world_durable=env.get(protocol.ENV_WORLD_DURABLE) == "1",
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
