"""The scripted model over Chat Completions, read by the official ``openai`` client as it parses real replies."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from killpoint.harness.agents.model_endpoint import ModelEndpoint
from tests.agents.scripted import PLAN, PLAN_IDS, PLAN_TURNS, Calls, chat_tools, drive, result_of

MODES = ("create", "create-stream", "stream-helper")


def client(endpoint: ModelEndpoint) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{endpoint.url}/v1", api_key="x", max_retries=0)


def ask(endpoint: ModelEndpoint, messages: list[dict[str, Any]], mode: str) -> tuple[Calls, str]:
    """One request in ``mode``, its tool calls and text as the client assembled them."""
    chat: Any = client(endpoint).chat.completions  # the SDK's TypedDict overloads do not take plain dicts
    if mode == "create":
        message = chat.create(model="gpt-test", messages=messages, tools=chat_tools()).choices[0].message
        calls = [(call.id, call.function.name, call.function.arguments) for call in message.tool_calls or []
                 if call.type == "function"]
        return calls, message.content or ""
    if mode == "create-stream":
        chunks = list(chat.create(model="gpt-test", messages=messages, tools=chat_tools(),
                                  stream=True, stream_options={"include_usage": True}))
        assert chunks[-1].choices == [] and chunks[-1].usage is not None
        text = "".join(choice.delta.content or "" for chunk in chunks for choice in chunk.choices)
        parts: dict[int, list[str]] = {}
        for chunk in chunks:
            for choice in chunk.choices:
                for delta in choice.delta.tool_calls or []:
                    part = parts.setdefault(delta.index, ["", "", ""])
                    function = delta.function
                    part[0] += delta.id or ""
                    part[1] += function.name or "" if function else ""
                    part[2] += function.arguments or "" if function else ""
        return [(ident, name, arguments) for ident, name, arguments in (parts[i] for i in sorted(parts))], text
    with chat.stream(model="gpt-test", messages=messages, tools=chat_tools()) as stream:
        final = stream.get_final_completion().choices[0].message
    calls = [(call.id, call.function.name, call.function.arguments) for call in final.tool_calls or []]
    assert all(call.function.parsed_arguments is not None for call in final.tool_calls or [])
    return calls, final.content or ""


def feed(messages: list[dict[str, Any]], calls: Calls) -> None:
    messages.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": ident, "type": "function", "function": {"name": name, "arguments": arguments}}
        for ident, name, arguments in calls]})
    messages.extend({"role": "tool", "tool_call_id": ident, "content": result_of(name, arguments)}
                    for ident, name, arguments in calls)


@pytest.mark.parametrize("mode", MODES)
def test_the_script_is_followed_to_the_answer_with_parallel_calls(endpoint: ModelEndpoint, mode: str) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Charge order A1 and tell Ann."}]
    tools, ids, answer = drive(lambda: ask(endpoint, messages, mode), lambda calls: feed(messages, calls))
    assert (tools, ids, answer) == (PLAN_TURNS, PLAN_IDS, PLAN["answer"])
    assert [exchange["calls"] for exchange in endpoint.exchanges] == [["c1"], ["c2", "c3"], []]


@pytest.mark.parametrize("mode", MODES)
def test_a_request_sent_again_after_a_restart_gets_the_same_reply(endpoint: ModelEndpoint, mode: str) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    feed(messages, ask(endpoint, messages, mode)[0])
    assert ask(endpoint, messages, mode) == ask(endpoint, messages, mode)
    assert ask(endpoint, messages, mode)[0][0][0] == "call_kp_c2"


def test_a_call_told_unknown_is_probed_then_redone_when_its_effect_is_absent(endpoint: ModelEndpoint) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    feed(messages, ask(endpoint, messages, "create")[0])
    feed(messages, [call for call in ask(endpoint, messages, "create")[0] if call[0] == "call_kp_c3"])
    messages[-2]["tool_calls"].insert(0, {"id": "call_kp_c2", "type": "function", "function": {
        "name": "charge_card", "arguments": json.dumps(PLAN["calls"][1]["args"])}})
    messages.insert(-1, {"role": "tool", "tool_call_id": "call_kp_c2", "content": "outcome unknown"})
    messages.append({"role": "user", "content": "call_kp_c2 may already have run before the interruption; check its "
                                                "effect with read-only tools before redoing it."})
    assert ask(endpoint, messages, "create")[0] == [
        ("call_kp_c2_verify", "verify_effect", '{"tool_call_id": "call_kp_c2"}')]
    probe = [("call_kp_c2_verify", "verify_effect", '{"tool_call_id": "call_kp_c2"}')]
    messages.append({"role": "assistant", "tool_calls": [
        {"id": probe[0][0], "type": "function", "function": {"name": probe[0][1], "arguments": probe[0][2]}}]})
    messages.append({"role": "tool", "tool_call_id": "call_kp_c2_verify", "content": '{"effect_found": false}'})
    redo = ask(endpoint, messages, "create-stream")[0]
    assert redo == [("call_kp_c2_2", "charge_card", json.dumps(PLAN["calls"][1]["args"]))]
    assert endpoint.exchanges[-1]["told_unknown"] == ["c2"] and endpoint.exchanges[-1]["calls"] == ["c2"]
    messages[-1]["content"] = '{"effect_found": true}'
    assert ask(endpoint, messages, "create") == ([], PLAN["answer"])


def test_a_tool_call_without_its_result_gets_the_real_apis_error(endpoint: ModelEndpoint) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    feed(messages, ask(endpoint, messages, "create")[0])
    feed(messages, ask(endpoint, messages, "create")[0])
    del messages[-1]
    with pytest.raises(openai.BadRequestError) as refused:
        ask(endpoint, messages, "create")
    assert refused.value.status_code == 400
    assert refused.value.message.endswith(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        "'tool_call_id'. The following tool_call_ids did not have response messages: call_kp_c3")
    assert endpoint.exchanges[-1]["status"] == 400 and "calls" not in endpoint.exchanges[-1]


def test_a_tool_the_request_does_not_offer_is_a_clear_400(endpoint: ModelEndpoint) -> None:
    tools = [tool for tool in chat_tools() if tool["function"]["name"] != "lookup_order"]
    chat: Any = client(endpoint).chat.completions
    with pytest.raises(openai.BadRequestError, match="must call lookup_order but the request offers charge_card"):
        chat.create(model="m", messages=[{"role": "user", "content": "go"}], tools=tools)
