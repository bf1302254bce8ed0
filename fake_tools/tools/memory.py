"""Agent memory, skills and MCP connections (families memory, skill, mcp).

``memory`` holds episodes, knowledge-graph nodes and recorded macros, read only.
``skills`` holds the ``installed`` skills and the ``registry`` they install
from; create and install are put operations, an uninstall is logged (and a
missing skill's uninstall refused and logged). ``mcp`` holds the configured
``servers``: each has a ``connected`` flag, ``tools`` (name -> "read" or
"create") and the ``items`` its tools read or create; a created item carries
the call id as ``ref``, as a real server would return an id.
"""

from __future__ import annotations

from typing import Any

from killpoint.fake_tools.base import ToolContext, ToolFailed, fake_tool
from killpoint.fake_tools.schema import NAME, obj
from killpoint.fake_tools.tools._areas import (
    OBJECT,
    SHORT,
    TEXT1,
    Args,
    Refused,
    State,
    bounded,
    change,
    has_ref,
    load_area,
    logged_tool,
    matches,
    pick,
    probe_of,
    reader,
    setter,
    stamp,
)
from killpoint.fake_tools.world import World

DEFAULT_MEMORY: State = {"episodes": [], "nodes": [], "macros": {}}
DEFAULT_SKILLS: State = {"installed": {}, "registry": {}, "log": []}
DEFAULT_MCP: State = {"servers": {}}


@reader("memory_recent_episodes", family="memory", area="memory", default=DEFAULT_MEMORY,
        schema=obj({}, {"limit": bounded(1, 50)}))
def memory_recent_episodes(state: State, args: Args) -> list[Any]:
    return state["episodes"][-args.get("limit", 5):]


@reader("memory_search_nodes", family="memory", area="memory", default=DEFAULT_MEMORY, schema=obj({"query": SHORT}))
def memory_search_nodes(state: State, args: Args) -> list[Any]:
    return [node for node in state["nodes"] if matches(args["query"], node)]


@reader("memory_recall_macro", family="memory", area="memory", default=DEFAULT_MEMORY, schema=obj({"name": NAME}))
def memory_recall_macro(state: State, args: Args) -> Any:
    return pick(state["macros"], args["name"], "macro")


@reader("skill_list", family="skill", area="skills", default=DEFAULT_SKILLS)
def skill_list(state: State, args: Args) -> list[dict[str, Any]]:
    return [{"name": name, "description": skill.get("description", ""), "source": skill.get("source")}
            for name, skill in sorted(state["installed"].items())]


@reader("skill_search", family="skill", area="skills", default=DEFAULT_SKILLS, schema=obj({"query": SHORT}))
def skill_search(state: State, args: Args) -> list[dict[str, Any]]:
    """Installed and installable skills whose name or description matches."""
    return [{"name": name, "description": skill.get("description", ""), "installed": where == "installed"}
            for where in ("installed", "registry")
            for name, skill in sorted(state[where].items())
            if matches(args["query"], name, skill.get("description", ""))]


@setter("skill_create", family="skill", area="skills", default=DEFAULT_SKILLS, effect="skill_created",
        schema=obj({"name": NAME, "description": SHORT, "body": TEXT1}))
def skill_create(state: State, args: Args) -> tuple[dict[str, Any], str, Any]:
    """Create or replace a local skill by name."""
    return state["installed"], args["name"], {"description": args["description"], "body": args["body"],
                                              "source": "local"}


@setter("skill_install", family="skill", area="skills", default=DEFAULT_SKILLS, effect="skill_installed",
        schema=obj({"name": NAME}))
def skill_install(state: State, args: Args) -> tuple[dict[str, Any], str, Any]:
    """Install (or reinstall) a skill from the registry."""
    offer = pick(state["registry"], args["name"], "skill in the registry")
    return state["installed"], args["name"], {**offer, "source": "registry"}


@logged_tool("skill_uninstall", family="skill", area="skills", default=DEFAULT_SKILLS, effect="skill_uninstalled",
             schema=obj({"name": NAME}))
def skill_uninstall(state: State, args: Args) -> tuple[dict[str, Any], str]:
    if args["name"] not in state["installed"]:
        raise Refused(f"uninstall skill {args['name']!r}: not installed", op="uninstall", name=args["name"])
    del state["installed"][args["name"]]
    return {"op": "uninstall", "name": args["name"]}, f"uninstalled {args['name']}"


@reader("mcp_list", family="mcp", area="mcp", default=DEFAULT_MCP)
def mcp_list(state: State, args: Args) -> list[dict[str, Any]]:
    return [{"server": name, "connected": bool(server.get("connected")), "tools": sorted(server.get("tools", {}))}
            for name, server in sorted(state["servers"].items())]


@setter("mcp_connect", family="mcp", area="mcp", default=DEFAULT_MCP, effect="mcp_connected",
        schema=obj({"server": NAME}))
def mcp_connect(state: State, args: Args) -> tuple[dict[str, Any], str, Any]:
    return pick(state["servers"], args["server"], "MCP server"), "connected", True


def _server_tool(state: State, args: Args) -> tuple[dict[str, Any], str]:
    server = pick(state["servers"], args["server"], "MCP server")
    if not server.get("connected"):
        raise ToolFailed(f"MCP server {args['server']!r} is not connected: call mcp_connect first")
    return server, pick(server.get("tools", {}), args["tool"], f"tool of MCP server {args['server']!r}")


@fake_tool("mcp_call", family="mcp", schema=obj({"server": NAME, "tool": NAME}, {"arguments": OBJECT}))
def mcp_call(ctx: ToolContext, args: Args) -> Any:
    """Dispatch to a fake server tool: a "read" tool returns the matching items, a "create" tool adds one."""
    server, kind = _server_tool(load_area(ctx.world, "mcp", DEFAULT_MCP), args)
    arguments = args.get("arguments", {})
    if kind == "read":
        return [item for item in server.get("items", [])
                if all(isinstance(item, dict) and item.get(key) == value for key, value in arguments.items())]
    if kind != "create":
        raise ToolFailed(f"MCP tool {args['tool']!r} has kind {kind!r}; the fake servers know read and create")

    def create(state: State) -> dict[str, Any]:
        server, _ = _server_tool(state, args)
        fields = {key: value for key, value in arguments.items() if key not in ("ref", "refused")}
        return stamp(server.setdefault("items", []), ctx, {**fields, "tool": args["tool"]})

    return change(ctx, "mcp", DEFAULT_MCP, create, effect="mcp_item_created")


@probe_of(mcp_call)
def _mcp_item_created(world: World, args: Args, call: str) -> bool:
    """Only a "create" tool leaves an effect: an item of its server carrying this call's ref."""
    server, kind = _server_tool(load_area(world, "mcp", DEFAULT_MCP), args)
    return kind == "create" and has_ref(server.get("items"), call)
