"""``npx [-y] PACKAGE ARGS...`` resolved once per certify session, not at every server start.

``killpoint certify --mcp 'npx -y PACKAGE {world}'`` starts a server per
trial (and one more after each kill). Started as written, each start is
``npx`` resolving PACKAGE again: npm reads its configuration, asks the
registry for the package's metadata, checks its cache, then runs the bin
through ``sh -c``. And the server's ``HOME`` is a fresh scratch folder (the
sandbox), so npm's cache there is empty: every start downloads and installs
the package again (tens of MB for the filesystem server, 7 to 10 s a start on
a quiet machine, much more under load).

So the first start runs npx once, in the user's own environment (their
``HOME``, npm cache and ``.npmrc``), to install PACKAGE as that start would
and print the ``PATH`` it gives the command; the bin npx would run is found
there as npm finds it (``libnpmexec``'s rule: the package's only bin, or the
one named like the package), and every start runs that file directly, with
npx's ``PATH`` entries in front of the server's own. What npx would run is
what runs: the same file, from the same install.

Only the plain forms are resolved: ``npx [-y|--yes|-q|--quiet]...
[-p|--package SPEC]... [--] COMMAND ARGS...``, with no ``{world}`` before
ARGS. Anything else (another flag, a spec that is a path, URL or git
remote), and any failure to resolve, leaves the command as written: the
server then starts through npx each time, as before, and a note on stderr
says why. ``KILLPOINT_NPX_RESOLVE=0`` turns resolution off (the bench's
baseline).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SWITCH = "KILLPOINT_NPX_RESOLVE"  # "0": start the server through npx each time, as written
RESOLVE_TIMEOUT_S = 300.0  # a first install of a large package on a slow network
_FLAGS = {"-y", "--yes", "-q", "--quiet"}
# a registry spec: NAME or @SCOPE/NAME, with an optional @VERSION/@TAG/@RANGE (not a path, URL or git remote)
_SPEC = re.compile(r"((?:@[a-z0-9][\w.~-]*/)?[a-z0-9_][\w.~-]*)(?:@[^\s/:]*)?", re.IGNORECASE)


@dataclass(frozen=True)
class Form:
    """An ``npx`` command split: its flags and packages (the part resolved once), the bin if named, the rest."""

    head: tuple[str, ...]       # npx and its words up to the command: what is resolved, once
    packages: tuple[str, ...]   # --package specs, else the command itself as the one package
    command: str | None         # the bin when --package names the package, else None (npm picks the bin)
    rest: tuple[str, ...]       # the server's arguments, {world} among them


@dataclass(frozen=True)
class Resolved:
    executable: str              # absolute path of what npx would run
    path_prefix: tuple[str, ...]  # the PATH entries npx puts before the caller's
    seconds: float


def form(argv: list[str]) -> Form | None:
    """``argv`` split as an npx command of a plain form, else None (it is then started as written)."""
    if not argv or Path(argv[0]).name != "npx":
        return None
    flags: list[str] = []
    packages: list[str] = []
    i = 1
    while i < len(argv):
        word = argv[i]
        if word in _FLAGS:
            flags.append(word)
            i += 1
        elif word in ("-p", "--package") and i + 1 < len(argv):
            packages.append(argv[i + 1])
            i += 2
        elif word.startswith("--package="):
            packages.append(word.partition("=")[2])
            i += 1
        elif word == "--":
            i += 1
            break
        elif word.startswith("-"):
            return None  # a flag not known here: npx may mean something else by the command
        else:
            break
    if i >= len(argv):
        return None
    command = argv[i]
    head = tuple(argv[:i + 1])
    if any("{" in word for word in head):  # a template word: it may differ between worlds
        return None
    if packages:
        if "/" in command or not command:
            return None
        return Form(head, tuple(packages), command, tuple(argv[i + 1:]))
    if not _SPEC.fullmatch(command):
        return None
    return Form(head, (command,), None, tuple(argv[i + 1:]))


def bin_of(manifest: dict[str, object]) -> str | None:
    """The bin npx runs for a package: its only one (or every name aliasing one file), else the one named like it."""
    name = str(manifest.get("name") or "")
    unscoped = re.sub(r"^@[^/]+/", "", name)
    bins = manifest.get("bin")
    if isinstance(bins, str):
        return unscoped or None
    if not isinstance(bins, dict) or not bins:
        return None
    if len(set(bins.values())) == 1:
        return str(next(iter(bins)))
    return unscoped if unscoped in bins else None


_LOCK = threading.Lock()
_DONE: dict[tuple[str, ...], Resolved | str] = {}


def started(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The argv and env to start: an npx command's bin, resolved once per session, or ``argv``/``env`` unchanged."""
    if os.environ.get(SWITCH, "1") == "0":
        return argv, env
    split = form(argv)
    if split is None:
        return argv, env
    with _LOCK:
        if split.head not in _DONE:
            try:
                outcome: Resolved | str = resolve(split, cwd)
            except Exception as error:  # noqa: BLE001 - resolution must never break a user's command
                outcome = f"{type(error).__name__}: {error}"
            _DONE[split.head] = outcome
            _say(split, outcome)
        outcome = _DONE[split.head]
    if isinstance(outcome, str):
        return argv, env
    path = os.pathsep.join((*outcome.path_prefix, env.get("PATH", "")))
    return [outcome.executable, *split.rest], {**env, "PATH": path}


