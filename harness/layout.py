"""The layout of a run directory: every file and folder a run's writers make and its readers read, by name.

One table for the runner and the nemesis that write a run directory, the
evidence readers and the checker that judge it, and ``show``, ``merge``,
retention and the run record that read it back: a file is named here once.
``RunPaths(run_dir)`` gives each path; the names alone (a file's name in a
store copy, a folder of the session's scratch) are the constants beside it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from killpoint import protocol
from killpoint.harness.model import Incarnation

CATALOGUE_FILE = "catalogue.json"  # handed to every incarnation, or to the first alone under drift
DRIFTED_CATALOGUE_FILE = "catalogue-drifted.json"  # handed to the incarnations after the first under drift
RUN_RECORD_NAME = "run.json"  # what the run directory is running, written before its first launch
VERDICT_NAME = "verdict.json"
INTERRUPTED_NAME = "interrupted.json"
SCRATCH_COPY_NAME = "scratch-copy.txt"  # what the copy of its scratch evidence left out
STORE_AT_KILL_PREFIX = "store-at-kill-"
STORE_FINAL = "store-final"  # the folder holding the copy of the store made when the run ended
PREFIXES_NAME = "prefixes"  # in the session's scratch folder: the states runs saved for their children to start from


@dataclass(frozen=True)
class RunPaths:
    """Where each piece of one run's evidence lives, under ``run_dir``."""

    run_dir: Path

    @property
    def workload(self) -> Path:
        """The workload's own folder (``$KILLPOINT_RUN_DIR``): its journal and its own store."""
        return self.run_dir / "workload"

    @property
    def journal(self) -> Path:
        return self.workload / protocol.JOURNAL_NAME

    @property
    def ledger(self) -> Path:
        return self.run_dir / "ledger.jsonl"

    @property
    def world(self) -> Path:
        return self.run_dir / "world"

    @property
    def plan(self) -> Path:
        return self.run_dir / "plan.json"

    @property
    def catalogue(self) -> Path:
        return self.run_dir / CATALOGUE_FILE

    @property
    def drifted_catalogue(self) -> Path:
        return self.run_dir / DRIFTED_CATALOGUE_FILE

    @property
    def incarnations(self) -> Path:
        return self.run_dir / "incarnations.json"

    @property
    def run_record(self) -> Path:
        return self.run_dir / RUN_RECORD_NAME

    @property
    def verdict(self) -> Path:
        return self.run_dir / VERDICT_NAME

    @property
    def interrupted(self) -> Path:
        return self.run_dir / INTERRUPTED_NAME

    @property
    def scratch_copy(self) -> Path:
        return self.run_dir / SCRATCH_COPY_NAME

    @property
    def store_final(self) -> Path:
        return self.run_dir / STORE_FINAL

    def journal_at_kill(self, kill_number: int) -> Path:
        return self.run_dir / f"journal-at-kill-{kill_number}.jsonl"

    def torn_journal(self, kill_number: int) -> Path:
        return self.run_dir / torn_journal_name(kill_number)

    def journal_after_drop(self, kill_number: int) -> Path:
        """The journal after power loss ``kill_number`` dropped what was never durable: what the next incarnation
        found."""
        return self.run_dir / f"journal-after-drop-{kill_number}.jsonl"

    def found_journal(self, kill_number: int) -> Path:
        """Where the journal the next incarnation found is kept when kill ``kill_number``'s fault changed it."""
        dropped = self.journal_after_drop(kill_number)
        return dropped if os.path.lexists(dropped) else self.torn_journal(kill_number)

    def power_loss_report(self, kill_number: int) -> Path:
        """What power loss ``kill_number`` dropped (the lazy file system's ``DropReport``)."""
        return self.run_dir / f"power-loss-{kill_number}.json"

    def database_power_loss_report(self, kill_number: int) -> Path:
        """What power loss ``kill_number`` dropped from the database server's data folder."""
        return self.run_dir / f"database-power-loss-{kill_number}.json"

    def world_report(self, kill_number: int) -> Path:
        """What power loss ``kill_number`` dropped from the fake world, when the world is on the device too."""
        return self.run_dir / f"power-loss-{kill_number}.world.json"

    def world_at_kill(self, kill_number: int) -> Path:
        """The world's snapshot once kill ``kill_number``'s tree was dead, and the file a real server was held
        opening when it landed: what the kill left in the world (``debris``)."""
        return self.run_dir / f"world-at-kill-{kill_number}.json"

    def world_copy(self, kill_number: int, when: str) -> Path:
        """The fake world on the device ``when`` ("at-kill", "after-drop") power loss ``kill_number`` dropped."""
        return self.run_dir / f"world-{when}-{kill_number}"

    def disk_at_kill(self, kill_number: int) -> Path:
        """The runtime's storage (its lazy file system) as power loss ``kill_number``'s kill left it, before the
        drop."""
        return self.run_dir / f"disk-at-kill-{kill_number}"

    def disk_after_drop(self, kill_number: int) -> Path:
        """The runtime's storage after power loss ``kill_number``'s drop: what a disk that lost power would hold."""
        return self.run_dir / f"disk-after-drop-{kill_number}"

    def store_at_kill(self, kill_number: int) -> Path:
        return self.run_dir / store_at_kill_name(kill_number)

    def store_found(self, kill_number: int) -> Path:
        return self.run_dir / store_found_name(kill_number)


def handed_catalogue_file(incarnation: Incarnation) -> str:
    """The name of the catalogue file the runner handed ``incarnation`` (its record says whether it drifted)."""
    return DRIFTED_CATALOGUE_FILE if incarnation.catalogue_drift else CATALOGUE_FILE


def torn_journal_name(kill_number: int) -> str:
    """The journal as the nemesis tore it at kill ``kill_number``: what the next incarnation found."""
    return f"journal-at-kill-{kill_number}.torn.jsonl"


def store_at_kill_name(kill_number: int) -> str:
    """The folder holding the copy of a runtime's own store made at kill ``kill_number``."""
    return f"{STORE_AT_KILL_PREFIX}{kill_number}"


def store_found_name(kill_number: int) -> str:
    """The store as the next incarnation found it, where kill ``kill_number``'s fault changed it after the kill:
    a torn tail cut a file of it, or a power loss dropped what was never durable."""
    return f"{store_at_kill_name(kill_number)}.found"


def refusal_path(copy: Path) -> Path:
    """Where the reasons a store copy was refused are kept, in place of the copy (``nemesis.copy_store``)."""
    return copy.with_name(f"{copy.name}.refused")
