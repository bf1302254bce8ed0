"""A tool's version, as a digest a certificate pins: source for Python tools, script bytes for commands.

Why not a version string: tools rarely bump one when their behaviour changes,
and a certificate must go stale the moment the code it judged changes.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def source_digest(*functions: Callable[..., Any], extra: Any = None) -> str:
    """sha256 of the functions' source, of the functions they close over or call in their own module, and of ``extra``.

    The closures matter: a fake tool's ``act`` is often a generic wrapper whose
    logic lives in the function it closes over.
    """
    texts: list[str] = []
    seen: set[int] = set()

    def names_of(code: Any) -> Iterator[str]:
        yield from code.co_names
        for constant in code.co_consts:
            if inspect.iscode(constant):
                yield from names_of(constant)

    def visit(function: Any) -> None:
        if not inspect.isfunction(function) or id(function) in seen:
            return
        seen.add(id(function))
        try:
            texts.append(inspect.getsource(function))
        except (OSError, TypeError):
            texts.append(function.__qualname__)
        for cell in function.__closure__ or ():
            try:
                contents = cell.cell_contents
            except ValueError:
                continue
            if inspect.isfunction(contents):
                visit(contents)
            else:
                texts.append(json.dumps(contents, sort_keys=True, default=lambda _: None))
        for name in names_of(function.__code__):
            value = function.__globals__.get(name)
            if inspect.isfunction(value) and value.__module__ == function.__module__:
                visit(value)

    for function in functions:
        visit(function)
    texts.append(json.dumps(extra, sort_keys=True, default=str))
    return "sha256:" + hashlib.sha256("\n".join(texts).encode()).hexdigest()


def command_identity(argv: list[str], snapshot_argv: list[str] | None) -> dict[str, str]:
    """sha256 of the command lines and of the files they name (the script); with none, of ``ARGV0 --version``."""
    words = [*argv, *(snapshot_argv or [])]
    digest = hashlib.sha256(json.dumps(words).encode())
    files = [word for word in words if os.path.isabs(word) and os.path.isfile(word)]
    for name in files:
        digest.update(name.encode() + b"\0" + Path(name).read_bytes())
    if files:
        return {"kind": "script sha256", "digest": "sha256:" + digest.hexdigest(), "files": " ".join(files)}
    try:
        version = subprocess.run([argv[0], "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    digest.update(version.encode())
    return {"kind": f"command line and {argv[0]} --version", "digest": "sha256:" + digest.hexdigest()}
