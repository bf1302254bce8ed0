"""A LangGraph prebuilt ReAct agent as its users write one, pointed at killpoint by its URLs alone.

``create_react_agent`` with ``ChatOpenAI`` (langchain-openai, Chat Completions;
the model is wherever ``OPENAI_BASE_URL`` points), a ``SqliteSaver`` checkpointer
in ``$KILLPOINT_RUN_DIR`` (LangGraph's durable execution), and three tools that
call HTTP APIs (``order_tools``), here killpoint's tool service. A
restart resumes the thread as LangGraph's docs show: ``invoke(None, config)``
when the thread has a checkpoint, else the task from the start.

Its durability is LangGraph's default (``"async"``: a step's checkpoint is
saved in the background while the next step runs, so a kill can lose a step
whose result the model already had) unless the command line says
``--durability sync`` (saved before the next step starts) or ``exit``.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from pathlib import Path
from typing import get_args

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.prebuilt import create_react_agent
from langgraph.types import Durability

from killpoint.scenarios.agents.order_tools import ORDER_TOOLS


def durability(argv: list[str]) -> Durability | None:
    """``--durability MODE`` as LangGraph spells its modes; None keeps LangGraph's own default."""
    parser = argparse.ArgumentParser(prog="langgraph_prebuilt")
    parser.add_argument("--durability", choices=get_args(Durability), help="default: LangGraph's own")
    mode: Durability | None = parser.parse_args(argv).durability
    return mode


def main() -> int:
    mode = durability(sys.argv[1:])
    connection = sqlite3.connect(Path(os.environ["KILLPOINT_RUN_DIR"]) / "checkpoints.sqlite", check_same_thread=False)
    agent = create_react_agent(ChatOpenAI(model="gpt-4.1", max_retries=0), [tool(function) for function in ORDER_TOOLS],
                               checkpointer=SqliteSaver(connection))
    config: RunnableConfig = {"configurable": {"thread_id": "order"}}
    # A thread with a checkpoint is resumed, as LangGraph's docs show: invoke(None) runs what it left pending
    # (and returns a finished thread's state as it is); only a new thread gets the task.
    task = None if agent.get_state(config).values else {"messages": [("user", "Order 2 boxes of tea.")]}
    result = agent.invoke(task, config, durability=mode)
    print(result["messages"][-1].content)
    return 0


if __name__ == "__main__":
    sys.exit(main())
