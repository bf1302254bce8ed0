"""File tools: the device file system under the world's ``files/``.

Reads never touch anything. The NON_IDEMPOTENT file operations (edit, append,
delete, copy/move, organize) keep a file history (``state/file_history.json``),
as a files app's activity view does: each change is logged *before* the files
are touched, stamped with the call id and with the content digests it will
leave, and the probe believes an entry of its own call only when the files
agree. So a kill between the log and the files reads as "not done" and a redo
converges on the crash-free world instead of doubling the change, and two
identical calls (two appends of the same line) are told apart by their ref,
never by the content they leave. A request whose file is gone is refused and
logged (a replay's signature), so a blind replay shows in the world; the
probe reads that refusal as "this call has run".
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection
from pathlib import Path, PurePosixPath
from typing import Any

from killpoint.fake_tools.base import ToolContext, ToolFailed, fake_tool
from killpoint.fake_tools.schema import PATH, TEXT, obj
from killpoint.fake_tools.tools._areas import (
    SHORT,
    TEXT1,
    Args,
    State,
    enum,
    load_area,
    probe_of,
    refusal_logged,
    stamp,
)
from killpoint.fake_tools.tools.web import DEFAULT_WEB
from killpoint.fake_tools.world import SandboxError, World

HISTORY = "file_history"
DEFAULT_HISTORY: State = {"changes": [], "log": []}


def _read(world: World, path: str) -> str:
    target = world.path(path)
    if not target.is_file():
        raise ToolFailed(f"no file {path!r}")
    try:
        return world.read_text(path)
    except UnicodeDecodeError:
        raise ToolFailed(f"{path!r} is not a text file") from None


def _text_of(world: World, path: str) -> str | None:
    """The file's exact text (no newline translation: "\r" stays "\r"), or None if absent or binary."""
    try:
        return world.read_bytes(path).decode() if world.path(path).is_file() else None
    except UnicodeDecodeError:
        return None


def _folder(world: World, path: str) -> Path:
    folder = world.path(path)
    if not folder.is_dir():
        raise ToolFailed(f"no folder {path!r}")
    return folder


def _relative(world: World, target: Path) -> str:
    return target.relative_to(world.files_root).as_posix()


def _inside(world: World, relative: str) -> Path | None:
    """The path if it stays inside the world (a symlink may lead out), else None."""
    try:
        return world.path(relative)
    except SandboxError:
        return None


@fake_tool("read_file", family="file", schema=obj({"path": PATH}))
def read_file(ctx: ToolContext, args: dict[str, Any]) -> str:
    return _read(ctx.world, args["path"])


@fake_tool("list_files", family="file", schema=obj({}, {"path": PATH}))
def list_files(ctx: ToolContext, args: Args) -> list[str]:
    """Names in a folder (the world's top by default), folders ending with '/'."""
    folder = _folder(ctx.world, args.get("path", "."))
    return [entry.name + ("/" if entry.is_dir() else "") for entry in sorted(folder.iterdir())]


@fake_tool("glob_files", family="file", schema=obj({"pattern": SHORT}))
def glob_files(ctx: ToolContext, args: Args) -> list[str]:
    """Paths matching a relative glob; matches reached through a symlink out of the world are dropped."""
    pattern = PurePosixPath(args["pattern"])
    if pattern.is_absolute() or ".." in pattern.parts:
        raise SandboxError(f"pattern {args['pattern']!r} refused: a pattern is relative and stays in the world")
    if not pattern.parts:  # "" or ".": Python 3.11's glob fails with an IndexError on a pattern of no parts
        raise ToolFailed(f"bad pattern {args['pattern']!r}: it names no file; give one such as '*.txt'")
    root = ctx.world.files_root
    try:
        found = [_relative(ctx.world, match) for match in root.glob(args["pattern"]) if match != root]
    except ValueError as error:
        raise ToolFailed(f"bad pattern {args['pattern']!r}: {error}") from None
    return sorted(relative for relative in found if _inside(ctx.world, relative) is not None)


