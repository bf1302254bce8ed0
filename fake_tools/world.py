"""The fake world: a sandboxed directory of plain, diffable files.

``files/`` is the device's file system as the agent sees it; ``state/AREA.json``
holds the state of each simulated service (screen, alarms, shell history, ...).
Every path a tool is given resolves inside ``files/``; anything that would leave
it (``..``, an absolute path, a symlink pointing out) is refused.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
from pathlib import Path, PurePosixPath
from typing import Any


class SandboxError(ValueError):
    """A path argument would leave the world's sandbox."""


class World:
    """One fake world rooted at ``root``; cheap to create, holds no open files."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.files_root = self.root / "files"
        self.state_root = self.root / "state"

    def __repr__(self) -> str:
        return f"World({str(self.root)!r})"

    def path(self, relative: str) -> Path:
        """The real path of ``relative`` inside ``files/``, refusing every way out."""
        if not isinstance(relative, str) or not relative.strip():
            raise SandboxError("a path must be a non-empty string")
        if "\x00" in relative:
            raise SandboxError(f"path {relative!r} refused: it contains a NUL byte")
        pure = PurePosixPath(relative)
        if pure.is_absolute():
            raise SandboxError(f"absolute path {relative!r} refused: paths are relative to the world")
        if ".." in pure.parts:
            raise SandboxError(f"path {relative!r} refused: '..' would leave the world")
        candidate = self.files_root.joinpath(*pure.parts)
        resolved = candidate.resolve()
        base = self.files_root.resolve()
        if resolved != base and base not in resolved.parents:
            raise SandboxError(f"path {relative!r} refused: a symlink leads out of the world")
        return candidate

    def describe(self, refusal: BaseException) -> str:
        """A refusal as the agent sees it: an OS error names the world-relative path, never the host's.

        The message may be logged into the world; an absolute path there would
        differ between every run directory and the crash-free run's.
        """
        if isinstance(refusal, OSError) and refusal.filename is not None:
            return f"{refusal.strerror}: {self.relative(refusal.filename)!r}"
        return str(refusal)

    def relative(self, path: str | os.PathLike[str]) -> str:
        """``path`` relative to ``files/`` when inside it, else relative to the world root, else its name."""
        path = Path(path)
        for base in (self.files_root, self.root):
            if path.is_relative_to(base):
                return path.relative_to(base).as_posix()
        return path.name

    def load(self, area: str, default: Any) -> Any:
        """The state of one simulated service, or ``default`` if it was never written."""
        try:
            return json.loads((self.state_root / f"{area}.json").read_text())
        except FileNotFoundError:
            return copy.deepcopy(default)  # never hand out a module's constant to be mutated

    def save(self, area: str, value: Any) -> None:
        """Replace a service's state atomically (temp file, rename): a kill leaves old or new."""
        self.state_root.mkdir(parents=True, exist_ok=True)
        write_atomically(self.state_root / f"{area}.json", json.dumps(value, indent=1, sort_keys=True) + "\n")

    def snapshot(self) -> dict[str, str]:
        """Canonical content of the world: relative path -> text (or a digest for binary)."""
        entries: dict[str, str] = {}
        if not self.root.exists():
            return entries
        for path in sorted(self.root.rglob("*")):
            relative = path.relative_to(self.root).as_posix()
            if path.is_symlink():
                entries[relative] = f"symlink -> {os.readlink(path)}"
            elif path.is_dir():
                entries[relative + "/"] = ""
            else:
                data = path.read_bytes()
                try:
                    entries[relative] = data.decode()
                except UnicodeDecodeError:
                    entries[relative] = "sha256:" + hashlib.sha256(data).hexdigest()
        return entries


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def seed_world(root: Path, files: dict[str, str], state: dict[str, Any]) -> World:
    """Create a world holding the given files and service states."""
    world = World(root)
    world.files_root.mkdir(parents=True, exist_ok=True)
    world.state_root.mkdir(parents=True, exist_ok=True)
    for relative, text in files.items():
        target = world.path(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    for area, value in state.items():
        world.save(area, value)
    return world


def diff_snapshots(expected: dict[str, str], actual: dict[str, str], *, limit: int = 40) -> list[str]:
    """A readable unified diff of two snapshots, at most ``limit`` lines."""
    lines: list[str] = []
    for relative in sorted(set(expected) | set(actual)):
        if relative not in actual:
            lines.append(f"missing {relative}")
        elif relative not in expected:
            lines.append(f"extra   {relative}")
        elif expected[relative] != actual[relative]:
            lines.append(f"changed {relative}:")
            lines.extend(
                "    " + line
                for line in difflib.unified_diff(
                    expected[relative].splitlines(), actual[relative].splitlines(),
                    "expected", "actual", lineterm="", n=1,
                )
            )
    return lines[:limit] + ([f"... {len(lines) - limit} more lines"] if len(lines) > limit else [])
