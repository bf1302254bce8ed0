"""A Pydantic AI agent as its users write one, pointed at killpoint by its URLs alone.

``Agent('openai:gpt-4.1')`` (Chat Completions through the openai client, which
reads ``OPENAI_BASE_URL``), the order tools (``order_tools``, HTTP calls to
killpoint's tool service) as plain function tools, and ``run_sync``. Pydantic
AI keeps no durable state of its own unless one is wired in: a restart starts
the task again, and what that repeats is what the verdict says.
"""

from __future__ import annotations

import sys

from pydantic_ai import Agent

from killpoint.scenarios.agents.order_tools import ORDER_TOOLS


def main() -> int:
    agent = Agent("openai:gpt-4.1", instructions="Carry out the user's order with the tools.", tools=list(ORDER_TOOLS))
    print(agent.run_sync("Order 2 boxes of tea.").output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