def _text_files(world: World, folder: Path) -> list[tuple[str, str]]:
    """(relative path, text) of every text file under ``folder``, never leaving the world."""
    found = []
    for directory, _, names in os.walk(folder):
        for name in sorted(names):
            relative = _relative(world, Path(directory, name))
            target = _inside(world, relative)
            if target is not None and target.is_file():
                try:
                    found.append((relative, world.read_text(relative)))
                except (UnicodeDecodeError, SandboxError, OSError):  # not text, or not a file the world may open
                    continue
    return sorted(found)


@fake_tool("search_files", family="file", schema=obj({"query": SHORT}, {"path": PATH}))
def search_files(ctx: ToolContext, args: Args) -> list[str]:
    """``path:line: text`` for every line containing the query (case-insensitive)."""
    folder = _folder(ctx.world, args.get("path", "."))
    query = args["query"].lower()
    return [f"{relative}:{number}: {line}"
            for relative, text in _text_files(ctx.world, folder)
            for number, line in enumerate(text.splitlines(), start=1) if query in line.lower()]


@fake_tool("write_file", family="file", schema=obj({"path": PATH, "content": TEXT}))
def write_file(ctx: ToolContext, args: dict[str, Any]) -> int:
    ctx.world.write_bytes(args["path"], args["content"].encode())
    ctx.effect("file_written")
    return len(args["content"])


@probe_of(write_file)
def _file_has_content(world: World, args: dict[str, Any], call: str) -> bool:
    return _text_of(world, args["path"]) == args["content"]


@fake_tool("create_directory", family="file", schema=obj({"path": PATH}))
def create_directory(ctx: ToolContext, args: Args) -> str:
    """mkdir -p: a folder that exists already is success, a file in the way is not."""
    target = ctx.world.path(args["path"])
    if target.is_dir():
        return args["path"]
    if target.exists():
        raise ToolFailed(f"{args['path']!r} exists and is not a folder")
    ctx.world.make_folders(args["path"])
    ctx.effect("directory_created")
    return args["path"]


@probe_of(create_directory)
def _directory_exists(world: World, args: Args, call: str) -> bool:
    return world.path(args["path"]).is_dir()


@fake_tool("download_file", family="file", schema=obj({"url": SHORT, "path": PATH}))
def download_file(ctx: ToolContext, args: Args) -> int:
    """Save a page of the fake web (``state/web.json``) to a file, overwriting it."""
    body = _page_body(ctx.world, args["url"])
    ctx.world.write_bytes(args["path"], body.encode())
    ctx.effect("file_downloaded")
    return len(body)


def _page_body(world: World, url: str) -> str:
    page = load_area(world, "web", DEFAULT_WEB)["pages"].get(url)
    if not isinstance(page, dict):
        raise ToolFailed(f"download {url!r}: 404 not found on the fake web")
    return str(page.get("body", ""))


@probe_of(download_file)
def _download_saved(world: World, args: Args, call: str) -> bool:
    return _text_of(world, args["path"]) == _page_body(world, args["url"])


# -- the file history: changes logged before they are made ---------------------


def _digest(world: World, relative: str, size: int | None = None) -> str | None:
    """sha256 of a world file's bytes (only its first ``size`` bytes, if given), or None when it is absent."""
    if not world.path(relative).is_file():
        return None
    return hashlib.sha256(world.read_bytes(relative)[:size]).hexdigest()


def shows_change(world: World, entry: dict[str, Any]) -> bool:
    """Do the files show every digest this history entry promised?

    An append promises only the file's first ``size`` bytes (what it left), so
    appends made after it keep it visible, as they keep its text in the file.
    """
    size = entry.get("size")
    return all(_digest(world, relative, size) == expected for relative, expected in entry["after"].items())


