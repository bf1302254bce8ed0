"""An OpenAI Agents SDK agent whose tools come from an MCP server, as its users write one, pointed at killpoint by
its URLs and its server's command alone.

The agent of ``openai_agents_sdk.py`` (``Runner``, a ``SQLiteSession`` in
``$KILLPOINT_RUN_DIR``, the Responses API), with no function tools: its tools
are those an MCP server lists, here killpoint's fake tools, over streamable
HTTP at ``$KILLPOINT_MCP_URL``, or with ``--stdio`` from a server it starts as
its child (killpoint's shim, handed that URL in its environment). With
``--server CMD [ARG...]`` the tools are a real stdio MCP server's, started
behind killpoint's recording proxy (``python -m killpoint.harness.agents.mcp_proxy
-- CMD ...``), with ``{world}`` in its arguments the folder it is to act on.
Nothing in it knows about crash recovery.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from agents import Agent, Runner, SQLiteSession
from agents.mcp import MCPServerStdio, MCPServerStreamableHttp


def server(stdio: bool, command: list[str]) -> MCPServerStdio | MCPServerStreamableHttp:
    url = os.environ["KILLPOINT_MCP_URL"]
    if command:  # a real server, behind the recording proxy, on the world's files
        world = str(Path(os.environ["KILLPOINT_WORLD"]) / "files")
        return MCPServerStdio({"command": sys.executable, "env": {"KILLPOINT_MCP_URL": url}, "args": [
            "-m", "killpoint.harness.agents.mcp_proxy", "--", *(word.replace("{world}", world) for word in command)]},
            cache_tools_list=True, name="tools", client_session_timeout_seconds=60)
    if stdio:
        return MCPServerStdio({"command": sys.executable, "args": ["-m", "killpoint.harness.agents.mcp_stdio"],
                               "env": {"KILLPOINT_MCP_URL": url}}, cache_tools_list=True, name="tools")
    return MCPServerStreamableHttp({"url": url}, cache_tools_list=True, name="tools")


async def run(stdio: bool, command: list[str]) -> str:
    async with server(stdio, command) as tools:
        agent = Agent(name="orders", instructions="Carry out the user's order with the tools.", model="gpt-4.1",
                      mcp_servers=[tools])
        session = SQLiteSession("order", str(Path(os.environ["KILLPOINT_RUN_DIR"]) / "session.sqlite"))
        result = await Runner.run(agent, "Order 2 boxes of tea.", session=session)
        return str(result.final_output)


def main() -> int:
    arguments = sys.argv[1:]
    command = arguments[arguments.index("--server") + 1:] if "--server" in arguments else []
    print(asyncio.run(run("--stdio" in arguments, command)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
