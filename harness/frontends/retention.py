"""Pruning old sessions from a killpoint-runs folder, and nothing else.

Evidence is never overwritten, so a folder of sessions only grows; ``prune``
removes whole session directories by age and count. It deletes only what it
recognises as a session (a real directory holding the golden run's
``golden/plan.json``), never follows a symbolic link, and leaves every other
entry of the folder alone.
"""

from __future__ import annotations

import stat
import time
from collections.abc import Callable
from pathlib import Path

from killpoint.errors import ConfigError
from killpoint.harness._safe_files import remove_tree
from killpoint.harness.layout import RunPaths

SECONDS_PER_DAY = 86400.0


def is_session_dir(path: Path) -> bool:
    """A real directory (not a link) whose ``golden/`` is a real directory laid out by a golden run."""
    golden = path / "golden"
    return (_is_real(path, stat.S_ISDIR) and _is_real(golden, stat.S_ISDIR)
            and _is_real(RunPaths(golden).plan, stat.S_ISREG))


def _is_real(path: Path, is_kind: Callable[[int], bool]) -> bool:
    """``path`` itself, not what a link there points to, is of the kind (``stat.S_ISDIR``, ``stat.S_ISREG``)."""
    try:
        return is_kind(path.lstat().st_mode)
    except OSError:
        return False


def prune(root: Path, *, keep: int | None, older_than_days: float | None) -> list[Path]:
    """Remove session directories under ``root``; return those removed, oldest first.

    Kept: the newest ``keep`` sessions (by the time their directory last
    changed, i.e. their last run) and those younger than ``older_than_days``.
    With both given a session goes only when it is neither; give at least one.
    """
    problems = [f"{name} {value!r}: give a number >= 0" for name, value in
                (("keep", keep), ("older_than_days", older_than_days)) if value is not None and value < 0]
    if keep is None and older_than_days is None:
        problems.append("give keep (how many of the newest sessions stay) or older_than_days (the age that goes)")
    if not root.is_dir():
        problems.append(f"{root}: not a folder of killpoint sessions (no such directory)")
    if problems:
        raise ConfigError(f"cannot prune {root}", tuple(problems))
    sessions = sorted((entry for entry in root.iterdir() if is_session_dir(entry)),
                      key=lambda entry: (entry.lstat().st_mtime, entry.name), reverse=True)
    now = time.time()
    doomed = [session for rank, session in enumerate(sessions)
              if (keep is None or rank >= keep) and (
                  older_than_days is None or now - session.lstat().st_mtime > older_than_days * SECONDS_PER_DAY)]
    for session in reversed(doomed):
        remove_tree(session)
    return doomed[::-1]
