"""What a SIGKILLed harness leaves behind, and how ``killpoint clean`` tells it from a live session's.

A harness killed by SIGKILL removes nothing: its scratch and control folders,
the temporary folders of ``certify`` (``killpoint-certify-``, ``killpoint-mcp-``)
and of the SQLite store reader (``killpoint-store-``), its incarnation cgroups
(``backends/_cgroup.py``). Each is named after its owner, the harness process
that made it: ``PREFIX<pid>.<start in clock ticks>-...`` (``owner_prefix``),
the identity ``_process_tree.process_identity`` gives, so a pid reused by
another process does not pass for the owner. A folder is abandoned once that
process is gone; one named with a pid alone (a control folder) once no process
has that pid, which errs toward keeping. A temporary folder that names no owner
(made by a killpoint from before owners were named) is removed only once it has
not changed for ``UNOWNED_AFTER_S``: no session keeps a folder untouched that
long (an incarnation may take a day at most), and a live one's is never taken.
"""

from __future__ import annotations

import os
import stat
import tempfile
import time
from pathlib import Path

from killpoint.harness._safe_files import remove_tree
from killpoint.harness.execute import _process_tree

# The temporary folders of certify and of the store reader; a hunt's (killpoint-hunt-) holds the evidence it
# printed, which is never removed. Longest first: "killpoint-mcp-list-x" is mcp-list's, not mcp's.
TEMP_PREFIXES = ("killpoint-mcp-list-", "killpoint-certify-", "killpoint-store-", "killpoint-mcp-")
UNOWNED_AFTER_S = 7 * 86_400


def owner_prefix(prefix: str) -> str:
    """``prefix`` followed by this process's identity and a dash: what ``mkdtemp`` names an owned folder with."""
    return f"{prefix}{_process_tree.own_identity().replace(':', '.')}-"


def owner_gone(owner: str) -> bool:
    """Whether the harness process ``PID.TICKS`` (or ``PID``) names is gone; False for what names no process."""
    pid, dot, ticks = owner.partition(".")
    if not pid.isdigit() or (dot and not ticks.isdigit()):
        return False
    if dot:
        return not _process_tree.identity_running(f"{pid}:{ticks}")
    return _process_tree.process_gone(int(pid))


def abandoned_folders(root: Path, prefix: str) -> list[Path]:
    """The folders ``root/<prefix><owner>-...`` of a harness process now gone (``owner_gone``): real folders
    (never a symlink) of this user's."""
    found = []
    for path in sorted(root.glob(f"{prefix}*-*")):
        if _is_own_folder(path) and owner_gone(path.name.removeprefix(prefix).partition("-")[0]):
            found.append(path)
    return found


def _is_own_folder(path: Path) -> bool:
    try:
        status = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(status.st_mode) and status.st_uid == os.getuid()


def temp_roots() -> list[Path]:
    """Where temporary folders are made: the temporary folder (``TMPDIR``), and /tmp if that is another."""
    return list(dict.fromkeys((Path(tempfile.gettempdir()), Path("/tmp"))))


def abandoned_temp_folders(root: Path, now: float | None = None) -> list[Path]:
    """The temporary folders under ``root`` (``TEMP_PREFIXES``) whose owner is gone, or which name none and have
    not changed for ``UNOWNED_AFTER_S``."""
    now = time.time() if now is None else now
    found = []
    for path in sorted(root.glob("killpoint-*")):
        prefix = next((prefix for prefix in TEMP_PREFIXES if path.name.startswith(prefix)), None)
        if prefix is None or not _is_own_folder(path):
            continue
        owner = path.name.removeprefix(prefix).partition("-")[0]
        pid, dot, ticks = owner.partition(".")
        if dot and pid.isdigit() and ticks.isdigit():  # mkdtemp's own letters hold no dot: the owner is named
            gone = owner_gone(owner)
        else:
            gone = now - path.lstat().st_mtime > UNOWNED_AFTER_S
        if gone:
            found.append(path)
    return found


def sweep_temp_folders() -> list[Path]:
    """Remove the abandoned temporary folders (``abandoned_temp_folders``) of every temporary root; return them."""
    return remove_folders([path for root in temp_roots() for path in abandoned_temp_folders(root)])


def remove_folders(paths: list[Path]) -> list[Path]:
    """Remove each folder, following no link; return those removed (one that could not be emptied stays, for
    the next sweep)."""
    removed = []
    for path in paths:
        try:
            remove_tree(path)
        except OSError:
            continue
        removed.append(path)
    return removed
