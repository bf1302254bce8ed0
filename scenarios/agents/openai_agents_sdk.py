"""An OpenAI Agents SDK agent as its users write one, pointed at killpoint by its URLs alone.

``Runner.run_sync`` with a ``SQLiteSession`` (the SDK's own durable memory,
in ``$KILLPOINT_RUN_DIR``), the Responses API (the SDK's default), and three
function tools that call HTTP APIs (``order_tools``), here killpoint's tool
service; the model is wherever ``OPENAI_BASE_URL`` points.
Nothing in it knows about crash recovery: what a restart does is the SDK's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from agents import Agent, Runner, SQLiteSession, function_tool

from killpoint.scenarios.agents.order_tools import ORDER_TOOLS


def main() -> int:
    agent = Agent(name="orders", instructions="Carry out the user's order with the tools.", model="gpt-4.1",
                  tools=[function_tool(function) for function in ORDER_TOOLS])
    session = SQLiteSession("order", str(Path(os.environ["KILLPOINT_RUN_DIR"]) / "session.sqlite"))
    result = Runner.run_sync(agent, "Order 2 boxes of tea.", session=session)
    print(result.final_output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
