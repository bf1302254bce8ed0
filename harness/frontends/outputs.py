"""Where a command will write, checked before it runs: a folder that cannot be made or written in, or a file
whose place is a folder, is bad input (exit 2) naming the flag — found before the work, not after it with a
traceback. ``run``, ``merge``, ``repro``, ``hunt`` and ``certify`` share it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from killpoint.errors import ConfigError


def check_outputs(*, folders: Sequence[tuple[str, Path | None]] = (),
                  files: Sequence[tuple[str, Path | None, str]] = (), makes_folders: bool = False) -> None:
    """Every place a command will write is usable, before it runs (not after it, with a traceback).

    ``folders``: (flag, folder) made if missing, its nearest existing part a writable folder. ``files``: (flag,
    file, a name to suggest if a folder is given), in a writable folder that exists, or that the command makes
    (``makes_folders``). A path of None is a flag left out.
    """
    problems = [problem for flag, path in folders if path is not None
                if (problem := _folder_problem(f"{flag} {path}", path)) is not None]
    problems += [problem for flag, path, example in files if path is not None
                 if (problem := _file_problem(flag, path, example, makes_folders=makes_folders)) is not None]
    if problems:
        raise ConfigError(f"{len(problems)} output(s) cannot be written; nothing was run", tuple(problems))


def _folder_problem(given: str, folder: Path) -> str | None:
    """Why ``folder`` (of the flag and value ``given``) cannot be made or written in: the nearest of it and its
    parents that is there (a symlink leading nowhere counts: mkdir fails on it) is no folder, or not writable."""
    existing = next((path for path in (folder, *folder.parents) if os.path.lexists(path)), None)
    if existing is not None and not existing.is_dir():
        return f"{given}: {existing} is a file, not a folder; give a path through folders (made if missing)"
    if existing is not None and not os.access(existing, os.W_OK):
        return f"{given}: {existing} is not writable; give a folder you can write"
    return None


def _file_problem(flag: str, path: Path, example: str, *, makes_folders: bool) -> str | None:
    if path.is_dir():
        return f"{flag} {path}: is a folder; give the file to write, e.g. {path / example}"
    if makes_folders:
        return _folder_problem(f"{flag} {path}", path.parent)
    if not path.parent.is_dir():
        return f"{flag} {path}: the folder {path.parent} does not exist; create it or write elsewhere"
    if not os.access(path.parent, os.W_OK):
        return f"{flag} {path}: the folder {path.parent} is not writable"
    return None
