"""An OpenAI Agents SDK agent whose tools come from an MCP server, as its users write one, pointed at killpoint by
its URLs alone.

The agent of ``openai_agents_sdk.py`` (``Runner``, a ``SQLiteSession`` in
``$KILLPOINT_RUN_DIR``, the Responses API), with no function tools: its tools
are those an MCP server lists over streamable HTTP, here killpoint's fake tools
at ``$KILLPOINT_MCP_URL``. Nothing in it knows about crash recovery.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from agents import Agent, Runner, SQLiteSession
from agents.mcp import MCPServerStreamableHttp


async def run() -> str:
    async with MCPServerStreamableHttp({"url": os.environ["KILLPOINT_MCP_URL"]}, cache_tools_list=True,
                                       name="tools") as tools:
        agent = Agent(name="orders", instructions="Carry out the user's order with the tools.", model="gpt-4.1",
                      mcp_servers=[tools])
        session = SQLiteSession("order", str(Path(os.environ["KILLPOINT_RUN_DIR"]) / "session.sqlite"))
        result = await Runner.run(agent, "Order 2 boxes of tea.", session=session)
        return str(result.final_output)


def main() -> int:
    print(asyncio.run(run()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
