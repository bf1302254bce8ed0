"""The plan as a LangGraph entrypoint calling one ``@task`` per planned call, in plan order.

The functional API stores no task name, only its order: the i-th task call is the plan's i-th call
(``[journal] steps = "order"``). Run it under killpoint:
``python -m killpoint.scenarios.frameworks.langgraph_functional --durability sync``.
"""

from __future__ import annotations

import sys
from typing import Any

from langgraph.func import entrypoint, task

from killpoint.frameworks import fake_step
from killpoint.frameworks.langgraph import run
from killpoint.scenarios.frameworks._workload import options, planned_calls


def main() -> int:
    args = options("the plan as a LangGraph entrypoint of tasks", durability=True)
    steps = [task(fake_step(call, probe=args.guarded)) for call in planned_calls()]

    @entrypoint()
    def carry_out_plan(_inputs: dict[str, Any]) -> dict[str, Any]:
        results: dict[str, Any] = {}
        for planned_step in steps:
            results.update(planned_step().result())
        return results

    run(carry_out_plan, {}, durability=args.durability)
    return 0


if __name__ == "__main__":
    sys.exit(main())
