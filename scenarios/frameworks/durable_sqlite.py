"""Run a DBOS workload with its SQLite system database set as SQLite's docs say a commit is durable.

DBOS opens its SQLite system database through SQLAlchemy and sets only
``busy_timeout`` and ``foreign_keys``: the database keeps SQLite's defaults,
the rollback journal (``journal_mode = DELETE``) with ``synchronous = FULL``,
where a commit is the journal's unlink and that unlink is never fsynced into
its folder, so a power loss right after a commit can bring the journal back
hot and roll the commit back (https://sqlite.org/pragma.html#pragma_synchronous:
EXTRA "provides additional durability if the commit is followed closely by a
power loss"). A user changes that the way SQLAlchemy documents for SQLite
PRAGMAs, a ``connect`` listener on every engine, before DBOS opens its own;
this module is that listener in front of an unchanged workload::

    {python} -m killpoint.scenarios.frameworks.durable_sqlite --synchronous extra \\
        killpoint.scenarios.frameworks.dbos_workflow --guarded

``--journal-mode wal`` is SQLite's other durable choice (the WAL fsynced at
every commit under ``synchronous = FULL``).
"""

from __future__ import annotations

import argparse
import runpy
import sys
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="a workload whose SQLAlchemy SQLite connections get durable PRAGMAs")
    parser.add_argument("--synchronous", choices=["normal", "full", "extra"], default="extra")
    parser.add_argument("--journal-mode", choices=["delete", "wal"], default=None,
                        help="default: the database's own (DELETE for a new one)")
    parser.add_argument("module", help="the workload module to run as __main__")
    parser.add_argument("workload_args", nargs=argparse.REMAINDER, help="its own arguments")
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    arguments = parse_arguments(argv)
    pragmas = [f"PRAGMA synchronous = {arguments.synchronous}"]
    if arguments.journal_mode:
        pragmas.insert(0, f"PRAGMA journal_mode = {arguments.journal_mode}")

    @event.listens_for(Engine, "connect")
    def set_durability(dbapi_connection: Any, _record: Any) -> None:
        for pragma in pragmas:
            dbapi_connection.execute(pragma)

    sys.argv = [arguments.module, *arguments.workload_args]
    runpy.run_module(arguments.module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
