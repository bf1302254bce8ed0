"""Mutant runtimes: each is a correct runtime with exactly one realistic bug.

Most are the reference runtime with one method overridden, a module of this
package each. The module says, in its docstring, what the bug is and, in
constants, how it is caught: ``CAUGHT_BY`` the property the checker must name,
``CAUGHT_WITH`` the cheapest ``killpoint run`` flags that catch it (default
``--exhaustive``), and ``SCENARIO`` the scenario it is run on (default
``demo``). Run one with ``python -m killpoint.scenarios.mutants.NAME`` under
killpoint. The others (``FLAGGED``) are runtimes of their own, written apart
from killpoint's code, run with one ``--bug`` flag; ``Mutant.workload`` is the
command of either kind.
"""

from __future__ import annotations

import importlib
import pkgutil
import shlex
from dataclasses import dataclass
from pathlib import Path

SCENARIOS = Path(__file__).resolve().parent.parent
POWER_LOSS = ("--exhaustive", "--power-loss")  # every kill a power loss: what was never made durable is lost


@dataclass(frozen=True)
class Mutant:
    name: str
    bug: str
    caught_by: str
    caught_with: tuple[str, ...]
    scenario: str  # the scenario file's path under scenarios/, without .toml
    workload: str  # the command, runnable from any folder


def _script(*parts: str) -> str:
    return shlex.quote(str(SCENARIOS.joinpath(*parts)))


FLAGGED = (
    Mutant("standalone_never_fsyncs",
           "Bug: the standalone runtime (protocol only, no killpoint code) never fsyncs its journal or its folder. "
           "Right under every kill, since the page cache outlives the process; at a power loss the journal is "
           "gone whole while the tools' effects stand.",
           "write-ahead", POWER_LOSS, "demo", f"{{python}} {_script('standalone', 'runtime.py')} --bug no-fsync"),
    Mutant("foreign_rename_no_dir_fsync",
           "Bug: the Node.js agent rewrites its task file by temp file, fsync and rename but never fsyncs the "
           "folder after the rename, so at a power loss every rename is undone and its store is gone.",
           "write-ahead", POWER_LOSS, "foreign/short",
           f"node {_script('foreign', 'agent.js')} --bug rename-no-dir-fsync"),
    Mutant("foreign_rename_no_file_fsync",
           "Bug: the Node.js agent renames its temp file over the task file without fsyncing the temp file first, "
           "so at a power loss the rename stands but over bytes never written: an empty task file.",
           # Killed after the tap's effect: at an earlier kill the empty store is unreadable, so nothing is judged.
           "world-equals-golden", ("--kill-at", "c2:after_effect", "--power-loss"), "foreign/short",
           f"node {_script('foreign', 'agent.js')} --bug rename-no-file-fsync"),
    Mutant("sqlite_synchronous_off",
           "Bug: the SQLite-journal runtime runs with PRAGMA synchronous = OFF (\"SQLite is fast that way\"), in "
           "SQLite's default rollback-journal mode: no commit is ever fsynced, nor the database's name, so at a "
           "power loss the database is gone with every call it recorded.",
           "write-ahead", POWER_LOSS, "sqlite_journal/short",
           "{python} -m killpoint.scenarios.sqlite_journal.runtime --journal-mode delete --synchronous off"),
)


def zoo() -> list[Mutant]:
    """Every mutant, by name: this package's modules and ``FLAGGED``."""
    mutants = list(FLAGGED)
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        mutants.append(Mutant(info.name, " ".join((module.__doc__ or "").split()), module.CAUGHT_BY,
                              getattr(module, "CAUGHT_WITH", ("--exhaustive",)), getattr(module, "SCENARIO", "demo"),
                              f"{{python}} -m {module.__name__}"))
    return sorted(mutants, key=lambda mutant: mutant.name)
