"""The ``[agent]`` table of a scenario: the workload is an unmodified agent, judged at its network seams.

Its keys say how the scripted model follows the plan: ``turns`` (lists of
call_ids, several in one turn being parallel tool calls; default one call a
turn, in order) and ``answer`` (the final answer's text); ``tools`` declares
the agent's own tools (``declared_tools``). Such a scenario is
judged black-box from what the model had received (``judge/stores/_agent_seams``),
so it takes no ``[journal]`` of its own.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from killpoint.catalogue import Catalogue
from killpoint.harness.agents.declared_tools import declared_tool_problems
from killpoint.harness.agents.script import Script, ScriptError
from killpoint.harness.agents.tool_service import PlanIndex
from killpoint.harness.judge.stores import AGENT_SEAMS
from killpoint.harness.judge.stores._agent_seams import EXCHANGES_FILE, SEAMS_FILE
from killpoint.harness.judge.stores._table import path_problems
from killpoint.harness.model import Plan
from killpoint.protocol import READ_ONLY

AGENT_KEYS = {"turns": 'turns = [["c1"], ["c2", "c3"]] (call_ids; a turn of several is parallel tool calls)',
              "answer": 'answer = "Done." (the final answer\'s text)',
              "tools": "[agent.tools.NAME] class, parameters, effect (the agent's own tools, as fakes)",
              "store": 'store = "session.sqlite" or a list (the agent\'s own store, quoted as evidence)',
              "verify": '[agent.verify.CALL] tool, args, found (the read of a real MCP server that checks CALL)',
              "mcp_server": '[agent.mcp_server] command, url (a real MCP server over HTTP, behind the harness)'}
STORE_FILES_MOST = 8
_SERVICES_FILES = (SEAMS_FILE, EXCHANGES_FILE)


def agent_journal(agent: dict[str, Any]) -> dict[str, Any]:
    """The store the checker reads an ``[agent]`` scenario's runs from: the seams, and the agent's own if named."""
    store = agent.get("store")
    return {"format": AGENT_SEAMS, **({"store": [store] if isinstance(store, str) else list(store)} if store else {})}


def script_plan(plan: Plan, agent: dict[str, Any]) -> dict[str, Any]:
    """The plan as the scripted model and the tool service take it: its calls, with the table's turns and answer."""
    return {**plan.to_json(), **{key: agent[key] for key in AGENT_KEYS if key in agent}}


def agent_problems(table: dict[str, Any], plan: Plan | None, where: str, journal: object) -> list[str]:
    """Every problem of an ``[agent]`` table, each naming ``where: agent.KEY`` and the fix."""
    problems = [f"{where}: agent.{key}: unknown key; an [agent] table takes {', '.join(AGENT_KEYS)}"
                for key in table if key not in AGENT_KEYS]
    if "tools" in table:
        problems += declared_tool_problems(table["tools"], where)
    if "store" in table:
        problems += _store_problems(table["store"], where)
    if "verify" in table:
        problems += _verify_problems(table["verify"], plan, where)
    if "mcp_server" in table:
        problems += _server_problems(table["mcp_server"], where)
    if journal is not None:
        problems.append(f"{where}: agent and journal: an agent judged at its network seams is judged from what its "
                        f"model received, not from a [journal] of its own; remove one of the two tables")
    if plan is None or problems:
        return problems
    try:
        Script.from_plan(script_plan(plan, table))
        PlanIndex.of(plan.to_json())
    except (ScriptError, ValueError) as error:
        problems.append(f"{where}: agent: {error}")
    return problems


VERIFY_EXAMPLE = '[agent.verify.c2] tool = "read_text_file", args = { path = "summary.txt" }, found = "2 x tea"'