def _pending(world: World, history: State, call: str) -> dict[str, Any] | None:
    """This call's logged change that the files do not show yet (a kill cut it short)."""
    return next((entry for entry in history["changes"] if entry.get("ref") == call and not shows_change(world, entry)), None)


def _log_change(ctx: ToolContext, entry: dict[str, Any]) -> None:
    """Log a change before making it; an earlier, unfinished log of this call is replaced, not doubled."""
    history = load_area(ctx.world, HISTORY, DEFAULT_HISTORY)
    pending = _pending(ctx.world, history, ctx.call)
    if pending is not None:
        history["changes"].remove(pending)
    stamp(history["changes"], ctx, entry)
    ctx.world.save(HISTORY, history)


def _refuse(ctx: ToolContext, op: str, path: str, reason: str) -> ToolFailed:
    """Log a refused request (its file is gone) and return the failure to raise."""
    history = load_area(ctx.world, HISTORY, DEFAULT_HISTORY)
    stamp(history["log"], ctx, {"op": op, "path": path, "refused": reason})
    ctx.world.save(HISTORY, history)
    ctx.effect("refusal_logged")
    return ToolFailed(f"{op} {path!r}: {reason}")


def _probe_history(world: World, args: Args, call: str) -> bool:
    """This call's change is logged and the files show it, or its refusal is logged."""
    history = load_area(world, HISTORY, DEFAULT_HISTORY)
    return refusal_logged(history, call) or any(
        entry.get("ref") == call and shows_change(world, entry) for entry in history["changes"])


def _content_of(ctx: ToolContext, op: str, path: str) -> str:
    target = ctx.world.path(path)
    if target.is_dir():
        raise ToolFailed(f"{op} {path!r}: it is a folder; this tool works on files")
    if not target.is_file():
        raise _refuse(ctx, op, path, "no such file")
    try:  # bytes, not read_text: universal newlines would turn a "\r\n" file into "\n" on rewrite
        return ctx.world.read_bytes(path).decode()
    except UnicodeDecodeError:
        raise ToolFailed(f"{op} {path!r}: not a text file") from None


@fake_tool("edit_file", family="file", schema=obj({"path": PATH, "old": TEXT1, "new": TEXT}))
def edit_file(ctx: ToolContext, args: Args) -> str:
    """Replace the first occurrence of ``old`` with ``new``; a replay edits the next occurrence."""
    if args["old"] == args["new"]:
        raise ToolFailed("edit_file: old and new are the same text; the edit would change nothing")
    path = args["path"]
    text = _content_of(ctx, "edit", path)
    if args["old"] not in text:
        raise _refuse(ctx, "edit", path, f"text {args['old'][:40]!r} not found")
    edited = text.replace(args["old"], args["new"], 1)
    _log_change(ctx, {"op": "edit", "path": path, "after": {path: hashlib.sha256(edited.encode()).hexdigest()}})
    ctx.world.write_bytes(path, edited.encode())
    ctx.effect("file_edited")
    return f"edited {path}"


@fake_tool("append", family="file", schema=obj({"path": PATH, "text": TEXT1}))
def append(ctx: ToolContext, args: Args) -> int:
    """Add ``text`` at the end of a file (created if absent); a replay adds it again."""
    path = args["path"]
    target = ctx.world.path(path)
    if target.is_dir():
        raise ToolFailed(f"append {path!r}: it is a folder; append writes to files")
    before = ctx.world.read_bytes(path) if target.is_file() else b""
    added = args["text"].encode()
    _log_change(ctx, {"op": "append", "path": path, "size": len(before) + len(added),
                      "after": {path: hashlib.sha256(before + added).hexdigest()}})
    size = ctx.world.append_bytes(path, added)
    ctx.effect("file_appended")
    return size


