"""Readers of a run's evidence: journal, ledger, journal copies at each kill, world, a runtime's own store.

They never raise on what a workload wrote: a line that does not parse becomes
a ``problem`` (quoted with its line number) and a torn last line is kept aside,
reported but not trusted. Every record keeps its file and line for quoting.
What the harness itself wrote and the judgement needs (incarnations.json, the
journal copies at each kill, the ledger, the catalogues it handed the workload,
the copies of a ``[journal]`` scenario's store) but cannot be read is listed in
``Evidence.unreadable`` by file: the checker's rules that need it are unknown,
never judged on what is left.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from killpoint import protocol
from killpoint.catalogue import Catalogue, catalogue_problems
from killpoint.client import parse_json_lines
from killpoint.errors import InternalError
from killpoint.fake_tools.world import SNAPSHOT_BYTES, World
from killpoint.harness._safe_files import read_bounded
from killpoint.harness.faults.lazyfs.model import DropReport
from killpoint.harness.layout import STORE_FINAL, RunPaths, handed_catalogue_file, refusal_path
from killpoint.harness.codec import Undecodable
from killpoint.harness.model import DurableState, Incarnation, Plan, StoreReader


class MissingEvidence(InternalError):
    """Evidence the harness needs could not be read (a lost journal copy or kill marker, an unreadable file):
    the run is unknown, never a pass."""


@dataclass(frozen=True)
class Line:
    """One parsed JSON line, with where it came from."""

    source: str
    number: int
    record: dict[str, Any] = field(hash=False)

    def quote(self) -> str:
        return f"{self.source}:{self.number}: {json.dumps(self.record, sort_keys=True)}"

    def get(self, key: str, default: Any = None) -> Any:
        return self.record.get(key, default)


@dataclass(frozen=True)
class BadLine:
    """A newline-terminated line that is not a JSON object: where, why, and its first bytes."""

    source: str
    number: int
    why: str
    start: bytes  # the line's first 120 bytes

    def quote(self, length: int = 120) -> str:
        return f"{self.source}:{self.number}: {self.why}: {self.start[:length]!r}"


@dataclass(frozen=True)
class JsonLines:
    lines: tuple[Line, ...]
    torn_tail: bytes | None = None
    problems: tuple[str, ...] = ()
    refused: str | None = None  # why the file was not read at all (a symlink, a FIFO, too big); also a problem
    bad_lines: tuple[BadLine, ...] = ()  # each line that is not a JSON object (each also one of ``problems``)


def read_lines(path: Path, source: str | None = None) -> JsonLines:
    """Parse a JSON-lines file leniently (see module docstring); a missing file has no lines.

    The torn-tail rule is the workload client's (``parse_json_lines``): both
    sides of the protocol read a file the same way.
    """
    source = source or path.name
    try:
        data = read_bounded(path)
    except FileNotFoundError:
        return JsonLines(())
    except OSError as refusal:  # UntrustedFile (a symlink, a FIFO, too big) says why in its message
        return JsonLines((), problems=(f"{source}: {refusal}",), refused=str(refusal))
    parsed = parse_json_lines(data)
    bad_lines = tuple(BadLine(source, number, why, raw[:120]) for number, why, raw in parsed.problems)
    return JsonLines(tuple(Line(source, number, record) for number, record in parsed.records), parsed.torn_tail,
                     tuple(bad.quote() for bad in bad_lines), bad_lines=bad_lines)


# A kill marker's key saying the nemesis found the ledger ending in an unterminated line and closed it first.
MARKER_CLOSED_LINE = "closed_line"


def lines_no_kill_left(ledger: JsonLines) -> list[BadLine]:
    """The ledger's unreadable lines that no kill can have left: a tool's record may be glued in them.

    The fake tools append each record whole, its newline included, in one
    write. So the one unreadable line an honest run can hold is the part of a
    record a kill cut short, which the nemesis closes with a newline before
    its marker, saying so (``MARKER_CLOSED_LINE``): it holds no whole record.
    Any other line that does not parse may be junk the workload wrote with a
    tool's whole record glued on after it; a ledger judged without that record
    accuses a correct runtime ("its tool never ran") or hides a replay. The
    bytes after the last newline (``torn_tail``) cannot hold a whole record
    either, so they are not counted here.
    """
    closed_by_kill = {line.number - 1 for line in ledger.lines
                      if protocol.LEDGER_KILLED in line.record and line.get(MARKER_CLOSED_LINE) is True}
    return [bad for bad in ledger.bad_lines if bad.number not in closed_by_kill]


def read_incarnations(path: Path) -> tuple[tuple[Incarnation, ...], str | None]:
    """The incarnations the runner recorded, or () and why they cannot be read.

    Without them no kill is known, so a run is judged on nothing: the reason
    makes it unknown (``Evidence.unreadable``) instead of a pass.
    """
    try:
        entries = json.loads(read_bounded(path).decode())
    except FileNotFoundError:
        return (), f"{path.name} is missing"
    except OSError as refusal:  # UntrustedFile (a symlink, a FIFO, too big) says why in its message
        return (), str(refusal)
    except (ValueError, RecursionError) as error:  # not UTF-8, not JSON, nested past the parser's depth
        return (), f"{path.name} is not JSON ({type(error).__name__}: {str(error)[:120]})"
    if not isinstance(entries, list) or not entries:
        return (), f"{path.name} holds {type(entries).__name__} {entries!r:.40}, not a list of the incarnations"
    try:
        return Incarnation.all_from_json(entries), None
    except Undecodable as wrong:
        problems = wrong.problems
        return (), f"{path.name}: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")


@dataclass(frozen=True)
class Evidence:
    """Everything the checker judges from, read back from a run directory."""

    journal: JsonLines
    journals_at_kill: tuple[JsonLines, ...]  # as written when each kill was confirmed
    ledger: JsonLines
    world: dict[str, str]
    incarnations: tuple[Incarnation, ...]
    # What the next incarnation found after each kill where the nemesis tore the journal; None where it did not.
    journals_found: tuple[JsonLines | None, ...] = ()
    # The catalogues the workload was handed, by file name (CATALOGUE_FILE, DRIFTED_CATALOGUE_FILE).
    catalogues: dict[str, Catalogue] = field(default_factory=dict)
    # Evidence the judgement needs that could not be read, by file name, each with why: the rules
    # that need it are unknown.
    unreadable: dict[str, str] = field(default_factory=dict)
    # Judged black-box (a ``[journal]`` scenario): the runtime's own store read at each kill (read up to the
    # first copy missing, as the journal copies are), as the next incarnation found it where a torn tail
    # cut it (None where it did not), at the end of the run, and at the end of the crash-free run.
    stores_at_kill: tuple[DurableState, ...] = ()
    stores_found: tuple[DurableState | None, ...] = ()
    store_final: DurableState | None = None
    golden_store_final: DurableState | None = None
    # What reading those copies took that the report says, each prefixed with the copy's name.
    store_notes: tuple[str, ...] = ()
    # What each power loss dropped, by kill number: its report's lines, each prefixed with the report's file name.
    drops: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # Where the world at each kill was recorded (an agent's run; ``worlds_at_kill`` reads them when asked).
    world_records: tuple[Path, ...] = ()

    @functools.cached_property
    def worlds_at_kill(self) -> tuple[WorldAtKill | None, ...]:
        """The world once each kill's tree was dead, by kill number (None: absent or unreadable): what a kill left.
        Read only when a judgement asks: most runs' worlds equal the crash-free run's."""
        return tuple(read_world_at_kill(path) for path in self.world_records)

    def journal_records(self, kind: str) -> list[Line]:
        return [line for line in self.journal.lines if line.get("kind") == kind]

    def journal_found(self, kill_number: int) -> JsonLines:
        """The journal the incarnation after kill ``kill_number`` started from."""
        torn = self.journals_found[kill_number] if kill_number < len(self.journals_found) else None
        return torn if torn is not None else self.journals_at_kill[kill_number]

    def store_found(self, kill_number: int) -> DurableState:
        """The store the incarnation after kill ``kill_number`` started from."""
        torn = self.stores_found[kill_number] if kill_number < len(self.stores_found) else None
        return torn if torn is not None else self.stores_at_kill[kill_number]

    def ledger_segments(self) -> list[list[Line]]:
        """Ledger lines split at the harness's kill markers: segment k is what ran before kill k."""
        segments: list[list[Line]] = [[]]
        for line in self.ledger.lines:
            if protocol.LEDGER_KILLED in line.record:
                segments.append([])
            else:
                segments[-1].append(line)
        return segments


