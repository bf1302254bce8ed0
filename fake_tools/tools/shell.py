"""A confined shell: a handful of commands over the world's files, never /bin/sh.

Every command is appended to the shell history (``state/shell.json``) with the
call's request reference, as a terminal log would show it; that history is how
a read-only probe tells whether a command already ran.
"""

from __future__ import annotations

import shlex
from typing import Any

from fake_tools.base import ToolContext, ToolFailed, fake_tool, verifies
from fake_tools.schema import obj
from fake_tools.world import World

COMMANDS = ("echo", "cat", "ls", "mkdir", "rm", "touch")


def run_confined(ctx: ToolContext, command: str) -> str:
    """Run one command with an optional ``>``/``>>`` redirect, inside the world."""
    try:
        words = shlex.split(command)
    except ValueError as error:
        raise ToolFailed(f"cannot parse {command!r}: {error}") from None
    redirect = None
    if len(words) >= 2 and words[-2] in (">", ">>"):
        redirect, target = words[-2], words[-1]
        words = words[:-2]
    if not words or words[0] not in COMMANDS:
        raise ToolFailed(f"unknown command {words[:1]}: the confined shell knows {', '.join(COMMANDS)}")
    name, operands = words[0], words[1:]
    world = ctx.world
    if name == "echo":
        output = " ".join(operands) + "\n"
    elif name == "cat":
        output = "".join(_read(world, operand) for operand in operands)
    elif name == "ls":
        folder = world.path(operands[0]) if operands else world.files_root
        output = "".join(entry.name + "\n" for entry in sorted(folder.iterdir()))
    else:
        output = ""
        for operand in operands:
            path = world.path(operand)
            if name == "mkdir":
                path.mkdir(parents=True, exist_ok=True)
            elif name == "touch":
                path.touch()
            elif name == "rm":
                if not path.is_file():
                    raise ToolFailed(f"rm: no file {operand!r}")
                path.unlink()
            ctx.effect(f"{name}_done")
    if redirect:
        path = world.path(target)
        with path.open("a" if redirect == ">>" else "w") as stream:
            stream.write(output)
        ctx.effect("file_redirected")
        output = ""
    return output


def _read(world: World, operand: str) -> str:
    path = world.path(operand)
    if not path.is_file():
        raise ToolFailed(f"cat: no file {operand!r}")
    return path.read_text()


@fake_tool("shell_execute", family="shell", schema=obj({"command": {"type": "string", "minLength": 1, "maxLength": 1000}}))
def shell_execute(ctx: ToolContext, args: dict[str, Any]) -> str:
    output = run_confined(ctx, args["command"])
    history = ctx.world.load("shell", [])
    history.append({"command": args["command"], "ref": ctx.call})
    ctx.world.save("shell", history)
    ctx.effect("history_recorded")
    return output


@verifies(shell_execute)
def _command_in_history(world: World, args: dict[str, Any], call: str) -> bool:
    return any(entry["ref"] == call for entry in world.load("shell", []))
