"""The nemesis: strikes a workload incarnation for real and records what it did.

A strike is one sequence, in one place: SIGKILL the whole incarnation (the
backend's ``kill``: its cgroup, its container, else its group and tree),
confirm every process dead, sweep what it left elsewhere, kill what escaped the
kill and still holds the run's files (``harness/execute/_escapees.py``), and only then write
about it: the kill marker into the ledger (so no record of the dead process can
land after the marker), the journal copied as the kill left it, a runtime's own
store (a ``[journal]`` scenario's) copied likewise, and the fault's own damage
(a torn tail) done to the journal with the torn copies kept. It returns a
``Strike``, the record of what it did.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from killpoint import protocol
from killpoint.client import encode_record
from killpoint.harness._safe_files import (UntrustedFile, append_own_line, copy_evidence, open_regular, read_bounded,
                                           remove_tree)
from killpoint.harness.backends import Launched
from killpoint.harness.execute._escapees import RunFiles
from killpoint.harness.faults.power_loss import Disks, lose_power
from killpoint.harness.judge.evidence import MARKER_CLOSED_LINE
from killpoint.harness.layout import refusal_path
from killpoint.harness.model import TIMEOUT, AfterDelay, Fault, Kill, PlainKill, PowerLoss, TornTail


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
    store_copy: Path | None = None   # the runtime's own store as the kill left it; None: none, or refused
    escaped: tuple[str, ...] = ()    # processes that had escaped the kill and held the run's files, killed after it

    def __repr__(self) -> str:
        fault = f", tail torn to {self.fault.permille}/1000" if isinstance(self.fault, TornTail) else ""
        where = "at its timeout" if self.point == TIMEOUT else f"at {self.point}"
        escaped = f", {len(self.escaped)} escaped" if self.escaped else ""
        return (f"<incarnation {self.incarnation}, killed by SIGKILL {where}{fault}, {len(self.leftovers)} "
                f"leftover(s){escaped}>")


StoreDump = Callable[[Path], list[str]]  # writes a database store's rows into a copy folder; the problems met


@dataclass(frozen=True)
class StoreCopies:
    """A runtime's own store (a ``[journal]`` scenario's) and where one strike copies it."""

    workload: Path                   # the workload folder the store's files are relative to
    files: tuple[str, ...]           # the reader's files(plan)
    copy: Path                       # the store as the kill left it
    torn_copy: Path                  # the store as the next incarnation finds it, when a torn tail cut a file of it
    dump: StoreDump | None = None    # a store in a database server: its rows dumped into a copy (none: files only)


@dataclass(frozen=True)
class StrikeSites:
    """Where one strike reads and writes: the run's ledger (the kill marker) and journal, where the journal is
    copied as the kill left it and as its torn tail leaves it, and the runtime's own store's copies (None: it
    keeps none). ``runner.strike_sites`` places them where ``RunPaths`` says."""

    ledger: Path
    journal: Path
    journal_copy: Path
    torn_copy: Path
    store: StoreCopies | None = None


@dataclass(frozen=True)
class DropSite:
    """The lazy file systems of the run (the runtime's storage, maybe the world), for a power loss to drop from
    (kill ``kill_number``)."""

    disks: Disks
    run_dir: Path
    kill_number: int


def strike(launched: Launched, kill: Kill | None, *, incarnation: int, sites: StrikeSites, drop: DropSite | None = None,
           escapes: RunFiles | None = None) -> Strike:
    """Kill ``launched`` at ``kill`` (None: at its timeout), confirm it dead, and write the evidence of it.

    With ``escapes`` (the run's files), what escaped the kill and holds them is
    killed too, before anything is written, and named in ``Strike.escaped``.

    A power loss (``drop`` given) drops what the runtime never made durable
    once the journal and store are copied as the kill left them; the store is
    copied again after the drop, as the next incarnation finds it.

    Raises KillFailed, having written nothing, when a process survives the
    kill. A journal or store file the workload replaced by something that is
    not a regular file is not copied (the run is then judged unknown); the
    reason is a problem in the record.
    """
    kill_confirmed(launched)
    leftovers = tuple(launched.sweep())
    escaped = tuple(escapes.hunt()) if escapes is not None else ()
    return record_strike(kill, incarnation=incarnation, leftovers=leftovers, sites=sites, drop=drop, escaped=escaped)


def record_strike(kill: Kill | None, *, incarnation: int, leftovers: tuple[str, ...], sites: StrikeSites,
                  drop: DropSite | None = None, escaped: tuple[str, ...] = ()) -> Strike:
    """What a strike writes once nothing of the incarnation runs: the kill marker, the copies, the fault's damage.

    ``strike`` calls it after the kill; a snapshot of a run held still at a crash
    point (``harness/execute/prefixes.py``) calls it on its copy, which thereby becomes
    what the kill there would have left.
    """
    ledger, journal, store = sites.ledger, sites.journal, sites.store
    problems: list[str] = []
    try:
        ledger_line_closed = mark_kill(ledger, incarnation, kill)
    except UntrustedFile as refusal:  # the workload swapped its ledger: no marker, so the rules that split it are unknown
        ledger_line_closed = False
        problems.append(f"at the kill, the kill marker was not written: {refusal}")
    fault = kill.fault if kill is not None else PlainKill()  # the timeout's strike is a plain kill
    copied: Path | None = None
    torn: Path | None = None
    store_copied: Path | None = None
    if store is not None:
        store_problems = copy_store(store.workload, store.files, store.copy, store.dump)
        problems += [f"at the kill, {problem}" for problem in store_problems]
        store_copied = None if store_problems else store.copy
    try:
        copy_evidence(journal, sites.journal_copy)
        copied = sites.journal_copy
        torn = _inflict(fault, journal, sites.torn_copy)
    except UntrustedFile as refusal:
        problems.append(f"at the kill, {refusal}")
    if isinstance(fault, PowerLoss):
        if drop is None:
            raise ValueError("a power loss needs the lazy file systems the runner mounted (drop)")
        problems += lose_power(drop.disks, fault, run_dir=drop.run_dir, kill_number=drop.kill_number, journal=journal)
        if store is not None:
            problems += [f"after the drop, {problem}" for problem in copy_store(store.workload, store.files,
                                                                                store.torn_copy, store.dump)]
    elif store is not None and torn is not None and any(store.workload / name == journal for name in store.files):
        problems += [f"after the torn tail, {problem}" for problem in copy_store(store.workload, store.files,
                                                                                 store.torn_copy, store.dump)]
    return Strike(incarnation, TIMEOUT if kill is None else str(kill), fault, leftovers, ledger_line_closed,
                  copied, torn, tuple(problems), store_copied, escaped)


def copy_store(workload: Path, files: tuple[str, ...], copy: Path, dump: StoreDump | None = None) -> list[str]:
    """Copy a store's ``files`` (paths relative to ``workload``) into the new folder ``copy``, and a database
    store's rows with ``dump``; the refusals.

    Run only with the workload dead, so nothing moves under the copy. A file
    that is absent is not copied (nothing was durable yet: a fact the reader
    reads). A file, or a folder on its way, that is a symlink, a FIFO or too
    big is never followed nor read: the copy is then incomplete, so it is
    removed and the refusals are written to ``refusal_path(copy)`` instead,
    and the rules that need it are unknown, never judged on what is left.
    """
    copy.mkdir()
    problems = []
    for name in files:
        source = workload / name
        try:
            _refuse_linked_folders(workload, name)
            if not os.path.lexists(source):
                continue
            target = copy / name
            target.parent.mkdir(parents=True, exist_ok=True)
            copy_evidence(source, target)
        except UntrustedFile as refusal:
            problems.append(f"the store file {name}: {refusal}")
        except OSError as error:  # unreadable (a workload's chmod 000, an I/O error): not copied, said so
            problems.append(f"the store file {name} could not be copied: {error.strerror or error}")
    if dump is not None:
        problems += [f"the store's database: {problem}" for problem in dump(copy)]
    if problems:
        remove_tree(copy)
        refusal_path(copy).write_text("".join(f"{problem}\n" for problem in problems))
    return problems


def _refuse_linked_folders(workload: Path, name: str) -> None:
    """UntrustedFile if a folder on the way from ``workload`` to ``name`` is not a real folder (a symlink, say)."""
    folder = workload
    for part in PurePosixPath(name).parts[:-1]:
        folder = folder / part
        try:
            mode = os.lstat(folder).st_mode
        except FileNotFoundError:
            return  # the file is absent too
        if not stat.S_ISDIR(mode):
            raise UntrustedFile(f"{part} on its path is {'a symlink' if stat.S_ISLNK(mode) else 'not a folder'}; "
                                f"it was not followed")


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
    otherwise have been glued onto, hiding both); the marker then says it
    closed that line (``MARKER_CLOSED_LINE``): the one unreadable line a kill
    can leave, which the checker may judge without.
    """
    marker: dict[str, object] = {protocol.LEDGER_KILLED: incarnation}
    if kill is None:
        marker["point"] = TIMEOUT
    elif isinstance(kill, AfterDelay):
        marker["after_s"] = kill.seconds
        if kill.after is not None:
            marker["after_point"] = kill.after
    else:
        marker["point"] = kill.trigger
    if kill is not None and isinstance(kill.fault, TornTail):
        marker["torn"] = kill.fault.permille
    if kill is not None and isinstance(kill.fault, PowerLoss):
        marker["power"], marker["seed"] = kill.fault.variant, kill.fault.seed
    return append_own_line(ledger_path, lambda closes_line: encode_record(
        {**marker, MARKER_CLOSED_LINE: True} if closes_line else marker))
