"""File tools: the device file system under the world's ``files/``."""

from __future__ import annotations

from typing import Any

from fake_tools.base import ToolContext, ToolFailed, fake_tool, verifies
from fake_tools.schema import PATH, TEXT, obj
from fake_tools.world import World, write_atomically


def _read(world: World, path: str) -> str:
    target = world.path(path)
    if not target.is_file():
        raise ToolFailed(f"no file {path!r}")
    return target.read_text()


@fake_tool("read_file", family="file", schema=obj({"path": PATH}))
def read_file(ctx: ToolContext, args: dict[str, Any]) -> str:
    return _read(ctx.world, args["path"])


@fake_tool("write_file", family="file", schema=obj({"path": PATH, "content": TEXT}))
def write_file(ctx: ToolContext, args: dict[str, Any]) -> int:
    target = ctx.world.path(args["path"])
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(target, args["content"])
    ctx.effect("file_written")
    return len(args["content"])


@verifies(write_file)
def _file_has_content(world: World, args: dict[str, Any], call: str) -> bool:
    target = world.path(args["path"])
    return target.is_file() and target.read_text() == args["content"]


@fake_tool("append", family="file", schema=obj({"path": PATH, "text": {"type": "string", "minLength": 1, "maxLength": 4096}}))
def append(ctx: ToolContext, args: dict[str, Any]) -> int:
    target = ctx.world.path(args["path"])
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a") as stream:
        stream.write(args["text"])
    ctx.effect("file_appended")
    return target.stat().st_size


@verifies(append)
def _file_ends_with_text(world: World, args: dict[str, Any], call: str) -> bool:
    target = world.path(args["path"])
    return target.is_file() and target.read_text().endswith(args["text"])
