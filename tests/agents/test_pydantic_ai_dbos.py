"""Pydantic AI's durable agent on DBOS (SQLite), through the Anthropic Messages API, judged by the real harness.

Its docs say which of its tools are durable, and the verdicts must show it: an
MCP tool call is a DBOS step, so once its output is recorded a recovered
workflow replays it and the tool never sees the call again; while the step is
under way nothing is recorded, so DBOS runs it again, with no read-only check
(at least once, as any DBOS step). A function tool is no step: every recovery
runs it again, whatever the model already had of it.
"""

from __future__ import annotations

import pytest

from killpoint.harness.config.scenario import load_scenario
from tests.agents.test_agent_sessions import AGENTS, findings


@pytest.mark.parametrize("name", ["pydantic_ai_dbos", "pydantic_ai_dbos_stdio", "pydantic_ai_dbos_function_tools"])
def test_the_durable_agent_scenarios_load(name):
    assert load_scenario(AGENTS / f"{name}.toml").agent is not None


@pytest.mark.integration
@pytest.mark.parametrize(("name", "kill"), [("pydantic_ai_dbos", "model_request"),
                                           ("pydantic_ai_dbos", "c2:model_request"),
                                           ("pydantic_ai_dbos_stdio", "model_request")])
def test_mcp_calls_whose_steps_dbos_recorded_never_reach_a_tool_again(killpoint, name, kill):
    """Killed while the request carrying the results is held: DBOS recovers the workflow, replays the recorded
    model and MCP steps, and only the held request is sent again (the agent without DBOS runs every call again)."""
    result = killpoint("run", AGENTS / f"{name}.toml", "--kill-at", kill)
    assert result.exit_code == 0, result.out + result.err


@pytest.mark.integration
@pytest.mark.parametrize(("name", "kill"), [("pydantic_ai_dbos", "c3:tool_effect"),
                                           ("pydantic_ai_dbos_stdio", "c3:tool_effect")])
def test_an_mcp_step_killed_under_way_runs_again_with_no_check_naming_the_append(killpoint, name, kill):
    """The append's effect committed, its step not yet recorded: DBOS runs the step again, the append twice.

    Held kills only: the request held at the seam, the kill lands there every time. A ``--no-pause`` kill there
    (``c3:tool_effect/now``) named the append in every sweep measured on a quiet machine, and once, under a CI
    rehearsal beside a CPU hog, found nothing: where it lands beside the parallel c2 is the load's to decide, so
    a test of it would be flaky (docs/agents.md gives its sweeps)."""
    result = killpoint("run", AGENTS / f"{name}.toml", "--kill-at", kill)
    assert result.exit_code == 1, result.out + result.err
    named = findings(result.out, "verify-before-replay")
    assert named and all(line.startswith("[verify-before-replay] c3 ") for line in named), result.out
    assert findings(result.out, "world-equals-golden"), result.out
    assert not findings(result.out, "succeeded-not-replayed"), result.out


@pytest.mark.integration
def test_function_tools_run_again_on_every_recovery(killpoint):
    """The same agent with function tools, killed while the final answer's request is held: the model steps replay,
    and every tool the model already had the result of runs again."""
    result = killpoint("run", AGENTS / "pydantic_ai_dbos_function_tools.toml", "--kill-at", "model_request")
    assert result.exit_code == 1, result.out + result.err
    named = findings(result.out, "succeeded-not-replayed")
    assert {line.split()[1] for line in named} == {"c1", "c2", "c3"}, result.out
