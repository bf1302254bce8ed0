"""An [agent] table is checked with the rest of the scenario: each problem exits 2 naming the field and the fix."""

from __future__ import annotations

import pytest

from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.judge.stores import AGENT_SEAMS
from tests.helpers import ROOT
from tests.test_config_errors import assert_usage_error, write

HEADER = 'workload = ["{python}", "-m", "killpoint.scenarios.agents.reference_agent"]\n[plan]\ntask_id = "t"\n'
CALLS = ('[[plan.calls]]\ncall_id = "c1"\ntool = "read_file"\nargs = { path = "a" }\n'
         '[[plan.calls]]\ncall_id = "c2"\ntool = "append"\nargs = { path = "b", text = "x" }\n')


@pytest.mark.parametrize(("tail", "fragments"), [
    ('[agent]\nturns = [["c1"]]\n', ("agent: turns must place every call exactly once",)),
    ('[agent]\nturns = [["c1", "c9"], ["c2"]]\n', ("agent: turns name 'c9', which is not a planned call_id",)),
    ('[agent]\nanswer = 5\n', ("agent: answer must be a string",)),
    ('[agent]\nturn = [["c1"]]\n', ("agent.turn: unknown key; an [agent] table takes turns, answer, tools, store",)),
    ('[agent]\n[journal]\nformat = "killpoint"\n', ("agent and journal: an agent judged at its network seams",)),
    ('[agent]\nstore = 5\n', ("agent.store: must be a path or a list of 1 to 8 paths",)),
    ('[agent]\nstore = []\n', ("agent.store: must be a path or a list of 1 to 8 paths",)),
    ('[agent]\nstore = ["../host.db"]\n', ("agent.store: '../host.db' climbs out with '..'",)),
    ('[agent]\nstore = "/etc/passwd"\n', ("agent.store: '/etc/passwd' is absolute",)),
    ('[agent]\nstore = "agent-seams.jsonl"\n', ("agent.store: 'agent-seams.jsonl' is a file the harness's services",)),
], ids=["turns-miss-a-call", "turns-name-no-call", "answer-not-text", "unknown-key", "with-a-journal",
        "store-not-a-path", "store-no-path", "store-climbs-out", "store-absolute", "store-the-services-file"])
def test_a_bad_agent_table_is_named_with_its_fix(killpoint, tmp_path, tail, fragments):
    path = write(tmp_path, "s.toml", HEADER + CALLS + tail)
    assert_usage_error(killpoint("run", path, "--kill-at", "c1:tool_effect"), *fragments)


def test_an_agent_that_is_not_a_table_is_named_with_its_fix(killpoint, tmp_path):
    path = write(tmp_path, "s.toml", 'agent = "yes"\n' + HEADER + CALLS)
    assert_usage_error(killpoint("run", path, "--kill-at", "c1:tool_effect"), "agent: 'yes' is not a table")


def test_two_calls_a_tool_request_could_not_tell_apart_are_refused(killpoint, tmp_path):
    twice = CALLS.replace('call_id = "c2"\ntool = "append"\nargs = { path = "b", text = "x" }',
                          'call_id = "c2"\ntool = "read_file"\nargs = { path = "a" }')
    path = write(tmp_path, "s.toml", HEADER + twice + "[agent]\n")
    assert_usage_error(killpoint("run", path, "--exhaustive"),
                       "agent: calls c1 and c2 both call read_file with the same arguments")


def test_an_agent_scenario_is_judged_from_what_its_model_received(tmp_path):
    path = write(tmp_path, "s.toml", HEADER + CALLS + "[agent]\n")
    assert load_scenario(path).journal.table == {"format": AGENT_SEAMS}


def test_a_users_journal_cannot_name_the_agents_store(killpoint, tmp_path):
    path = write(tmp_path, "s.toml", HEADER + CALLS + '[journal]\nformat = "agent-seams"\n')
    assert_usage_error(killpoint("run", path, "--exhaustive"), "journal.format: unknown format 'agent-seams'")


@pytest.mark.parametrize("name", ["reference_agent", "one_append", "openai_agents_sdk", "openai_agents_mcp",
                                  "openai_agents_mcp_stdio", "langgraph_prebuilt",
                                  "pydantic_ai_agent",
                                  "agent-blind-retry", "agent-forgets", "agent-retries-done"])
def test_the_shipped_agent_scenarios_load(name):
    assert load_scenario(ROOT / "scenarios" / "agents" / f"{name}.toml").agent is not None
