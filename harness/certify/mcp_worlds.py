"""The worlds an MCP server is certified on, their canonical snapshots, and the names its arguments draw from.

A world is a folder the server is confined to (its ``{world}``): a few files
(preset ``files``, the default), a small git repository (preset ``git``), or a
copy of ``--world DIR``. Its *vocabulary* is what path-, ref- and text-like
arguments draw from: the entries the world holds plus a few fresh names, so
most drawn calls act on something instead of being refused.

A git world is snapshotted through git, read-only (``GIT_OPTIONAL_LOCKS=0``,
never ``git status``): HEAD, the refs, the index entries (no stat data), the
untracked files, any ``*.lock`` a torn operation left in ``.git``, and the work
tree. Raw ``.git`` bytes would differ between equal repositories (the index holds
inodes and times), so two fresh worlds would never compare equal.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from killpoint.errors import ConfigError
from killpoint.fake_tools.world import World
from killpoint.harness.execute.leftovers import owner_prefix

PRESETS = ("files", "git")
# A commit's hash covers its author, committer and dates: fixed, so "one uninterrupted call" is the same in every world.
GIT_ENV = {"GIT_AUTHOR_NAME": "killpoint", "GIT_AUTHOR_EMAIL": "certify@killpoint.invalid",
           "GIT_COMMITTER_NAME": "killpoint", "GIT_COMMITTER_EMAIL": "certify@killpoint.invalid",
           "GIT_AUTHOR_DATE": "1767225600 +0000", "GIT_COMMITTER_DATE": "1767225600 +0000",  # GitPython refuses ISO-Z
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
FILES = {"a.txt": "alpha\n", "b.txt": "beta\ngamma\n", "sub/c.txt": "delta\n"}
FRESH_PATHS = ("new.txt", "sub/new.txt", "newdir/new.txt")
FRESH_REFS = ("topic",)
TEXTS = ("alpha", "beta", "alpha beta", "x", "")
# A folder a user's server acts on (``--mcp-url`` alone) is saved and reset for every trial: a small one only.
MAX_USER_WORLD_ENTRIES, MAX_USER_WORLD_BYTES = 10_000, 256 << 20
QUIET_S = 0.5  # after a client's death, a user's server has finished when the world is this long without a change


@dataclass(frozen=True)
class Vocabulary:
    """What world-aware arguments draw from (see ``mcp.world_hook``); each list is in the order draws shrink to."""

    files: tuple[str, ...]       # files of the world
    folders: tuple[str, ...]     # its folders, "." (the world itself) first
    fresh: tuple[str, ...]       # names it does not hold yet
    refs: tuple[str, ...]        # branches and revisions of a git world (empty otherwise)
    fresh_refs: tuple[str, ...]  # a branch name it does not hold yet
    texts: tuple[str, ...]       # words found in the world's files, then a few more


def make_world(folder: Path, preset: str, template: Path | None) -> Path:
    """A fresh world in ``folder/world``: a copy of ``template``, else the preset."""
    world = folder / "world"
    if template is not None:
        shutil.copytree(template, world, symlinks=True)
        return world
    world.mkdir(parents=True)
    (world / "empty").mkdir()
    for name, text in FILES.items():
        (world / name).parent.mkdir(parents=True, exist_ok=True)
        (world / name).write_text(text)
    if preset == "git":
        _seed_git(world)
    return world


@functools.cache
def user_world(folder: Path) -> tuple[Path, Path]:
    """(the folder, a saved copy of it): the world of a server the user runs; restored when certify exits.

    Once per folder: every trial resets it to what it held when certify began,
    and at exit it is left so again (a SIGKILLed certify leaves the last trial's
    world, and the copy in the temporary folder). ConfigError naming --world
    for a folder that is missing or too large to copy for every trial.
    """
    folder = folder.resolve()
    if not folder.is_dir():
        raise ConfigError(f"--world {folder}: no such folder; give the folder the server at --mcp-url acts on")
    entries, size = 0, 0
    for path in folder.rglob("*"):
        entries += 1
        size += path.lstat().st_size if path.is_file() and not path.is_symlink() else 0
        if entries > MAX_USER_WORLD_ENTRIES or size > MAX_USER_WORLD_BYTES:
            raise ConfigError(f"--world {folder}: more than {MAX_USER_WORLD_ENTRIES} entries or "
                              f"{MAX_USER_WORLD_BYTES >> 20} MiB; killpoint resets this folder for every trial, so "
                              f"give it a small folder of its own for the server to act on")
    saved = Path(tempfile.mkdtemp(prefix=owner_prefix("killpoint-mcp-world-"))) / "world"
    shutil.copytree(folder, saved, symlinks=True)

    def restore() -> None:
        if folder.is_dir():
            reset_world(folder, saved)
        shutil.rmtree(saved.parent, ignore_errors=True)

    atexit.register(restore)
    return folder, saved


def reset_world(folder: Path, template: Path) -> Path:
    """Make ``folder`` hold exactly what ``template`` holds (the folder itself stays: the server acts on its path)."""
    for entry in list(folder.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    shutil.copytree(template, folder, symlinks=True, dirs_exist_ok=True)
    return folder


def settle(world: Path, timeout_s: float) -> bool:
    """Wait until nothing changes in ``world`` for QUIET_S (at most ``timeout_s``); True if it settled.

    A server the user runs is not killed with its client: it may finish the
    call the client died in, writing after the "kill". The replay waits for that.
    """
    from killpoint.harness.certify.world_events import WorldEvents

    deadline = time.monotonic() + timeout_s
    events = WorldEvents(world)
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select(events.fds, [], [], min(QUIET_S, max(0.0, deadline - time.monotonic())))
            if not ready:
                return True
            events.read()
        return False
    finally:
        events.close()


def _seed_git(world: Path) -> None:
    """Two commits on main, a branch ``feature``, a tracked file modified, a new file staged, one untracked."""
    steps = [["init", "-q", "-b", "main"], ["add", "a.txt"], ["commit", "-q", "-m", "first"], ["add", "b.txt"],
             ["commit", "-q", "-m", "second"], ["branch", "feature"]]
    for step in steps:
        git(world, *step)
    (world / "a.txt").write_text("alpha\nchanged\n")
    git(world, "add", "sub/c.txt")


def git(world: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(world), *args], capture_output=True, text=True, check=False,
                          env={**os.environ, **GIT_ENV, "GIT_OPTIONAL_LOCKS": "0"}, timeout=30)
    if done.returncode != 0 and args[0] in ("init", "add", "commit", "branch"):
        raise RuntimeError(f"git {' '.join(args)} failed in {world}: {done.stderr.strip()[-300:]}")
    return done.stdout


def is_git_world(world: Path) -> bool:
    return (world / ".git").is_dir()


def snapshot(world: Path) -> dict[str, str]:
    """The world's canonical state: through git for a git world, else every file (``World.snapshot``)."""
    if not is_git_world(world):
        return World(world).snapshot()
    locks = sorted(path.relative_to(world).as_posix() for path in (world / ".git").rglob("*.lock"))
    state = {"git: HEAD": git(world, "symbolic-ref", "-q", "HEAD").strip() or git(world, "rev-parse", "HEAD").strip(),
             "git: refs": git(world, "for-each-ref", "--format=%(refname) %(objectname)"),
             "git: index": git(world, "ls-files", "-s"),
             "git: untracked": git(world, "ls-files", "--others", "--exclude-standard"),
             "git: locks": "\n".join(locks)}
    work_tree = {key: value for key, value in World(world).snapshot().items()
                 if key != ".git/" and not key.startswith(".git/")}
    return {**state, **work_tree}


def vocabulary(world: Path) -> Vocabulary:
    """The names one fresh world offers (made once, when the target is built)."""
    entries = sorted(path for path in world.rglob("*") if ".git" not in path.relative_to(world).parts)
    files = tuple(path.relative_to(world).as_posix() for path in entries if path.is_file())
    folders = (".", *(path.relative_to(world).as_posix() for path in entries if path.is_dir()))
    refs: tuple[str, ...] = ()
    if is_git_world(world):
        branches = git(world, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()
        refs = (*branches, "HEAD", "HEAD~1")
    words = sorted({word for path in entries if path.is_file()
                    for word in re.findall(r"\w+", path.read_text(errors="replace"))[:5]})
    return Vocabulary(files, folders, FRESH_PATHS, refs, FRESH_REFS, tuple(dict.fromkeys([*words, *TEXTS])))