@dataclass(frozen=True)
class StoreReading:
    """How to read a ``[journal]`` scenario's store copies: its reader, the plan, the crash-free run's folder."""

    reader: StoreReader
    plan: Plan
    golden_dir: Path


def read_store_copy(copy: Path, reading: StoreReading) -> tuple[DurableState | None, str | None]:
    """The durable state a store copy holds, or None and why it cannot be judged from (refused, lost, unreadable)."""
    if os.path.lexists(refusal_path(copy)):
        try:
            why = read_bounded(refusal_path(copy)).decode(errors="replace").strip().replace("\n", "; ")
        except OSError as refusal:
            why = str(refusal)
        return None, f"{copy.name} was refused: {why}"
    if not copy.is_dir() or copy.is_symlink():
        return None, f"{copy.name} is missing"
    state = reading.reader.read(copy, reading.plan)
    if state.problems:
        return None, f"{copy.name} cannot be read: {'; '.join(state.problems)}"
    return state, None


def _read_stores(run_dir: Path, kills: int, reading: StoreReading, unreadable: dict[str, str]) -> dict[str, Any]:
    """The store fields of ``Evidence``; each copy that cannot be read goes into ``unreadable``.

    A kill's copy that is lost ends the list, so that the checker, finding fewer
    copies than kills, judges no kill from them.
    """
    at_kill: list[DurableState] = []
    found: list[DurableState | None] = []
    notes: list[str] = []
    holds_journal = protocol.JOURNAL_NAME in reading.reader.files(reading.plan)
    for number in range(kills):
        state, why = read_store_copy(RunPaths(run_dir).store_at_kill(number), reading)
        # The nemesis copies the store again after a torn tail cut the journal, when the journal is a file of it,
        # and after every power loss.
        torn_kept = ((holds_journal and os.path.lexists(RunPaths(run_dir).torn_journal(number)))
                     or os.path.lexists(RunPaths(run_dir).power_loss_report(number)))
        torn, torn_why = (read_store_copy(RunPaths(run_dir).store_found(number), reading) if torn_kept
                          else (None, None))
        if state is None or torn_why is not None:
            unreadable[RunPaths(run_dir).store_at_kill(number).name] = "; ".join(filter(None, (why, torn_why)))
            break
        at_kill.append(state)
        found.append(torn)
        notes += _noted(RunPaths(run_dir).store_at_kill(number).name, state)
        notes += _noted(RunPaths(run_dir).store_found(number).name, torn)
    final, why = read_store_copy(RunPaths(run_dir).store_final, reading)
    if why is not None:
        unreadable[STORE_FINAL] = why
    notes += _noted(STORE_FINAL, final)
    golden, why = read_store_copy(RunPaths(reading.golden_dir).store_final, reading)
    if why is not None:
        unreadable[f"golden {STORE_FINAL}"] = f"the crash-free run's {why}"
    return {"stores_at_kill": tuple(at_kill), "stores_found": tuple(found), "store_final": final,
            "golden_store_final": golden, "store_notes": tuple(notes)}


