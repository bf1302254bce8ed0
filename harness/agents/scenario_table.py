"""The ``[agent]`` table of a scenario: the workload is an unmodified agent, judged at its network seams.

Its keys say how the scripted model follows the plan: ``turns`` (lists of
call_ids, several in one turn being parallel tool calls; default one call a
turn, in order) and ``answer`` (the final answer's text); ``tools`` declares
the agent's own tools (``declared_tools``). Such a scenario is
judged black-box from what the model had received (``frameworks/_agent_seams``),
so it takes no ``[journal]`` of its own.
"""

from __future__ import annotations

from typing import Any

from killpoint.harness.agents.declared_tools import declared_tool_problems
from killpoint.harness.agents.script import Script, ScriptError
from killpoint.harness.agents.tool_service import PlanIndex
from killpoint.harness.frameworks import AGENT_SEAMS
from killpoint.harness.model import Plan

AGENT_KEYS = {"turns": 'turns = [["c1"], ["c2", "c3"]] (call_ids; a turn of several is parallel tool calls)',
              "answer": 'answer = "Done." (the final answer\'s text)',
              "tools": "[agent.tools.NAME] class, parameters, effect (the agent's own tools, as fakes)"}
AGENT_JOURNAL = {"format": AGENT_SEAMS}  # the store the checker reads an [agent] scenario's runs from


def script_plan(plan: Plan, agent: dict[str, Any]) -> dict[str, Any]:
    """The plan as the scripted model and the tool service take it: its calls, with the table's turns and answer."""
    return {**plan.to_json(), **{key: agent[key] for key in AGENT_KEYS if key in agent}}


def agent_problems(table: dict[str, Any], plan: Plan | None, where: str, journal: object) -> list[str]:
    """Every problem of an ``[agent]`` table, each naming ``where: agent.KEY`` and the fix."""
    problems = [f"{where}: agent.{key}: unknown key; an [agent] table takes {', '.join(AGENT_KEYS)}"
                for key in table if key not in AGENT_KEYS]
    if "tools" in table:
        problems += declared_tool_problems(table["tools"], where)
    if journal is not None:
        problems.append(f"{where}: agent and journal: an agent judged at its network seams is judged from what its "
                        f"model received, not from a [journal] of its own; remove one of the two tables")
    if plan is None or problems:
        return problems
    try:
        Script.from_plan(script_plan(plan, table))
        PlanIndex.of(plan.to_json())
    except (ScriptError, ValueError) as error:
        problems.append(f"{where}: agent: {error}")
    return problems
