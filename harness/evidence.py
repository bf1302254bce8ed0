"""Readers of a run's evidence: journal, ledger, journal copies at each kill, world.

They never raise on what a workload wrote: a line that does not parse becomes
a ``problem`` (quoted with its line number) and a torn last line is kept aside,
reported but not trusted. Every record keeps its file and line for quoting.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fake_tools.world import World
from harness import protocol
from harness._safe_files import UntrustedFile, read_bounded


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
class JsonLines:
    lines: tuple[Line, ...]
    torn_tail: bytes | None = None
    problems: tuple[str, ...] = ()


def read_lines(path: Path, source: str | None = None) -> JsonLines:
    """Parse a JSON-lines file leniently (see module docstring)."""
    source = source or path.name
    try:
        data = read_bounded(path)
    except FileNotFoundError:
        return JsonLines(())
    except UntrustedFile as refusal:
        return JsonLines((), problems=(f"{source}: {refusal}",))
    raw_lines = data.split(b"\n")
    tail = raw_lines.pop() or None
    lines, problems = [], []
    for number, raw in enumerate(raw_lines, start=1):
        try:
            record = json.loads(raw)
        except ValueError:
            problems.append(f"{source}:{number}: not JSON: {raw[:120]!r}")
            continue
        except RecursionError:
            problems.append(f"{source}:{number}: JSON nested too deeply to read: {raw[:120]!r}")
            continue
        if isinstance(record, dict):
            lines.append(Line(source, number, record))
        else:
            problems.append(f"{source}:{number}: not a JSON object: {raw[:120]!r}")
    return JsonLines(tuple(lines), tail, tuple(problems))


@dataclass(frozen=True)
class Incarnation:
    """What the runner saw of one launch of the workload."""

    number: int
    pid: int
    exit_code: int | None  # None when the harness killed it
    killed_at: str | None = None  # the kill point, when killed at a crash point
    timed_out: bool = False
    points: tuple[str, ...] = ()  # crash points reached, as "call:point"
    seconds: float = 0.0
    stderr_tail: str = ""
    leftovers: tuple[str, ...] = ()  # processes it left running, killed by the sweep
    catalogue_drift: str | None = None  # "tool=CLASS" when it was handed a drifted catalogue
    kill_latency_s: float | None = None  # event kills: from the event's write to the confirmed kill
    protocol_problems: tuple[str, ...] = ()  # control messages that were not crash points


@dataclass(frozen=True)
class Evidence:
    """Everything the checker judges from, read back from a run directory."""

    journal: JsonLines
    journals_at_kill: tuple[JsonLines, ...]  # as written when each kill was confirmed
    ledger: JsonLines
    world: dict[str, str]
    incarnations: tuple[Incarnation, ...]
    # What the next incarnation found after each kill: the torn copy where the nemesis tore it.
    journals_found: tuple[JsonLines, ...] = ()

    def journal_records(self, kind: str) -> list[Line]:
        return [line for line in self.journal.lines if line.get("kind") == kind]

    def journal_found(self, kill_number: int) -> JsonLines:
        """The journal the incarnation after kill ``kill_number`` started from."""
        if kill_number < len(self.journals_found):
            return self.journals_found[kill_number]
        return self.journals_at_kill[kill_number]

    def ledger_segments(self) -> list[list[Line]]:
        """Ledger lines split at the harness's kill markers: segment k is what ran before kill k."""
        segments: list[list[Line]] = [[]]
        for line in self.ledger.lines:
            if "killed" in line.record:
                segments.append([])
            else:
                segments[-1].append(line)
        return segments


def run_paths(run_dir: Path) -> dict[str, Path]:
    """Where each piece of a run's evidence lives (one layout for runner and readers)."""
    return {
        "workload": run_dir / "workload",
        "journal": run_dir / "workload" / protocol.JOURNAL_NAME,
        "ledger": run_dir / "ledger.jsonl",
        "world": run_dir / "world",
        "plan": run_dir / "plan.json",
        "catalogue": run_dir / "catalogue.json",
        "drifted_catalogue": run_dir / "catalogue-drifted.json",
        "incarnations": run_dir / "incarnations.json",
    }


def journal_at_kill_path(run_dir: Path, kill_number: int) -> Path:
    return run_dir / f"journal-at-kill-{kill_number}.jsonl"


def _journal_found(run_dir: Path, kill_number: int) -> JsonLines:
    torn = journal_at_kill_path(run_dir, kill_number).with_suffix(".torn.jsonl")
    return read_lines(torn if torn.exists() else journal_at_kill_path(run_dir, kill_number))


def read_evidence(run_dir: Path) -> Evidence:
    paths = run_paths(run_dir)
    incarnations = tuple(
        Incarnation(**{**entry, **{key: tuple(entry[key]) for key in ("points", "leftovers", "protocol_problems")}})
        for entry in json.loads(paths["incarnations"].read_text())
    ) if paths["incarnations"].exists() else ()
    kills = sum(1 for incarnation in incarnations if incarnation.killed_at is not None)
    return Evidence(
        journal=read_lines(paths["journal"], "journal.jsonl"),
        journals_at_kill=tuple(read_lines(journal_at_kill_path(run_dir, number)) for number in range(kills)),
        journals_found=tuple(_journal_found(run_dir, number) for number in range(kills)),
        ledger=read_lines(paths["ledger"], "ledger.jsonl"),
        world=World(paths["world"]).snapshot(),
        incarnations=incarnations,
    )