@fake_tool("delete_file", family="file", schema=obj({"path": PATH}))
def delete_file(ctx: ToolContext, args: Args) -> str:
    path = args["path"]
    target = ctx.world.path(path)
    if target.is_dir():
        raise ToolFailed(f"delete {path!r}: it is a folder; delete_file removes files")
    if not target.is_file():
        raise _refuse(ctx, "delete", path, "no such file")
    _log_change(ctx, {"op": "delete", "path": path, "after": {path: None}})
    ctx.world.remove(path)
    ctx.effect("file_deleted")
    return f"deleted {path}"


def _free_name(world: World, relative: str, taken: Collection[str] = ()) -> str:
    """``relative``, or ``name (1).ext``, ``(2)``... as a files app names a copy that would collide."""
    pure = PurePosixPath(relative)
    candidate, number = relative, 0
    while candidate in taken or world.path(candidate).exists():
        number += 1
        candidate = str(pure.with_name(f"{pure.stem} ({number}){pure.suffix}"))
    return candidate


@fake_tool("copy_move_file", family="file",
           schema=obj({"source": PATH, "destination": PATH}, {"mode": enum("copy", "move")}))
def copy_move_file(ctx: ToolContext, args: Args) -> str:
    """Copy (default) or move a file; an existing destination is never overwritten: the copy is renamed."""
    mode, source = args.get("mode", "copy"), args["source"]
    if mode == "move" and PurePosixPath(source) == PurePosixPath(args["destination"]):
        raise ToolFailed(f"move: source and destination are the same file {source!r}")
    text = _content_of(ctx, mode, source)
    destination = args["destination"]
    if ctx.world.path(destination).is_dir():  # into a folder, keeping the name
        destination = (PurePosixPath(destination) / PurePosixPath(source).name).as_posix()
    destination = _free_name(ctx.world, destination)
    after = {destination: hashlib.sha256(text.encode()).hexdigest()}
    _log_change(ctx, {"op": mode, "path": source, "to": destination,
                      "after": after if mode == "copy" else {**after, source: None}})
    if mode == "copy":
        ctx.world.write_bytes(destination, text.encode())
    else:
        ctx.world.rename(source, destination)
    ctx.effect(f"file_{mode}_done")
    return destination


@fake_tool("file_organizer", family="file", schema=obj({"path": PATH}))
def file_organizer(ctx: ToolContext, args: Args) -> list[str]:
    """Move each file directly in a folder into a subfolder named by its extension (``other`` without one)."""
    folder = _folder(ctx.world, args["path"])
    history = load_area(ctx.world, HISTORY, DEFAULT_HISTORY)
    pending = _pending(ctx.world, history, ctx.call)
    moves = pending["moves"] if pending else _plan_moves(ctx.world, folder)
    if not moves:
        raise _refuse(ctx, "organize", args["path"], "nothing to organize: no loose files")
    after: dict[str, str | None] = {}
    for source, destination in moves:
        after[source] = None
        after[destination] = _digest(ctx.world, destination) or _digest(ctx.world, source)
    _log_change(ctx, {"op": "organize", "path": args["path"], "moves": moves, "after": after})
    for source, destination in moves:  # each move is one rename; a redo resumes the logged plan
        if ctx.world.path(source).is_file():
            ctx.world.rename(source, destination)
    ctx.effect("files_organized")
    return [destination for _, destination in moves]


def _plan_moves(world: World, folder: Path) -> list[list[str]]:
    moves: list[list[str]] = []
    taken: set[str] = set()
    for entry in sorted(folder.iterdir()):
        relative = _relative(world, entry)
        if entry.is_symlink() or not entry.is_file():
            continue
        kind = entry.suffix[1:].lower() or "other"
        if (folder / kind).exists() and not (folder / kind).is_dir():
            kind += " files"  # a file already has the folder's name
        destination = _free_name(world, _relative(world, folder / kind / entry.name), taken)
        taken.add(destination)
        moves.append([relative, destination])
    return moves


for _tool in (edit_file, append, delete_file, copy_move_file, file_organizer):
    probe_of(_tool)(_probe_history)