def _verify_problems(verify: object, plan: Plan | None, where: str) -> list[str]:
    """``verify`` gives, for planned calls, the read-only call of a real server (behind the recording proxy) whose
    text holds ``found`` once the call's effect is in the world."""
    if not isinstance(verify, dict):
        return [f"{where}: agent.verify: must be a table of planned calls, each {VERIFY_EXAMPLE}"]
    calls = {call.call_id for call in plan.calls} if plan is not None else None
    problems = []
    for call, read in verify.items():
        key = f"{where}: agent.verify.{call}"
        if calls is not None and call not in calls:
            problems.append(f"{key}: not a planned call_id; the plan's are {', '.join(sorted(calls))}")
        if not isinstance(read, dict):
            problems.append(f"{key}: must be a table: {VERIFY_EXAMPLE}")
            continue
        problems += [f"{key}.{name}: unknown key; it takes tool, args, found" for name in read
                     if name not in ("tool", "args", "found")]
        if not isinstance(read.get("tool"), str) or not read["tool"]:
            problems.append(f"{key}.tool: must name the server's read-only tool that checks {call}: {VERIFY_EXAMPLE}")
        if not isinstance(read.get("args", {}), dict):
            problems.append(f"{key}.args: must be a table of the read's arguments: {VERIFY_EXAMPLE}")
        if not isinstance(read.get("found"), str) or not read["found"]:
            problems.append(f"{key}.found: must be the text the read returns once {call}'s effect is in the world: "
                            f"{VERIFY_EXAMPLE}")
    return problems


SERVER_KEYS = {"command": 'command = ["{python}", "server.py", "{world}", "--port", "{port}"]',
        "url": 'url = "http://127.0.0.1:{port}/mcp"'}


def verify_read_problems(verify: dict[str, Any], catalogue: Catalogue, where: str) -> list[str]:
    """Each ``[agent.verify]`` read whose tool the scenario's catalogue does not class READ_ONLY: a check that may
    change the world is no check (the recovery rules' VERIFY uses read-only means only)."""
    return [f"{where}: agent.verify.{call}.tool: {read['tool']!r} is {catalogue.class_of(read['tool'])} in the "
            f"scenario's catalogue; the check of an interrupted call must be READ_ONLY: name a read, or class it "
            f"READ_ONLY in the catalogue" for call, read in verify.items()
            if catalogue.class_of(read["tool"]) != READ_ONLY]


def _server_problems(table: object, where: str) -> list[str]:
    """Every problem of an ``[agent.mcp_server]`` table, each naming the key and the fix."""
    key = f"{where}: agent.mcp_server"
    if not isinstance(table, dict):
        return [f"{key}: must be a table: {SERVER_KEYS['command']}, {SERVER_KEYS['url']}"]
    problems = [f"{key}.{name}: unknown key; it takes command, url" for name in table if name not in SERVER_KEYS]
    command, url = table.get("command"), table.get("url")
    if not (isinstance(command, list) and command and all(isinstance(word, str) and word for word in command)):
        problems.append(f"{key}.command: must be the server's command, a list of words: {SERVER_KEYS['command']}")
    parsed = urlsplit(url.replace("{port}", "1")) if isinstance(url, str) else None
    if parsed is None or parsed.scheme != "http" or not parsed.hostname:
        problems.append(f"{key}.url: must be the server's http:// URL (its port {{port}} where killpoint picks "
                        f"it): {SERVER_KEYS['url']}")
    return problems


def _store_problems(store: object, where: str) -> list[str]:
    """``store`` names 1 to STORE_FILES_MOST files inside the workload folder, none the services' own."""
    paths = [store] if isinstance(store, str) else store
    if not isinstance(paths, list) or not 0 < len(paths) <= STORE_FILES_MOST:
        return [f"{where}: agent.store: must be a path or a list of 1 to {STORE_FILES_MOST} paths, relative to the "
                f"workload folder ($KILLPOINT_RUN_DIR), where the agent keeps its conversation: store = \"session.sqlite\""]
    problems = []
    for path in paths:
        problems += [f"{where}: agent.store: {problem}" for problem in path_problems(path)]
        if isinstance(path, str) and PurePosixPath(path).name in _SERVICES_FILES:
            problems.append(f"{where}: agent.store: {path!r} is a file the harness's services write; "
                            "name the file your agent keeps")
    return problems