def _noted(name: str, state: DurableState | None) -> list[str]:
    """A store copy's notes, each naming the copy."""
    return [f"{name}: {note}" for note in state.notes] if state is not None else []


def read_handed_catalogue(path: Path) -> tuple[Catalogue | None, str | None]:
    """The catalogue in a file the runner handed a workload (the protocol's JSON form), or None and why not."""
    try:
        text = read_bounded(path).decode()
    except FileNotFoundError:
        return None, f"{path.name} is missing"
    except OSError as refusal:  # UntrustedFile says why
        return None, str(refusal)
    except UnicodeDecodeError:
        return None, f"{path.name} is not UTF-8"
    return _parsed_catalogue(path.name, text)


@functools.lru_cache(maxsize=8)
def _parsed_catalogue(name: str, text: str) -> tuple[Catalogue | None, str | None]:
    """``read_handed_catalogue``'s reading of a file's text, checked once per text: every run of a session is
    handed the same catalogue, and checking it was a tenth of the harness's time per run."""
    if problems := catalogue_problems(Path(name), text):
        return None, f"{name} is not a catalogue: {problems[0]}"
    data = json.loads(text)
    return Catalogue(dict(data["tools"]), data.get("default", protocol.UNKNOWN),
                     frozenset(data.get("interactive", ()))), None


