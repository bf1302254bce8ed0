"""Terminal tools: sessions of the confined shell, in ``state/terminal.json``.

Each session has an ``open`` flag, a ``foreground`` job (a command still
running, such as ``top``, or null at the prompt) and a ``history`` of what was
typed, run and signalled, each entry stamped with the call id as ``ref``: the
scrollback an agent would read back. Commands run through ``run_logged``
(never a real shell), a refused one logged too. Closing is logged in the area's ``log``; closing a closed
session is refused and logged.
"""

from __future__ import annotations

from typing import Any

from killpoint.fake_tools.base import ToolContext, ToolFailed, fake_tool
from killpoint.fake_tools.schema import NAME, obj
from killpoint.fake_tools.tools._areas import (
    TEXT1,
    Args,
    Refused,
    State,
    bounded,
    change,
    enum,
    load_area,
    logged_tool,
    pick,
    probe_ref,
    reader,
    stamp,
)
from killpoint.fake_tools.tools.shell import COMMAND, run_logged

DEFAULT_TERMINAL: State = {"sessions": {}, "log": []}
SESSION = obj({"session": NAME})


def _session(state: State, args: Args) -> dict[str, Any]:
    """The named session, refusing a closed one."""
    session = pick(state["sessions"], args["session"], "terminal session")
    if not session.get("open", True):
        raise ToolFailed(f"terminal session {args['session']!r} is closed")
    return session


def _history(state: State, args: Args) -> list[dict[str, Any]]:
    return _session(state, args).setdefault("history", [])


@reader("terminal_list", family="terminal", area="terminal", default=DEFAULT_TERMINAL)
def terminal_list(state: State, args: Args) -> list[dict[str, Any]]:
    return [{"session": name, "open": session.get("open", True), "foreground": session.get("foreground"),
             "entries": len(session.get("history", []))}
            for name, session in sorted(state["sessions"].items())]


@reader("terminal_read", family="terminal", area="terminal", default=DEFAULT_TERMINAL,
        schema=obj({"session": NAME}, {"lines": bounded(1, 500)}))
def terminal_read(state: State, args: Args) -> list[dict[str, Any]]:
    """The last entries of a session's scrollback (a closed session can still be read)."""
    session = pick(state["sessions"], args["session"], "terminal session")
    return [{key: value for key, value in entry.items() if key != "ref"}
            for entry in session.get("history", [])[-args.get("lines", 50):]]


def _type(ctx: ToolContext, args: Args, text: str, *, to_job: bool, effect: str) -> str:
    """Give ``text`` to the session: to its foreground job if ``to_job`` and one runs, else run it as a command."""
    job = _session(load_area(ctx.world, "terminal", DEFAULT_TERMINAL), args).get("foreground")
    if job and not to_job:
        raise ToolFailed(f"terminal session {args['session']!r} is busy running {job!r}: "
                         f"send it input or a signal first")

    def record(entry: dict[str, Any]) -> None:
        change(ctx, "terminal", DEFAULT_TERMINAL, lambda state: stamp(_history(state, args), ctx, entry), effect=effect)

    if job:
        record({"input": text, "to": job})
        return ""
    return run_logged(ctx, [text], lambda output, failure: record({"command": text, "output": output, **failure}))


@fake_tool("terminal_exec", family="terminal", schema=obj({"session": NAME, "command": COMMAND}))
def terminal_exec(ctx: ToolContext, args: Args) -> str:
    """Run a command at the session's prompt and return its output."""
    return _type(ctx, args, args["command"], to_job=False, effect="terminal_command_run")


@fake_tool("terminal_send", family="terminal", schema=obj({"session": NAME, "text": TEXT1}))
def terminal_send(ctx: ToolContext, args: Args) -> str:
    """Send a line of input: the foreground job reads it, or the prompt runs it as a new command."""
    return _type(ctx, args, args["text"], to_job=True, effect="terminal_input_sent")


for _tool in (terminal_exec, terminal_send):
    probe_ref(_tool, "terminal", DEFAULT_TERMINAL, _history)


@logged_tool("terminal_signal", family="terminal", area="terminal", default=DEFAULT_TERMINAL, entries=_history,
             effect="terminal_signalled", schema=obj({"session": NAME, "signal": enum("INT", "TERM", "KILL", "HUP")}))
def terminal_signal(state: State, args: Args) -> tuple[dict[str, Any], str]:
    """Signal the foreground job, which ends; at an empty prompt the shell just shows ``^C``."""
    session = _session(state, args)
    job = session.get("foreground")
    session["foreground"] = None
    return {"signal": args["signal"], "job": job}, f"{job} ended by SIG{args['signal']}" if job else "^C"


@logged_tool("terminal_close", family="terminal", area="terminal", default=DEFAULT_TERMINAL, schema=SESSION,
             effect="terminal_closed")
def terminal_close(state: State, args: Args) -> tuple[dict[str, Any], str]:
    session = pick(state["sessions"], args["session"], "terminal session")
    if not session.get("open", True):
        raise Refused(f"close {args['session']!r}: the session is already closed", op="close",
                      session=args["session"])
    session["open"] = False
    session["foreground"] = None
    return {"op": "close", "session": args["session"]}, f"closed {args['session']}"
