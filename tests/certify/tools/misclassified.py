"""Python tools outside the project, each with a class it does not deserve (and one that deserves its class).

Each acts on a plain world directory (a copy of ``tests/certify/tools/world``)
and declares its argument schema as a ``schema`` attribute, which
``killpoint certify --python MODULE:FUNCTION`` reads.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

NEW_FILES = {"type": "string", "enum": ["draft.txt", "final.txt"]}
CONTENT = {"type": "string", "maxLength": 40}


def _schema(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": sorted(properties), "additionalProperties": False}


def stamped_write(world: Path, args: dict[str, Any]) -> None:
    """A "write" that stamps the time it saved: claimed IDEMPOTENT_WRITE, but every replay writes a new time."""
    (world / args["path"]).write_text(f"{args['content']}\nsaved at {time.time_ns()}\n")


def counted_read(world: Path, args: dict[str, Any]) -> str:
    """A read that bumps an access counter: claimed READ_ONLY, but every call leaves the counter higher."""
    counter = world / ".access-count"
    count = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(f"{count + 1}\n")
    note = world / args["path"]
    return note.read_text() if note.exists() else ""


def torn_write(world: Path, args: dict[str, Any]) -> None:
    """Writes a file in two halves, and skips the write when the file is already there.

    Idempotent whenever it completes (a second call finds the file and does
    nothing), but a kill between the halves leaves half a file, which a replay
    takes for done: only a trial that kills it part-way can tell.
    """
    target = world / args["path"]
    if target.exists():
        return
    content = args["content"]
    with open(target, "w") as stream:
        stream.write(content[: len(content) // 2])
        stream.flush()
        stream.write(content[len(content) // 2:])


def atomic_write(world: Path, args: dict[str, Any]) -> None:
    """A true IDEMPOTENT_WRITE: the whole file, through a temporary file and a rename."""
    temporary = world / f".{args['path']}.tmp"
    temporary.write_text(args["content"])
    os.replace(temporary, world / args["path"])


def by_name(world: Path, args: dict[str, Any], *, tool: str) -> None:
    """One function serving a whole catalogue: ``certify --catalogue FILE --python ...:by_name`` passes ``tool``."""
    globals()[tool](world, args)


def note_lines(world: Path) -> dict[str, str]:
    """A snapshot function: the world's text files, path -> text (the counter file included)."""
    return {path.name: path.read_text() for path in sorted(world.iterdir()) if path.is_file()}


stamped_write.schema = _schema(path=NEW_FILES, content=CONTENT)  # type: ignore[attr-defined]
counted_read.schema = _schema(path={"type": "string", "enum": ["notes.txt", "missing.txt"]})  # type: ignore[attr-defined]
torn_write.schema = _schema(path=NEW_FILES, content=CONTENT)  # type: ignore[attr-defined]
atomic_write.schema = _schema(path=NEW_FILES, content=CONTENT)  # type: ignore[attr-defined]
by_name.schema = _schema(path=NEW_FILES, content=CONTENT)  # type: ignore[attr-defined]
