"""An OpenAI Agents SDK agent whose tools come from an MCP server, as its users write one, pointed at killpoint by
its URLs and its server's command alone.

The agent of ``openai_agents_sdk.py`` (``Runner``, a ``SQLiteSession`` in
``$KILLPOINT_RUN_DIR``, the Responses API), with no function tools: its tools
are those an MCP server lists, here killpoint's fake tools, over streamable
HTTP at ``$KILLPOINT_MCP_URL``, or with ``--stdio`` from a server it starts as
its child (killpoint's shim, handed that URL in its environment). Nothing in it
knows about crash recovery.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from agents import Agent, Runner, SQLiteSession
from agents.mcp import MCPServerStdio, MCPServerStreamableHttp


def server(stdio: bool) -> MCPServerStdio | MCPServerStreamableHttp:
    url = os.environ["KILLPOINT_MCP_URL"]
    if stdio:
        return MCPServerStdio({"command": sys.executable, "args": ["-m", "killpoint.harness.agents.mcp_stdio"],
                               "env": {"KILLPOINT_MCP_URL": url}}, cache_tools_list=True, name="tools")
    return MCPServerStreamableHttp({"url": url}, cache_tools_list=True, name="tools")


async def run(stdio: bool) -> str:
    async with server(stdio) as tools:
        agent = Agent(name="orders", instructions="Carry out the user's order with the tools.", model="gpt-4.1",
                      mcp_servers=[tools])
        session = SQLiteSession("order", str(Path(os.environ["KILLPOINT_RUN_DIR"]) / "session.sqlite"))
        result = await Runner.run(agent, "Order 2 boxes of tea.", session=session)
        return str(result.final_output)


def main() -> int:
    print(asyncio.run(run("--stdio" in sys.argv[1:])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
