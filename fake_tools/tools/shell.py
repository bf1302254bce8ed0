"""A confined shell (a handful of commands over the world's files, never /bin/sh), and device facts.

Every command is appended to the shell history (``state/shell.json``) with the
call's request reference, as a terminal log would show it, a command that
failed part-way included; that history is how a read-only probe tells whether
a command already ran. ``run_logged`` is also the engine of ``terminal_exec``,
``terminal_send`` and ``code_runner``. The rest of the "shell"
family reads device facts (areas ``device``, ``clock``, ``logcat``,
``notifications``, ``screen``) or writes settings and the clipboard.
"""

from __future__ import annotations

import ast
import hashlib
import json
import operator
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from killpoint.fake_tools.base import REFUSALS, ToolContext, ToolFailed, fake_tool
from killpoint.fake_tools.schema import NAME, TEXT, obj
from killpoint.fake_tools.tools._areas import (
    NO_ARGS,
    SHORT,
    Args,
    State,
    area_view,
    bounded,
    change,
    enum,
    load_area,
    probe_of,
    probe_ref,
    reader,
    stamp,
)
from killpoint.fake_tools.tools.files import DEFAULT_HISTORY, HISTORY, shows_change
from killpoint.fake_tools.tools.ui import DEFAULT_SCREEN
from killpoint.fake_tools.world import World

COMMANDS = ("echo", "cat", "ls", "mkdir", "rm", "touch")


@dataclass
class Resume:
    """Where a run of this call picks up: the file history's last change logged for it, and whether it took.

    Each change a command makes to a file (a redirect, an ``rm``) is logged to
    the file history (``state/file_history.json``) with the digest it will
    leave, *before* it is made, numbered in the call's order. A kill can land
    between a change and the shell history's record of the run, where the probe
    reads "not run"; the redo then skips every change an earlier run of the same
    call made, so it completes the call instead of doubling it. ``mkdir -p`` and
    ``touch`` change nothing the second time: they need no log, and record an effect
    only when they create something.
    """

    ctx: ToolContext
    last_logged: int = -1
    last_shown: bool = False
    next: int = 0

    @classmethod
    def of(cls, ctx: ToolContext) -> Resume:
        history = load_area(ctx.world, HISTORY, DEFAULT_HISTORY)
        mine = [entry for entry in history["changes"] if entry.get("ref") == ctx.call and "step" in entry]
        if not mine:
            return cls(ctx)
        last = max(mine, key=lambda entry: entry["step"])
        return cls(ctx, last["step"], shows_change(ctx.world, last))

    @property
    def made_earlier(self) -> bool:
        """Did an earlier run of this call already make the next change?"""
        return self.next < self.last_logged or (self.next == self.last_logged and self.last_shown)

    def change(self, entry: dict[str, Any], make: Callable[[], object], effect: str) -> None:
        """Log and make one change and record ``effect``, unless an earlier run of this call made it."""
        if self.made_earlier:
            self.next += 1
            return
        number, self.next = self.next, self.next + 1
        history = load_area(self.ctx.world, HISTORY, DEFAULT_HISTORY)
        history["changes"] = [logged for logged in history["changes"]
                              if (logged.get("ref"), logged.get("step")) != (self.ctx.call, number)]
        stamp(history["changes"], self.ctx, {**entry, "step": number})
        self.ctx.world.save(HISTORY, history)
        make()
        self.ctx.effect(effect)


def _redirected(world: World, target: str, data: bytes, appending: bool) -> dict[str, Any]:
    """The history entry of a ``>``/``>>`` into ``target``: the digest (of the prefix, for ``>>``) it leaves."""
    before = world.read_bytes(target) if appending and world.path(target).is_file() else b""
    after = before + data
    return {"op": "redirect", "path": target, "size": len(after) if appending else None,
            "after": {target: hashlib.sha256(after).hexdigest()}}


