"""What the three framework workloads share: their command line and the plan's call ids."""

from __future__ import annotations

import argparse
import json

from killpoint.client import WorkloadEnv

DURABILITIES = ("sync", "async", "exit")


def options(description: str, *, durability: bool) -> argparse.Namespace:
    """``--guarded`` (each step probes before redoing an interrupted effect) and, for LangGraph, ``--durability``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--guarded", action="store_true",
                        help="guard every step with its fake tool's read-only probe (the correct recovery)")
    if durability:
        parser.add_argument("--durability", choices=DURABILITIES, default="sync",
                            help="when LangGraph saves a step's writes (default: sync)")
    return parser.parse_args()


def planned_calls() -> list[str]:
    """The call ids of the plan killpoint handed this incarnation, in plan order: one step each."""
    plan = json.loads(WorkloadEnv.from_environ().plan_path.read_text())
    return [call["call_id"] for call in plan["calls"]]
