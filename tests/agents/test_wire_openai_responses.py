"""The scripted model over the Responses API (the Agents SDK's default), read by the official ``openai`` client."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import openai
import pytest

from killpoint.harness.agents.model_endpoint import ModelEndpoint
from tests.agents.scripted import PLAN, PLAN_IDS, PLAN_TURNS, Calls, drive, responses_tools, result_of

MODES = ("create", "create-stream", "stream-helper")
# The event types of a streamed response as the real API sends them (a run of deltas counted once; each function
# call's events repeat in order).
_CALL = ["response.output_item.added", "response.function_call_arguments.delta",
         "response.function_call_arguments.done", "response.output_item.done"]
TOOL_CALLS_ORDER = (["response.created", "response.in_progress"], _CALL, "response.completed")
ANSWER_ORDER = (["response.created", "response.in_progress"],
                ["response.output_item.added", "response.content_part.added", "response.output_text.delta",
                 "response.output_text.done", "response.content_part.done", "response.output_item.done"],
                "response.completed")


def order(types: Iterable[str]) -> tuple[list[str], list[str], str]:
    """The stream's event types as (its opening, one output item's events, its close), checking every output item's
    events are alike; runs of the same delta count once."""
    kept: list[str] = []
    for kind in types:
        if not kept or kind != kept[-1]:
            kept.append(kind)
    opening, items, close = kept[:2], kept[2:-1], kept[-1]
    per_item = items[:len(items) // max(1, items.count("response.output_item.added"))]
    assert items == per_item * items.count("response.output_item.added")
    return opening, per_item, close


def client(endpoint: ModelEndpoint) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{endpoint.url}/v1", api_key="x", max_retries=0)


def ask(endpoint: ModelEndpoint, items: list[dict[str, Any]], mode: str, **extra: Any) -> tuple[Calls, str, str]:
    """One request in ``mode``: its function calls and text as the client assembled them, and the response id."""
    responses = client(endpoint).responses
    arguments: dict[str, Any] = {"model": "gpt-test", "input": items, "tools": responses_tools(), **extra}
    if mode == "create":
        response = responses.create(**arguments)
    elif mode == "create-stream":
        events = list(responses.create(**arguments, stream=True))
        assert [event.sequence_number for event in events] == list(range(len(events)))
        assert order(event.type for event in events) in (TOOL_CALLS_ORDER, ANSWER_ORDER)
        response = events[-1].response
        done = [event.item for event in events if event.type == "response.output_item.done"]
        assert [item.to_dict() for item in done] == [item.to_dict() for item in response.output]
        deltas = "".join(event.delta for event in events if event.type == "response.output_text.delta")
        assert deltas == response.output_text
    else:
        with responses.stream(**arguments) as stream:
            response = stream.get_final_response()
    calls = [(item.call_id, item.name, item.arguments) for item in response.output if item.type == "function_call"]
    return calls, response.output_text, response.id


def feed(items: list[dict[str, Any]], calls: Calls) -> None:
    items.extend({"type": "function_call", "call_id": ident, "name": name, "arguments": arguments}
                 for ident, name, arguments in calls)
    items.extend({"type": "function_call_output", "call_id": ident, "output": result_of(name, arguments)}
                 for ident, name, arguments in calls)


@pytest.mark.parametrize("mode", MODES)
def test_the_script_is_followed_to_the_answer_with_parallel_calls(endpoint: ModelEndpoint, mode: str) -> None:
    items: list[dict[str, Any]] = [{"role": "user", "content": "Charge order A1 and tell Ann."}]
    tools, ids, answer = drive(lambda: ask(endpoint, items, mode)[:2], lambda calls: feed(items, calls))
    assert (tools, ids, answer) == (PLAN_TURNS, PLAN_IDS, PLAN["answer"])


@pytest.mark.parametrize("mode", MODES)
def test_a_durable_agent_sends_only_new_items_and_the_previous_response_id(endpoint: ModelEndpoint,
                                                                           mode: str) -> None:
    previous: str | None = None
    turn: list[dict[str, Any]] = [{"role": "user", "content": "go"}]

    def ask_new() -> tuple[Calls, str]:
        nonlocal previous
        calls, text, previous = ask(endpoint, turn, mode, **({"previous_response_id": previous} if previous else {}))
        return calls, text

    def feed_outputs(calls: Calls) -> None:
        turn[:] = [{"type": "function_call_output", "call_id": ident, "output": result_of(name, arguments)}
                   for ident, name, arguments in calls]

    assert drive(ask_new, feed_outputs) == (PLAN_TURNS, PLAN_IDS, PLAN["answer"])


def test_a_request_sent_again_after_a_restart_gets_the_same_reply(endpoint: ModelEndpoint) -> None:
    items: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    feed(items, ask(endpoint, items, "create")[0])
    first, again = ask(endpoint, items, "create"), ask(endpoint, items, "create-stream")
    assert first == again and [call[0] for call in first[0]] == ["call_kp_c2", "call_kp_c3"]


def test_an_output_marked_interrupted_is_probed_and_a_found_effect_is_not_redone(endpoint: ModelEndpoint) -> None:
    items: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    feed(items, [(ident, name, arguments) for ident, name, arguments in ask(endpoint, items, "create")[0]])
    items[-1]["output"] = "interrupted: the agent restarted before lookup_order answered"
    probe = ask(endpoint, items, "stream-helper")[0]
    assert probe == [("call_kp_c1_verify", "verify_effect", '{"tool_call_id": "call_kp_c1"}')]
    items += [{"type": "function_call", "call_id": probe[0][0], "name": probe[0][1], "arguments": probe[0][2]},
              {"type": "function_call_output", "call_id": probe[0][0], "output": '{"effect_found": true}'}]
    assert [call[0] for call in ask(endpoint, items, "create")[0]] == ["call_kp_c2", "call_kp_c3"]


def test_a_function_call_without_its_output_gets_the_real_apis_error(endpoint: ModelEndpoint) -> None:
    items: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    feed(items, ask(endpoint, items, "create")[0])
    del items[-1]
    with pytest.raises(openai.BadRequestError) as refused:
        ask(endpoint, items, "create")
    assert refused.value.message.endswith("No tool output found for function call call_kp_c1.")
    assert refused.value.param == "input"


def test_an_unknown_previous_response_id_gets_the_real_apis_error(endpoint: ModelEndpoint) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        ask(endpoint, [{"role": "user", "content": "go"}], "create", previous_response_id="resp_never_sent")
    assert refused.value.code == "previous_response_not_found"
    assert refused.value.message.endswith("Previous response with id 'resp_never_sent' not found.")
