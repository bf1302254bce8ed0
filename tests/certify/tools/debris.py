"""Python tools that leave something behind when killed part-way (issue 28: debris is not a repeated effect).

Each acts on a copy of ``tests/certify/tools/world`` and declares its schema as ``schema``
(``killpoint certify --python tests.certify.tools.debris:FUNCTION``); each is truly claimed IDEMPOTENT_WRITE
or lies about it:

- ``random_temp_write`` writes PATH through ``PATH.<hex>.tmp`` and a rename: a kill before the rename
  leaves the temporary file, the replay writes another and leaves the first. Debris, not a repeated
  effect: CONFIRMED, the debris reported apart.
- ``random_temp_append`` appends through a temporary file and a rename: a replay appends again (REFUTED).
- ``locked_write`` takes ``PATH.lock`` with ``O_EXCL``, writes PATH and removes the lock: a kill that
  leaves the lock makes every later call fail, the replay too (REFUTED, even where PATH was written).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

NEW_FILES = {"type": "string", "enum": ["draft.txt", "notes.txt"]}
CONTENT = {"type": "string", "maxLength": 40}
SCHEMA = {"type": "object", "properties": {"path": NEW_FILES, "content": CONTENT}, "required": ["content", "path"],
          "additionalProperties": False}


def _replace_whole(target: Path, content: str) -> None:
    temporary = target.with_name(f"{target.name}.{secrets.token_hex(8)}.tmp")
    with open(temporary, "w") as stream:
        stream.write(content)
    os.replace(temporary, target)


def random_temp_write(world: Path, args: dict[str, Any]) -> None:
    _replace_whole(world / args["path"], args["content"])


def random_temp_append(world: Path, args: dict[str, Any]) -> None:
    target = world / args["path"]
    _replace_whole(target, (target.read_text() if target.exists() else "") + args["content"] + "\n")


def locked_write(world: Path, args: dict[str, Any]) -> None:
    target = world / args["path"]
    lock = target.with_name(target.name + ".lock")
    os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))  # FileExistsError: another writer's lock
    with open(target, "w") as stream:
        stream.write(args["content"])
    os.unlink(lock)


random_temp_write.schema = SCHEMA  # type: ignore[attr-defined]
random_temp_append.schema = SCHEMA  # type: ignore[attr-defined]
locked_write.schema = SCHEMA  # type: ignore[attr-defined]
