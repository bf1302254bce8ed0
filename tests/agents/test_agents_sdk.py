"""An unmodified OpenAI Agents SDK agent, pointed at the scripted model by its base URL, runs the plan's tools in
the plan's order and ends with its answer: the Responses API (the SDK's default) and Chat Completions."""

from __future__ import annotations

from collections.abc import Iterator

import agents
import pytest
from agents import Agent, Runner, function_tool
from openai import AsyncOpenAI

from killpoint.harness.agents.model_endpoint import ModelEndpoint
from killpoint.harness.agents.script import Script

PLAN = {
    "calls": [
        {"call_id": "c1", "tool": "lookup_order", "args": {"order_id": "A1"}},
        {"call_id": "c2", "tool": "charge_card", "args": {"order_id": "A1", "cents": 500}},
        {"call_id": "c3", "tool": "lookup_order", "args": {"order_id": "B2"}},
    ],
    "turns": [["c1"], ["c2", "c3"]],
    "answer": "A1 is charged; B2 is open.",
}


@pytest.fixture(params=["responses", "chat_completions"])
def api(request: pytest.FixtureRequest) -> Iterator[str]:
    agents.set_tracing_disabled(True)
    agents.set_default_openai_api(request.param)
    yield request.param
    agents.set_default_openai_api("responses")


def test_an_agents_sdk_runner_follows_the_script_to_the_answer(api: str) -> None:
    ran: list[tuple[object, ...]] = []

    @function_tool
    def lookup_order(order_id: str) -> str:
        """Read an order."""
        ran.append(("lookup_order", order_id))
        return f"order {order_id} is open"

    @function_tool
    def charge_card(order_id: str, cents: int) -> str:
        """Charge the card of an order."""
        ran.append(("charge_card", order_id, cents))
        return "charged"

    with ModelEndpoint(Script.from_plan(PLAN)) as endpoint:
        agents.set_default_openai_client(AsyncOpenAI(base_url=f"{endpoint.url}/v1", api_key="x", max_retries=0),
                                         use_for_tracing=False)
        agent = Agent(name="shop", instructions="Charge the order.", tools=[lookup_order, charge_card])
        result = Runner.run_sync(agent, "Charge order A1, then check B2.")
        assert endpoint.settle(10)  # the agent has the last reply before its thread has recorded it
    assert result.final_output == PLAN["answer"]
    assert ran[0] == ("lookup_order", "A1")
    assert sorted(ran[1:], key=str) == [("charge_card", "A1", 500), ("lookup_order", "B2")]
    assert [exchange["calls"] for exchange in endpoint.exchanges] == [["c1"], ["c2", "c3"], []]
    assert {exchange["api"] for exchange in endpoint.exchanges} == {"chat" if api == "chat_completions" else api}
