"""Tools a scenario declares for its agent (``[agent.tools.NAME]``): the agent's own tools, as fakes.

An agent people run calls its own tools — a refund, an email — not killpoint's
fake tools. A scenario declares each one in a few lines: its class (which goes
into the scenario's catalogue), its parameters (JSON types; all required) and
what it does to the fake world, one of:

- ``effect = { append = "payments.log", line = "charged {order} {cents}" }``: adds the
  line to the file (a replay adds it again); the probe finds the line there;
- ``effect = { write = "status/{order}.txt", content = "refunded" }``: the file holds
  the content (a replay changes nothing); the probe finds that content;
- ``effect = { read = "orders/{order}.txt" }`` or ``effect = { returns = "order {order}: 2 x tea" }``:
  answers with the file or the text and changes nothing.

``{name}`` in a path, line, content or text is the call's argument of that name.
The tool service serves declared tools beside the fake tools (same ledger lines:
invoked, the effect, the probe), so the rules judge them alike. The world paths
are the fake world's, sandboxed as every fake tool's are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from killpoint import protocol
from killpoint.fake_tools.base import REGISTRY, FakeTool, ToolContext, ToolFailed
from killpoint.fake_tools.world import World
from killpoint.harness.agents.script import TOOL_NAME

TYPES = ("string", "integer", "number", "boolean")
EFFECTS = {  # the effect's kind -> the key holding what it writes or answers (None: the path is all)
    "append": "line", "write": "content", "read": None, "returns": None}
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
EXAMPLE = ('[agent.tools.charge_card] class = "NON_IDEMPOTENT", parameters = { order = "string", cents = "integer" }, '
           'effect = { append = "payments.log", line = "charged {order} {cents}" }')
TOOL_KEYS = ("class", "parameters", "effect")


def declared_tool_problems(table: Any, where: str) -> list[str]:
    """Every problem of an ``[agent.tools]`` table, each naming ``where: agent.tools.NAME.KEY`` and the fix."""
    if not isinstance(table, dict):
        return [f"{where}: agent.tools: a table of NAME = {{ class, parameters, effect }}; e.g. {EXAMPLE}"]
    problems = []
    for name, tool in table.items():
        at = f"{where}: agent.tools.{name}"
        if not TOOL_NAME.fullmatch(name):
            problems.append(f"{at}: a tool name is 1-64 of A-Z a-z 0-9 _ - (the APIs' rule for a function name)")
        elif name in REGISTRY:
            problems.append(f"{at}: {name} is a killpoint fake tool already; give yours another name")
        if not isinstance(tool, dict):
            problems.append(f"{at}: a table with class, parameters and effect; e.g. {EXAMPLE}")
            continue
        problems += [f"{at}.{key}: unknown key; a declared tool has {', '.join(TOOL_KEYS)}"
                     for key in tool if key not in TOOL_KEYS]
        if tool.get("class") not in protocol.CLASSES:
            problems.append(f"{at}.class: give one of {', '.join(protocol.CLASSES)}")
        parameters = tool.get("parameters", {})
        if not isinstance(parameters, dict) or not all(kind in TYPES for kind in parameters.values()):
            problems.append(f"{at}.parameters: a table of NAME = TYPE, each TYPE one of {', '.join(TYPES)}")
            continue
        problems += [f"{at}.effect: {problem}" for problem in _effect_problems(tool.get("effect"), parameters)]
    return problems


def _effect_problems(effect: Any, parameters: Mapping[str, str]) -> list[str]:
    kinds = [kind for kind in EFFECTS if isinstance(effect, dict) and kind in effect]
    if not isinstance(effect, dict) or len(kinds) != 1:
        return [f"a table with one of {', '.join(EFFECTS)}; e.g. effect = {{ append = \"payments.log\", "
                f"line = \"charged {{order}}\" }}"]
    kind = kinds[0]
    written = EFFECTS[kind]
    wanted = {kind} if written is None else {kind, written}
    problems = [f"{kind} takes {' and '.join(sorted(wanted))}, not {key}" for key in effect if key not in wanted]
    problems += [f"{key}: a string" for key in wanted if not isinstance(effect.get(key), str)]
    problems += [f"{key}: {{{field}}} names no parameter ({', '.join(parameters) or 'none declared'})"
                 for key in wanted if isinstance(effect.get(key), str)
                 for field in _FIELD.findall(effect[key]) if field not in parameters]
    return problems


def declared_tools(table: Mapping[str, Any]) -> dict[str, FakeTool]:
    """The tools of a valid ``[agent.tools]`` table (``declared_tool_problems`` found none), as fake tools."""
    return {name: _fake_tool(name, tool) for name, tool in table.items()}


def declared_classes(table: Mapping[str, Any]) -> dict[str, str]:
    """Each declared tool's class, for the scenario's catalogue."""
    return {name: str(tool["class"]) for name, tool in table.items()}


def _fake_tool(name: str, tool: Mapping[str, Any]) -> FakeTool:
    parameters: dict[str, str] = tool.get("parameters", {})
    schema = {"type": "object", "properties": {key: {"type": kind} for key, kind in parameters.items()},
              "required": list(parameters), "additionalProperties": False}
    effect: dict[str, str] = tool["effect"]
    kind = next(kind for kind in EFFECTS if kind in effect)

    def act(ctx: ToolContext, args: dict[str, Any]) -> Any:
        path = _filled(effect[kind], args)
        if kind == "returns":
            return path
        if kind == "read":
            return ctx.world.read_text(path)
        if ctx.world.path(path).is_dir():
            raise ToolFailed(f"{name}: {path!r} is a folder")
        if kind == "append":
            ctx.world.append_bytes(path, (_filled(effect["line"], args) + "\n").encode())
            ctx.effect("line_appended")
            return "done"
        ctx.world.write_bytes(path, _filled(effect["content"], args).encode())
        ctx.effect("file_written")
        return "done"

    def probe(world: World, args: dict[str, Any], call: str) -> bool:
        written_key = EFFECTS[kind]
        if written_key is None:
            return False  # it changes nothing: there is nothing to find
        try:
            text = world.read_text(_filled(effect[kind], args))
        except FileNotFoundError:
            return False
        written = _filled(effect[written_key], args)
        return written in text.splitlines() if kind == "append" else text == written

    return FakeTool(name, "declared", schema, act, probe)


def _filled(template: str, args: Mapping[str, Any]) -> str:
    """``template`` with each ``{name}`` replaced by that argument's value as text (never ``str.format``: an
    agent's arguments are no format spec, nor attribute lookups)."""
    return _FIELD.sub(lambda match: str(args[match[1]]), template)
