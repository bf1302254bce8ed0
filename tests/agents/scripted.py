"""The plan the scripted-model tests drive, its tools in each API's shape, and the loop that feeds results back."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from killpoint.harness.agents.script import PROBE_TOOL

# Three planned calls: a read alone, then a charge and an email as two parallel calls, then the answer.
PLAN: dict[str, Any] = {
    "calls": [
        {"call_id": "c1", "tool": "lookup_order", "args": {"order_id": "A1"}},
        {"call_id": "c2", "tool": "charge_card", "args": {"order_id": "A1", "cents": 500}},
        {"call_id": "c3", "tool": "send_email", "args": {"to": "ann@example.com", "subject": "A1 paid"}},
    ],
    "turns": [["c1"], ["c2", "c3"]],
    "answer": "Order A1 is charged and Ann is told.",
}
PLAN_TURNS = [["lookup_order"], ["charge_card", "send_email"]]
PLAN_IDS = [["call_kp_c1"], ["call_kp_c2", "call_kp_c3"]]
# Each tool's parameters, strict (every property required, no others) so the SDKs' parsing helpers accept them.
PARAMETERS: dict[str, dict[str, str]] = {
    "lookup_order": {"order_id": "string"},
    "charge_card": {"order_id": "string", "cents": "integer"},
    "send_email": {"to": "string", "subject": "string"},
    PROBE_TOOL: {"tool_call_id": "string"},
}


def schema(tool: str) -> dict[str, Any]:
    properties = {name: {"type": kind} for name, kind in PARAMETERS[tool].items()}
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def chat_tools() -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": tool, "parameters": schema(tool), "strict": True}}
            for tool in PARAMETERS]


def responses_tools() -> list[dict[str, Any]]:
    return [{"type": "function", "name": tool, "parameters": schema(tool), "strict": True} for tool in PARAMETERS]


def anthropic_tools() -> list[dict[str, Any]]:
    return [{"name": tool, "input_schema": schema(tool)} for tool in PARAMETERS]


def result_of(name: str, arguments: str) -> str:
    """What a fake tool answers: its name and arguments echoed, so a result never reads as unknown."""
    return f"{name} ran with {json.dumps(json.loads(arguments), sort_keys=True)}"


# (tool-call id, tool, arguments as JSON text) as a client read them from a reply.
Calls = list[tuple[str, str, str]]


def drive(ask: Callable[[], tuple[Calls, str]], feed: Callable[[Calls], None], limit: int = 10) -> tuple[
        list[list[str]], list[list[str]], str]:
    """Ask, run the calls the reply makes, feed their results back, until the reply is the answer: the tools and
    the tool-call ids of each turn, and the answer."""
    tools: list[list[str]] = []
    ids: list[list[str]] = []
    for _ in range(limit):
        calls, text = ask()
        if not calls:
            return tools, ids, text
        tools.append([name for _, name, _ in calls])
        ids.append([ident for ident, _, _ in calls])
        feed(calls)
    raise AssertionError(f"no answer after {limit} replies: {tools}")
