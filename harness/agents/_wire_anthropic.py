"""Anthropic Messages (POST /v1/messages) as the ``anthropic`` SDK parses it, streaming and not.

A tool call is a ``tool_use`` content block (several: parallel calls), its result a ``tool_result`` block of the
next user message; a stream is named events, ``message_start`` ... ``message_stop``, tool input carried as
``input_json_delta`` pieces. Errors are ``{"type": "error", "error": {"type", "message"}}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence

from killpoint.harness.agents._wire import (Answer, Request, WireError, content_text, digest, pieces, require, sse,
                                            tool_names, usage_counts)
from killpoint.harness.agents.script import Event, Reply, Text, ToolCall, ToolResult, quoted

# The string fields of each content block the conversation reads (checked, so none is read as another type).
_STRING_FIELDS = {"text": ("text",), "tool_use": ("id", "name"), "tool_result": ("tool_use_id",)}
# The error type each status has in Anthropic's error JSON.
_ERROR_TYPES = {400: "invalid_request_error", 404: "not_found_error", 411: "invalid_request_error",
                413: "request_too_large"}


class Messages:
    name = "messages"
    path = "/v1/messages"

    def parse(self, body: Mapping[str, object]) -> Request:
        model = require(body, "model", str, WireError(400, "model: Field required"))
        messages = require(body, "messages", list, WireError(400, "messages: Field required"))
        require(body, "max_tokens", int, WireError(400, "max_tokens: Field required"))
        assert isinstance(model, str) and isinstance(messages, list)
        for index, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
                raise WireError(400, f"messages.{index}.role: Input should be 'user' or 'assistant'")
            _check_types(message, f"messages.{index}")
        _check_results(messages)
        if not isinstance(body.get("system", ""), (str, list)):
            raise WireError(400, "system: Input should be a valid list")
        system = content_text(body.get("system"))
        conversation = ((Text("system", system),) if system else ()) + tuple(
            event for message in messages for event in _events(message))
        return Request(model, body.get("stream") is True, conversation, tool_names(body.get("tools")), body)

    def answer(self, request: Request, reply: Reply) -> Answer:
        message = {"id": f"msg_kp{digest(request.conversation, reply.calls, reply.text)}", "type": "message",
                   "role": "assistant", "model": request.model, "content": _blocks(reply),
                   "stop_reason": "tool_use" if reply.calls else "end_turn", "stop_sequence": None}
        prompt, completion = usage_counts(request, reply)
        usage = {"input_tokens": prompt, "output_tokens": completion, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        if not request.stream:
            return Answer(body={**message, "usage": usage})
        return Answer(events=tuple(sse(event, str(event["type"])) for event in _stream(message, usage)))

    def error_body(self, error: WireError) -> dict[str, object]:
        kind = _ERROR_TYPES.get(error.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": error.message},
                "request_id": f"req_kp{digest(error.message)}"}


def _check_types(message: Mapping[str, object], where: str) -> None:
    """Refuse, naming the field as the real API does, content of the wrong JSON type: content neither a string
    nor a list of blocks, a block that is not an object, a block's id, name, text or input of another type."""
    if "content" not in message:
        raise WireError(400, f"{where}.content: Field required")
    content = message["content"]
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise WireError(400, f"{where}.content: Input should be a valid list")
    for number, block in enumerate(content):
        at = f"{where}.content.{number}"
        if not isinstance(block, dict):
            raise WireError(400, f"{at}: Input should be a valid dictionary or object to extract fields from")
        kind = block.get("type")
        if not isinstance(kind, str):
            raise WireError(400, f"{at}: Unable to extract tag using discriminator 'type'")
        for key in _STRING_FIELDS.get(kind, ()):
            if not isinstance(block.get(key), str):
                raise WireError(400, f"{at}.{kind}.{key}: " + (
                    "Input should be a valid string" if key in block else "Field required"))
        if kind == "tool_use" and not isinstance(block.get("input", {}), dict):
            raise WireError(400, f"{at}.tool_use.input: Input should be a valid dictionary")
        if kind == "tool_result" and not isinstance(block.get("content", ""), (str, list)):
            raise WireError(400, f"{at}.tool_result.content: Input should be a valid list")


def _events(message: Mapping[str, object]) -> Iterator[Event]:
    role = str(message["role"])
    content = message.get("content")
    if isinstance(content, str):
        yield Text(role, content)
        return
    for block in content if isinstance(content, list) else ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            yield Text(role, block["text"])
        elif kind == "tool_use":
            yield ToolCall(str(block.get("id")), str(block.get("name")), json.dumps(block.get("input", {})))
        elif kind == "tool_result":
            yield ToolResult(str(block.get("tool_use_id")), content_text(block.get("content")))


def _blocks_of(message: Mapping[str, object], kind: str, key: str) -> list[str]:
    content = message.get("content")
    return [str(block.get(key)) for block in content if isinstance(block, dict) and block.get("type") == kind] \
        if isinstance(content, list) else []


def _check_results(messages: Sequence[Mapping[str, object]]) -> None:
    """Refuse what the real API refuses: tool_use blocks whose results are not in the very next message, and
    tool_result blocks answering no tool_use of the message before. The neighbour's ids are a set (a list makes
    n results against n uses n² compares), and the ids refused (the agent's) are quoted bounded."""
    for index, message in enumerate(messages):
        results = _blocks_of(message, "tool_result", "tool_use_id")
        before = set(_blocks_of(messages[index - 1], "tool_use", "id")) if index else set()
        unexpected = [ident for ident in results if ident not in before]
        if unexpected:
            raise WireError(400, f"messages.{index}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                                 f"{quoted(unexpected)}. Each `tool_result` block must have a corresponding "
                                 f"`tool_use` block in the previous message.")
        uses = _blocks_of(message, "tool_use", "id")
        after = set(_blocks_of(messages[index + 1], "tool_result", "tool_use_id")) if index + 1 < len(messages) \
            else set()
        missing = [ident for ident in uses if ident not in after]
        if missing:
            raise WireError(400, f"messages.{index + 1}: `tool_use` ids were found without `tool_result` blocks "
                                 f"immediately after: {quoted(missing)}. Each `tool_use` block must have a "
                                 f"corresponding `tool_result` block in the next message.")


def _blocks(reply: Reply) -> list[dict[str, object]]:
    if not reply.calls:
        return [{"type": "text", "text": reply.text or "", "citations": None}]
    return [{"type": "tool_use", "id": call.tool_call_id, "name": call.tool, "input": dict(call.args)}
            for call in reply.calls]


def _stream(message: Mapping[str, object], usage: Mapping[str, object]) -> Iterator[dict[str, object]]:
    """The events of a streamed message: started empty, each block started, filled by deltas and stopped, then
    the stop reason and usage."""
    yield {"type": "message_start", "message": {**message, "content": [], "stop_reason": None,
                                                "usage": {**usage, "output_tokens": 1}}}
    yield {"type": "ping"}
    blocks = message["content"]
    assert isinstance(blocks, list)
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            yield {"type": "content_block_start", "index": index, "content_block": {**block, "text": ""}}
            deltas = [{"type": "text_delta", "text": piece} for piece in pieces(block["text"])]
        else:
            yield {"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}}
            deltas = [{"type": "input_json_delta", "partial_json": piece}
                      for piece in pieces(json.dumps(block["input"]))]
        for delta in deltas:
            yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    yield {"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
           "usage": {"output_tokens": usage["output_tokens"]}}
    yield {"type": "message_stop"}
