"""An agent runtime that keeps each call's state in a SQLite table, as real agent runtimes do.

It recovers by the reference runtime's rules (it is the reference runtime with
another durable store), but writes no ``journal.jsonl``: one row per operation
of the table ``calls`` in ``$KILLPOINT_RUN_DIR/agent.db``, inserted ``running``
before its tool is called and updated in place to ``succeeded`` or ``failed``
once it returned, each change its own committed transaction. killpoint judges
it black-box, through the scenario's ``[journal] format = "sqlite"`` mapping.

How durable a commit is, is SQLite's to say (https://sqlite.org/pragma.html#pragma_synchronous):

* ``--journal-mode wal --synchronous full`` (the default): the WAL is fsynced at
  every commit, its creation with its folder: durable across a power loss.
* ``--journal-mode delete --synchronous extra``: durable too. With ``full``,
  the rollback journal's unlink, which is the commit, is not fsynced into its
  folder, so a power loss right after a commit brings the journal back hot and
  the commit is rolled back; EXTRA exists for exactly that.
* ``--synchronous normal`` with WAL: consistent but not durable, for the WAL is
  fsynced only at checkpoints, so the last commits are lost at a power loss.
* ``--synchronous off``: nothing is ever fsynced. The mutant: it passes every
  kill, for the page cache outlives a killed process, and loses its table when
  the power fails (``killpoint run --power-loss``).

Run it under killpoint: ``{python} -m killpoint.scenarios.sqlite_journal.runtime [--synchronous S]
[--journal-mode M]`` (``scenarios/sqlite_journal/*.toml``).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from killpoint import protocol as p
from killpoint.client import WorkloadEnv
from killpoint.scenarios.reference_runtime import Journal, ReferenceRuntime

DATABASE_NAME = "agent.db"
SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    seq INTEGER PRIMARY KEY,
    op_id TEXT NOT NULL UNIQUE,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    tool_class TEXT NOT NULL,
    interactive INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    state TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS task (status TEXT NOT NULL);
"""
STATE_OF = {p.RUNNING: "running", p.SUCCEEDED: "succeeded", p.FAILED: "failed"}  # what the table says
STATUS_OF = {state: status for status, state in STATE_OF.items()}


@dataclass(frozen=True)
class Durability:
    """The two PRAGMAs that decide what a commit survives."""

    synchronous: str = "full"
    journal_mode: str = "wal"


class SqliteJournal:
    """The ``calls`` table, fed the reference runtime's journal records and read back as them.

    Only state is kept: a ``started`` record inserts its op's row (or sets a
    retried one back to ``running``), a ``finished`` one updates it, ``task
    COMPLETED`` is a row of ``task``; decision and verified records, which
    only killpoint's own journal format carries, leave no row.
    """

    def __init__(self, path: Path, durability: Durability) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)  # autocommit: every statement one transaction
        self.db.execute(f"PRAGMA journal_mode = {durability.journal_mode}")
        self.db.execute(f"PRAGMA synchronous = {durability.synchronous}")
        self.db.executescript(SCHEMA)

    def records(self) -> Iterator[dict[str, Any]]:
        """The journal records the rows stand for, in the order the ops began."""
        rows = self.db.execute("SELECT op_id, call_id, tool, tool_class, interactive, attempt, state "
                               "FROM calls ORDER BY seq")
        for op, call, tool, tool_class, interactive, attempt, state in rows:
            yield {"kind": p.STARTED, "op": op, "call": call, "tool": tool, "class": tool_class,
                   "interactive": bool(interactive), "attempt": attempt}
            if state != STATE_OF[p.RUNNING]:
                yield {"kind": p.FINISHED, "op": op, "status": STATUS_OF[state]}
        if self.db.execute("SELECT 1 FROM task WHERE status = ?", (p.COMPLETED,)).fetchone():
            yield {"kind": p.TASK, "status": p.COMPLETED}

    def append(self, record: dict[str, Any]) -> None:
        kind = record["kind"]
        if kind == p.STARTED:
            self.db.execute(
                "INSERT INTO calls (op_id, call_id, tool, tool_class, interactive, attempt, state) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (op_id) DO UPDATE SET attempt = excluded.attempt, state = excluded.state",
                (record["op"], record["call"], record["tool"], record["class"], record["interactive"],
                 record["attempt"], STATE_OF[p.RUNNING]))
        elif kind == p.FINISHED:
            self.db.execute("UPDATE calls SET state = ? WHERE op_id = ?", (STATE_OF[record["status"]], record["op"]))
        elif kind == p.TASK:
            self.db.execute("INSERT INTO task (status) VALUES (?)", (record["status"],))


class SqliteJournalRuntime(ReferenceRuntime):
    def __init__(self, env: WorkloadEnv, durability: Durability) -> None:
        self.durability = durability
        super().__init__(env)

    def open_journal(self) -> Journal:
        journal = SqliteJournal(self.env.run_dir / DATABASE_NAME, self.durability)
        for record in journal.records():
            self.fold(record)
        return journal


def parse_arguments(argv: list[str]) -> Durability:
    parser = argparse.ArgumentParser(description="An agent runtime journaling each call in a SQLite table.")
    parser.add_argument("--synchronous", choices=["off", "normal", "full", "extra"], default=Durability.synchronous)
    parser.add_argument("--journal-mode", choices=["delete", "wal"], default=Durability.journal_mode)
    arguments = parser.parse_args(argv)
    return Durability(arguments.synchronous, arguments.journal_mode)


def main(argv: list[str]) -> int:
    return SqliteJournalRuntime(WorkloadEnv.from_environ(), parse_arguments(argv)).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