def resolve(split: Form, cwd: Path, timeout_s: float = RESOLVE_TIMEOUT_S) -> Resolved | str:
    """Run npx once to install the package(s) and print its PATH; what it would run there, or why not."""
    began = time.monotonic()
    npx = split.head[0]
    flags = [word for word in split.head[1:-1] if word in _FLAGS]
    argv = [npx, *flags, *(f"--package={spec}" for spec in split.packages), "-c", 'printf "%s\\n" "$PATH"']
    env = {**os.environ, "npm_config_update_notifier": "false"}
    caller_path = env.get("PATH", "")
    try:
        process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, start_new_session=True)
    except OSError as error:
        return f"cannot run {npx!r}: {error.strerror or error}"
    try:
        out, err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:  # a child that left npx's group may hold its pipes open: never wait on it for long
            process.communicate(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
        return f"npx did not finish within {timeout_s:g}s"
    if process.returncode != 0:
        tail = " ".join(err.decode(errors="replace").split())[-300:]
        return f"npx exited with code {process.returncode}" + (f": {tail}" if tail else "")
    lines = out.decode(errors="replace").strip().splitlines()
    if not lines:
        return "npx printed no PATH"
    npx_path = lines[-1]
    entries = npx_path.split(os.pathsep)
    if caller_path and npx_path.endswith(caller_path):
        prefix = [entry for entry in npx_path[:-len(caller_path)].split(os.pathsep) if entry]
    else:
        prefix = [entry for entry in entries if entry.endswith(os.path.join("node_modules", ".bin"))]
    command = split.command
    if command is None:
        match = _SPEC.fullmatch(split.packages[0])
        assert match is not None
        command = _bin_in(match.group(1), prefix)
        if command is None:
            where = os.pathsep.join(prefix) or "nowhere"
            return f"no bin of {split.packages[0]} found where npx installed it ({where})"
    executable = shutil.which(command, path=npx_path)
    if executable is None:
        return f"npx's PATH has no {command!r}"
    return Resolved(os.path.abspath(executable), tuple(prefix), time.monotonic() - began)


def _bin_in(name: str, prefix: list[str]) -> str | None:
    """The bin npx would pick for package ``name``, from the first ``node_modules`` of ``prefix`` that holds it."""
    for entry in prefix:
        manifest = Path(entry).parent / name / "package.json"
        if manifest.is_file():
            try:
                return bin_of(json.loads(manifest.read_text()))
            except (OSError, ValueError):
                return None
    return None


def _say(split: Form, outcome: Resolved | str) -> None:
    shown = " ".join(split.head)
    if isinstance(outcome, str):
        print(f"killpoint certify: {shown!r} not resolved once ({outcome}); each server starts through npx, as "
              f"written (slower: npx resolves the package at every start)", file=sys.stderr)
    else:
        print(f"killpoint certify: {shown!r} resolved once ({outcome.seconds:.1f}s) to {outcome.executable}; each "
              f"server starts that, not npx ({SWITCH}=0 to start it through npx each time)", file=sys.stderr)


def forget() -> None:
    """Drop what was resolved (tests)."""
    with _LOCK:
        _DONE.clear()