def run_confined(ctx: ToolContext, command: str, resume: Resume | None = None) -> str:
    """Run one command with an optional ``>``/``>>`` redirect, inside the world."""
    resume = resume or Resume(ctx)
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
            if name == "rm":
                _remove(resume, operand)
                continue
            # ``mkdir -p`` of a folder, or ``touch`` of a file, that is already there changes nothing, so it
            # records no effect (the world's checks still run): a redo after a kill part-way through the
            # call leaves the ledger as the crash-free run's, as it leaves the world.
            if name == "mkdir":
                existed = world.path(operand).is_dir()
                world.make_folders(operand)
            else:
                existed = world.path(operand).is_file()
                world.append_bytes(operand, b"", create_folders=False)
            if not existed:
                ctx.effect(f"{name}_done")
    if redirect:
        appending, data = redirect == ">>", output.encode()
        write = world.append_bytes if appending else world.write_bytes
        resume.change(_redirected(world, target, data, appending),
                      lambda: write(target, data, create_folders=False), "file_redirected")
        output = ""
    return output


def _remove(resume: Resume, operand: str) -> None:
    world = resume.ctx.world
    if not resume.made_earlier and not world.path(operand).is_file():
        raise ToolFailed(f"rm: no file {operand!r}")
    resume.change({"op": "rm", "path": operand, "after": {operand: None}}, lambda: world.remove(operand), "rm_done")


def _read(world: World, operand: str) -> str:
    if not world.path(operand).is_file():
        raise ToolFailed(f"cat: no file {operand!r}")
    try:
        return world.read_text(operand)
    except UnicodeDecodeError:
        raise ToolFailed(f"cat: {operand!r} is not a text file") from None


Log = Callable[[str, dict[str, str]], None]


def run_logged(ctx: ToolContext, commands: list[str], log: Log) -> str:
    """Run ``commands`` through ``run_confined`` in turn and return their output; ``log`` the run either way.

    ``log(output, failure)`` records the run stamped with the call id; ``failure``
    is ``{"failed": message}`` when a command was refused, and the refusal is then
    raised. A run that stops part-way may have changed the world already (a
    ``>>`` line before a refused one), so it is logged too: the probe then sees
    that the call ran, and a VERIFY does not redo (and double) what it did.
    """
    output = ""
    resume = Resume.of(ctx)
    try:
        for command in commands:
            output += run_confined(ctx, command, resume)
    except REFUSALS as refusal:
        log(output, {"failed": ctx.world.describe(refusal)})
        raise
    log(output, {})
    return output


COMMAND = {"type": "string", "minLength": 1, "maxLength": 1000}


@fake_tool("shell_execute", family="shell", schema=obj({"command": COMMAND}))
def shell_execute(ctx: ToolContext, args: dict[str, Any]) -> str:
    def record(output: str, failure: dict[str, str]) -> None:
        history = ctx.world.load("shell", [])
        history.append({"command": args["command"], "ref": ctx.call, **failure})
        ctx.world.save("shell", history)
        ctx.effect("history_recorded")

    return run_logged(ctx, [args["command"]], record)


@probe_of(shell_execute)
def _command_in_history(world: World, args: dict[str, Any], call: str) -> bool:
    return any(entry["ref"] == call for entry in world.load("shell", []))


# -- device facts, settings, clipboard: the rest of the "shell" family -----------------

DEFAULT_DEVICE: State = {"model": "Pixel 8", "manufacturer": "Google", "android": "14", "sdk": 34,
                         "serial": "FAKE0001"}
DEFAULT_CLOCK: State = {"now": "2025-01-15T09:30:00+01:00", "timezone": "Europe/Paris"}
DEFAULT_SETTINGS: State = {"system": {}, "secure": {}, "global": {}}
DEFAULT_LOGCAT: State = {"lines": []}
DEFAULT_CLIPBOARD: State = {"text": "", "history": []}
DEFAULT_NOTIFICATIONS: State = {"items": []}
NAMESPACES = ("system", "secure", "global")


get_device_info = area_view("get_device_info", family="shell", area="device", default=DEFAULT_DEVICE)
# The world's clock is a fixed instant, so a crashed run and its golden run read the same time.
get_time = area_view("get_time", family="shell", area="clock", default=DEFAULT_CLOCK)


@reader("logcat", family="shell", area="logcat", default=DEFAULT_LOGCAT,
        schema=obj({}, {"tag": NAME, "lines": bounded(1, 1000)}))
