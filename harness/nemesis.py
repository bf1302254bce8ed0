"""The nemesis: strikes a workload incarnation for real and records what it did.

A strike is one sequence, in one place: SIGKILL the whole incarnation (the
backend's ``kill``: its cgroup, its container, else its group and tree),
confirm every process dead, sweep what it left elsewhere, and only then write
about it: the kill marker into the ledger (so no record of the dead process can
land after the marker), the journal copied as the kill left it, and the fault's
own damage (a torn tail) done to the journal with the torn copy kept. It
returns a ``Strike``, the record of what it did.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from killpoint import protocol
from killpoint.client import encode_record
from killpoint.harness._safe_files import (
    UntrustedFile,
    append_own_line,
    copy_evidence,
    open_regular,
    read_bounded,
)
from killpoint.harness.backends import Launched
from killpoint.harness.model import TIMEOUT, AfterDelay, Fault, Kill, PlainKill, TornTail


@dataclass(frozen=True)
class Strike:
    """What one strike did, in the order it did it."""

    incarnation: int
    point: str                       # the kill point it struck at, as the evidence names it, or TIMEOUT
    fault: Fault
    leftovers: tuple[str, ...]       # processes killed besides the incarnation's own tree, described
    ledger_line_closed: bool         # the ledger ended in an unterminated line, closed before the marker
    journal_copy: Path | None        # the journal as the kill left it; None when it could not be copied
    torn_copy: Path | None           # the journal after the fault cut its tail; None when nothing was cut
    problems: tuple[str, ...]        # why evidence is missing (a journal that is not a regular file)

    def __repr__(self) -> str:
        fault = f", tail torn to {self.fault.permille}/1000" if isinstance(self.fault, TornTail) else ""
        where = "at its timeout" if self.point == TIMEOUT else f"at {self.point}"
        return f"<incarnation {self.incarnation}, killed by SIGKILL {where}{fault}, {len(self.leftovers)} leftover(s)>"


def strike(launched: Launched, kill: Kill | None, *, incarnation: int, ledger: Path, journal: Path,
           journal_copy: Path, torn_copy: Path) -> Strike:
    """Kill ``launched`` at ``kill`` (None: at its timeout), confirm it dead, and write the evidence of it.

    Raises KillFailed, having written nothing, when a process survives the
    kill. A journal the workload replaced by something that is not a regular
    file is not copied (the run is then judged unknown); the reason is a problem
    in the record.
    """
    kill_confirmed(launched)
    leftovers = tuple(launched.sweep())
    problems: list[str] = []
    try:
        ledger_line_closed = mark_kill(ledger, incarnation, kill)
    except UntrustedFile as refusal:  # the workload swapped its ledger: no marker, so the rules that split it are unknown
        ledger_line_closed = False
        problems.append(f"at the kill, the kill marker was not written: {refusal}")
    fault = kill.fault if kill is not None else PlainKill()  # the timeout's strike is a plain kill
    copied: Path | None = None
    torn: Path | None = None
    try:
        copy_evidence(journal, journal_copy)
        copied = journal_copy
        torn = _inflict(fault, journal, torn_copy)
    except UntrustedFile as refusal:
        problems.append(f"at the kill, {refusal}")
    return Strike(incarnation, TIMEOUT if kill is None else str(kill), fault, leftovers, ledger_line_closed,
                  copied, torn, tuple(problems))


def kill_confirmed(launched: Launched) -> None:
    """SIGKILL every process of ``launched`` and return once all are confirmed dead (KillFailed if not)."""
    launched.kill()
    launched.confirm_dead()


def _inflict(fault: Fault, journal: Path, torn_copy: Path) -> Path | None:
    """Do the fault's damage to the journal after the kill; the copy of the damaged journal, if any was done."""
    if isinstance(fault, TornTail) and tear_journal(journal, fault.permille):
        copy_evidence(journal, torn_copy)
        return torn_copy
    return None


def tear_journal(path: Path, permille: int) -> bool:
    """Cut the journal's last record, keeping ``permille``/1000 of its bytes (at least one, never all).

    This is what a crash in the middle of that record's write leaves. Returns
    False when there is no complete record to cut, or when the journal is not a
    regular file (a workload's symlink is never followed, let alone truncated).
    """
    try:
        data = read_bounded(path)
    except (FileNotFoundError, UntrustedFile):
        return False
    if not data.endswith(b"\n"):
        return False
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    record = data[start:-1]
    if not record:
        return False
    keep = min(max(1, len(record) * permille // 1000), len(record) - 1)
    fd = open_regular(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, start + keep)
    finally:
        os.close(fd)
    return True


def mark_kill(ledger_path: Path, incarnation: int, kill: Kill | None) -> bool:
    """Append the harness's kill marker to the ledger (after the kill is confirmed), on a line of its own.

    ``kill`` None means the incarnation was killed at its timeout. Returns True
    when the ledger ended in an unterminated line (which the marker would
    otherwise have been glued onto, hiding both).
    """
    marker: dict[str, object] = {protocol.LEDGER_KILLED: incarnation}
    if kill is None:
        marker["point"] = TIMEOUT
    elif isinstance(kill, AfterDelay):
        marker["after_s"] = kill.seconds
    else:
        marker["point"] = kill.trigger
    if kill is not None and isinstance(kill.fault, TornTail):
        marker["torn"] = kill.fault.permille
    return append_own_line(ledger_path, encode_record(marker))
