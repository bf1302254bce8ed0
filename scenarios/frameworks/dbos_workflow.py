"""The plan as a DBOS workflow of one step per planned call, each registered under its call id.

Run it under killpoint: ``python -m killpoint.scenarios.frameworks.dbos_workflow``.
"""

from __future__ import annotations

import sys
from typing import Any

from dbos import DBOS

from killpoint.frameworks.dbos import fake_step, run_workflow
from killpoint.scenarios.frameworks._workload import options, planned_calls


def main() -> int:
    args = options("the plan as a DBOS workflow", durability=False)
    steps = [fake_step(call, probe=args.guarded) for call in planned_calls()]

    @DBOS.workflow(name="carry_out_plan")
    def carry_out_plan() -> dict[str, Any]:
        results: dict[str, Any] = {}
        for planned_step in steps:
            results.update(planned_step())
        return results

    run_workflow(carry_out_plan)
    return 0


if __name__ == "__main__":
    sys.exit(main())