def read_evidence(run_dir: Path, store: StoreReading | None = None) -> Evidence:
    """The run's evidence; never raises, and lists in ``unreadable`` what the judgement needs and cannot read.

    The copies at the kills are read up to the first one missing: the runner
    makes one at every kill (empty when there was no journal yet), so a missing
    one was lost, and the checker, finding fewer copies than kills, judges no kill.
    The catalogues read are those the incarnations were handed. With ``store``
    (a ``[journal]`` scenario) the store's copies are read too.
    """
    paths = RunPaths(run_dir)
    incarnations, incarnations_unreadable = read_incarnations(paths.incarnations)
    unreadable = {paths.incarnations.name: incarnations_unreadable} if incarnations_unreadable else {}
    kills = sum(1 for incarnation in incarnations if incarnation.killed_at is not None)
    kept = next((number for number in range(kills) if not os.path.lexists(RunPaths(run_dir).journal_at_kill(number))),
                kills)
    at_kill = tuple(read_lines(RunPaths(run_dir).journal_at_kill(number)) for number in range(kept))
    found = tuple(read_lines(RunPaths(run_dir).found_journal(number))
                  if os.path.lexists(RunPaths(run_dir).found_journal(number)) else None for number in range(kept))
    ledger = read_lines(paths.ledger, "ledger.jsonl")
    harness_written = {paths.ledger.name: ledger,
                       **{RunPaths(run_dir).journal_at_kill(number).name: copy for number, copy in enumerate(at_kill)},
                       **{RunPaths(run_dir).found_journal(number).name: copy for number, copy in enumerate(found)}}
    unreadable.update({name: lines.refused for name, lines in harness_written.items()
                       if lines is not None and lines.refused is not None})
    catalogues = {}
    for name in dict.fromkeys(handed_catalogue_file(incarnation) for incarnation in incarnations):
        catalogue, why = read_handed_catalogue(run_dir / name)
        if catalogue is not None:
            catalogues[name] = catalogue
        else:
            unreadable[name] = why or name
    stores = _read_stores(run_dir, kills, store, unreadable) if store is not None else {}
    drops = {number: lines for number in range(kills) if (lines := drop_lines(run_dir, number)) is not None}
    return Evidence(
        journal=read_lines(paths.journal, "journal.jsonl"),
        journals_at_kill=at_kill,
        journals_found=found,
        ledger=ledger,
        world=World(paths.world).snapshot(),
        incarnations=incarnations,
        catalogues=catalogues,
        unreadable=unreadable,
        drops=drops,
        world_records=tuple(paths.world_at_kill(number) for number in range(kills)),
        **stores,
    )


@dataclass(frozen=True)
class WorldAtKill:
    """The world as a kill left it (path -> text or what stands for it), and the file a real server was held
    opening when the kill landed (``tool_opened``; None at any other point)."""

    world: dict[str, str]
    opened: str | None


WORLD_AT_KILL_LIMIT_BYTES = 2 * SNAPSHOT_BYTES  # a snapshot's text at most, JSON-escaped


def read_world_at_kill(path: Path) -> WorldAtKill | None:
    """What the harness wrote of the world at a kill; None if absent or not that (the workload can reach it)."""
    try:
        record = json.loads(read_bounded(path, WORLD_AT_KILL_LIMIT_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    world = record.get("world") if isinstance(record, dict) else None
    opened = record.get("opened") if isinstance(record, dict) else None
    if not isinstance(world, dict) or not all(isinstance(value, str) for value in world.values()) or not (
            opened is None or isinstance(opened, str)):
        return None
    return WorldAtKill(world, opened)


def drop_lines(run_dir: Path, number: int) -> tuple[str, ...] | None:
    """What power loss ``number`` of the run dropped: the runtime's storage, the world on the device, and the
    database server's data folder (its WAL file by file, the rest counted); None if the run had no such loss."""
    paths = RunPaths(run_dir)
    storage = read_drop(paths.power_loss_report(number))
    if storage is None:
        return None
    database = read_drop(paths.database_power_loss_report(number)) or ()
    # The server's data files are written back lazily and fsynced at its checkpoints, recovered from its WAL
    # after a crash: what matters is the WAL, the rest is counted.
    wal = tuple(line for line in database if ": pg_wal/" in line)
    rest = len(database) - len(wal)
    counted = (f"{paths.database_power_loss_report(number).name}: {rest} more line(s) on the server's data files, "
               "which its crash recovery rebuilds from the WAL",) if rest else ()
    return storage + (read_drop(paths.world_report(number)) or ()) + wal + counted


def read_drop(path: Path) -> tuple[str, ...] | None:
    """A power loss's report as lines (``power-loss-0.json: journal.jsonl: bytes 0..296 dropped ...``); None if absent.

    The lines are evidence quoted beside a finding, never judged from: a report
    that cannot be read is said so in its one line.
    """
    try:
        lines = DropReport.from_json(json.loads(read_bounded(path))).lines()
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        lines = [f"unreadable: {error}"]
    return tuple(f"{path.name}: {line}" for line in lines)
