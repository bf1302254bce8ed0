"""The plan as a LangGraph StateGraph: one node per planned call, named after it, chained in plan order.

Run it under killpoint: ``python -m killpoint.scenarios.frameworks.langgraph_graph --durability sync``.
"""

from __future__ import annotations

import sys
from typing import Any, TypedDict

from langgraph.graph import START, StateGraph

from killpoint.frameworks import fake_step
from killpoint.frameworks.langgraph import run
from killpoint.scenarios.frameworks._workload import options, planned_calls


def main() -> int:
    args = options("the plan as a LangGraph StateGraph", durability=True)
    calls = planned_calls()
    results_of: Any = TypedDict  # the state's keys are the plan's call ids, known only at run time
    state = results_of("Results", {call: dict for call in calls}, total=False)
    builder = StateGraph(state).add_sequence([fake_step(call, probe=args.guarded) for call in calls])
    builder.add_edge(START, calls[0])
    run(builder, {}, durability=args.durability)
    return 0


if __name__ == "__main__":
    sys.exit(main())
