"""Pydantic AI's durable agent on DBOS, as its docs write one, pointed at killpoint by its URLs and server command.

An ``Agent('anthropic:...')`` (the Anthropic Messages API through the
``anthropic`` client, which reads ``ANTHROPIC_BASE_URL``) with the
``DBOSDurability`` capability, run inside the user's own ``@DBOS.workflow``,
with DBOS's system database a SQLite file in ``$KILLPOINT_RUN_DIR``. Its tools
are an ``MCPToolset`` on killpoint's MCP server (streamable HTTP at
``$KILLPOINT_MCP_URL``, or with ``--stdio`` killpoint's shim as a server it
starts), or with ``--function-tools`` the order tools as plain function tools.
Pydantic AI's docs say which of them are durable: model requests and MCP calls
become DBOS steps, whose recorded outputs a recovered workflow replays; function
tools are not wrapped and run again. The workflow's id is the task's, so a
restart attaches to the workflow ``DBOS.launch`` recovers instead of starting
another. Nothing in it knows about crash recovery.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from dbos import DBOS, DBOSConfig, SetWorkflowID
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.mcp import MCPToolset

from killpoint.scenarios.agents.order_tools import ORDER_TOOLS


def mcp_toolset(stdio: bool) -> MCPToolset[None]:
    """killpoint's MCP server: its URL, or its stdio shim handed that URL (DBOS names the toolset's steps by ``id``)."""
    url = os.environ["KILLPOINT_MCP_URL"]
    if stdio:
        return MCPToolset(StdioTransport(command=sys.executable, args=["-m", "killpoint.harness.agents.mcp_stdio"],
                                         env={"KILLPOINT_MCP_URL": url}), id="tools")
    return MCPToolset(url, id="tools")


def make_agent(argv: list[str]) -> Agent[None, str]:
    instructions = "Carry out the user's order with the tools."
    if "--function-tools" in argv:
        return Agent("anthropic:claude-sonnet-4-5", instructions=instructions, name="orders",
                     tools=list(ORDER_TOOLS), capabilities=[DBOSDurability()])
    return Agent("anthropic:claude-sonnet-4-5", instructions=instructions, name="orders",
                 toolsets=[mcp_toolset("--stdio" in argv)], capabilities=[DBOSDurability()])


dbos_config: DBOSConfig = {
    "name": "orders",
    "system_database_url": f"sqlite:///{Path(os.environ['KILLPOINT_RUN_DIR']) / 'dbos.sqlite'}",
}
DBOS(config=dbos_config)
agent = make_agent(sys.argv[1:])  # before DBOS.launch(), which registers its steps


@DBOS.workflow()
async def order(prompt: str) -> str:
    result = await agent.run(prompt)
    return result.output


async def run() -> str:
    DBOS.launch()
    with SetWorkflowID("order"):  # a restart attaches to the workflow DBOS.launch() recovers
        return await order("Order 2 boxes of tea.")


def main() -> int:
    print(asyncio.run(run()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
