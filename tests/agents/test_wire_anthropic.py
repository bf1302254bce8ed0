"""The scripted model over Anthropic Messages, read by the official ``anthropic`` client."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from killpoint.harness.agents.model_endpoint import ModelEndpoint
from tests.agents.scripted import PLAN, PLAN_IDS, PLAN_TURNS, Calls, anthropic_tools, drive, result_of

MODES = ("create", "create-stream", "stream-helper")


def client(endpoint: ModelEndpoint) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=endpoint.url, api_key="x", max_retries=0)


def ask(endpoint: ModelEndpoint, messages: list[dict[str, Any]], mode: str) -> tuple[Calls, str]:
    """One request in ``mode``: its tool_use blocks and text as the client assembled them."""
    arguments: dict[str, Any] = {"model": "claude-test", "max_tokens": 1024, "messages": messages,
                                 "tools": anthropic_tools(), "system": "You charge orders."}
    api = client(endpoint).messages
    if mode == "create":
        message = api.create(**arguments)
    elif mode == "create-stream":
        events = list(api.create(**arguments, stream=True))
        assert [events[0].type, events[-1].type] == ["message_start", "message_stop"]
        blocks: dict[int, dict[str, Any]] = {}
        for event in events:
            if event.type == "content_block_start":
                blocks[event.index] = {**event.content_block.to_dict(), "partial": ""}
            elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                blocks[event.index]["partial"] += event.delta.partial_json
            elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                blocks[event.index]["text"] += event.delta.text
        calls = [(block["id"], block["name"], json.dumps(json.loads(block["partial"])))
                 for block in blocks.values() if block["type"] == "tool_use"]
        return calls, "".join(block["text"] for block in blocks.values() if block["type"] == "text")
    else:
        with api.stream(**arguments) as stream:
            message = stream.get_final_message()
    calls = [(block.id, block.name, json.dumps(block.input)) for block in message.content if block.type == "tool_use"]
    assert message.stop_reason == ("tool_use" if calls else "end_turn")
    return calls, "".join(block.text for block in message.content if block.type == "text")


def feed(messages: list[dict[str, Any]], calls: Calls) -> None:
    messages.append({"role": "assistant", "content": [
        {"type": "tool_use", "id": ident, "name": name, "input": json.loads(arguments)}
        for ident, name, arguments in calls]})
    messages.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": ident, "content": result_of(name, arguments)}
        for ident, name, arguments in calls]})


@pytest.mark.parametrize("mode", MODES)
def test_the_script_is_followed_to_the_answer_with_parallel_calls(endpoint: ModelEndpoint, mode: str) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Charge order A1 and tell Ann."}]
    tools, ids, answer = drive(lambda: ask(endpoint, messages, mode), lambda calls: feed(messages, calls))
    assert (tools, ids, answer) == (PLAN_TURNS, PLAN_IDS, PLAN["answer"])


def test_a_request_sent_again_after_a_restart_gets_the_same_reply(endpoint: ModelEndpoint) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    assert ask(endpoint, messages, "create") == ask(endpoint, messages, "stream-helper")
    assert ask(endpoint, messages, "create-stream")[0][0][0] == "call_kp_c1"


def test_a_result_marked_unknown_is_probed_then_redone_when_its_effect_is_absent(endpoint: ModelEndpoint) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    feed(messages, ask(endpoint, messages, "create")[0])
    feed(messages, ask(endpoint, messages, "create")[0])
    messages[-1]["content"][1]["content"] = "unknown: send_email may already have run"
    probe = ask(endpoint, messages, "create-stream")[0]
    assert probe == [("call_kp_c3_verify", "verify_effect", '{"tool_call_id": "call_kp_c3"}')]
    feed(messages, probe)
    messages[-1]["content"][0]["content"] = [{"type": "text", "text": '{"effect_found": false}'}]
    redo = ask(endpoint, messages, "stream-helper")[0]
    assert [call[:2] for call in redo] == [("call_kp_c3_2", "send_email")]
    feed(messages, redo)
    assert ask(endpoint, messages, "create") == ([], PLAN["answer"])


def test_a_tool_use_without_its_result_gets_the_real_apis_error(endpoint: ModelEndpoint) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    feed(messages, ask(endpoint, messages, "create")[0])
    messages[-1] = {"role": "user", "content": "carry on"}
    with pytest.raises(anthropic.BadRequestError) as refused:
        ask(endpoint, messages, "create")
    assert refused.value.body["error"]["message"] == (  # type: ignore[index]
        "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: call_kp_c1. Each "
        "`tool_use` block must have a corresponding `tool_result` block in the next message.")
    assert refused.value.body["type"] == "error"  # type: ignore[index]