def logcat(state: State, args: Args) -> list[Any]:
    lines = [line for line in state["lines"]
             if "tag" not in args or (isinstance(line, dict) and line.get("tag") == args["tag"])]
    return lines[-args.get("lines", 100):]


@reader("notification_read", family="shell", area="notifications", default=DEFAULT_NOTIFICATIONS,
        schema=obj({}, {"app": NAME}))
def notification_read(state: State, args: Args) -> list[Any]:
    return [item for item in state["items"]
            if "app" not in args or (isinstance(item, dict) and item.get("app") == args["app"])]


@fake_tool("screenshot", family="shell", schema=NO_ARGS)
def screenshot(ctx: ToolContext, args: Args) -> dict[str, Any]:
    """What the screen shows, with a digest standing for the image; no file is saved."""
    screen = load_area(ctx.world, "screen", DEFAULT_SCREEN)
    rendering = json.dumps(screen, sort_keys=True)
    return {"sha256": hashlib.sha256(rendering.encode()).hexdigest(), "buttons": sorted(screen.get("buttons", {})),
            "form": screen.get("form", {})}


@fake_tool("get_set_settings", family="shell",
           schema=obj({"key": NAME}, {"value": {"type": "string", "maxLength": 200}, "namespace": enum(*NAMESPACES)}))
def get_set_settings(ctx: ToolContext, args: Args) -> Any:
    """``settings get`` without a value, ``settings put`` with one (put semantics: a replay changes nothing)."""
    namespace = args.get("namespace", "system")
    if "value" not in args:
        return load_area(ctx.world, "settings", DEFAULT_SETTINGS).get(namespace, {}).get(args["key"])

    def put(state: State) -> str:
        state.setdefault(namespace, {})[args["key"]] = args["value"]
        return args["value"]

    return change(ctx, "settings", DEFAULT_SETTINGS, put, effect="setting_put")


@probe_of(get_set_settings)
def _setting_is(world: World, args: Args, call: str) -> bool:
    """A put is there when the setting holds its value; a get has no effect to find."""
    if "value" not in args:
        return False
    values = load_area(world, "settings", DEFAULT_SETTINGS).get(args.get("namespace", "system"), {})
    return values.get(args["key"]) == args["value"]


def _clips(state: State, args: Args) -> list[dict[str, Any]]:
    return state.setdefault("history", [])


@fake_tool("clipboard", family="shell", schema=obj({"action": enum("get", "set")}, {"text": TEXT}))
def clipboard(ctx: ToolContext, args: Args) -> str:
    """get reads the clipboard; set replaces it and adds a clipboard-history entry, as the keyboard shows it."""
    if args["action"] == "get":
        return str(load_area(ctx.world, "clipboard", DEFAULT_CLIPBOARD)["text"])
    if "text" not in args:
        raise ToolFailed("clipboard: args.text is required to set the clipboard")

    def copy_text(state: State) -> str:
        state["text"] = args["text"]
        stamp(_clips(state, args), ctx, {"text": args["text"]})
        return args["text"]

    return change(ctx, "clipboard", DEFAULT_CLIPBOARD, copy_text, effect="clipboard_set")


probe_ref(clipboard, "clipboard", DEFAULT_CLIPBOARD, _clips)

_OPERATORS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}


def _evaluate(node: ast.AST) -> float | int:
    """Arithmetic on numbers only, walked from the syntax tree: nothing is ever eval'd."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 100 or abs(left) > 10**6):
            raise ToolFailed("calculate: power too large (base up to 10^6, exponent up to 100)")
        result = _OPERATORS[type(node.op)](left, right)
        if isinstance(result, int) and abs(result) > 10**1000:
            raise ToolFailed("calculate: result beyond 10^1000")
        return result
    raise ToolFailed(f"calculate: {type(node).__name__} is not arithmetic; use numbers, + - * / // % ** and ()")


@fake_tool("calculate", family="shell", schema=obj({"expression": SHORT}))
def calculate(ctx: ToolContext, args: Args) -> float | int:
    try:
        return _evaluate(ast.parse(args["expression"], mode="eval").body)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        raise ToolFailed(f"calculate: cannot parse {args['expression']!r}: {error}") from None
    except (ZeroDivisionError, OverflowError) as error:
        raise ToolFailed(f"calculate: {error}") from None
