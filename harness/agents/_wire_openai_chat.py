"""OpenAI Chat Completions (POST /v1/chat/completions) as the ``openai`` SDK parses it, streaming and not.

A tool call is an entry of the assistant message's ``tool_calls`` (several: parallel calls), its result a ``tool``
message; a stream is ``chat.completion.chunk`` objects ending with ``data: [DONE]``, with a last usage-only chunk
when ``stream_options.include_usage`` asks for it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence

from killpoint.harness.agents._wire import (Answer, Request, WireError, content_text, digest, invalid_type,
                                            openai_content, openai_error_body, openai_string, pieces, require, sse,
                                            tool_names, usage_counts)
from killpoint.harness.agents.script import Event, Reply, Text, ToolCall, ToolResult, quoted


class ChatCompletions:
    name = "chat"
    path = "/v1/chat/completions"

    def parse(self, body: Mapping[str, object]) -> Request:
        model = require(body, "model", str, WireError(400, "you must provide a model parameter"))
        messages = require(body, "messages", list, WireError(
            400, "Missing required parameter: 'messages'.", param="messages", code="missing_required_parameter"))
        assert isinstance(model, str) and isinstance(messages, list)
        for index, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise WireError(400, f"Invalid type for 'messages[{index}]': expected an object with a 'role'.",
                                param=f"messages[{index}]", code="invalid_type")
            _check_types(message, f"messages[{index}]")
        _check_results(messages)
        conversation = tuple(event for message in messages for event in _events(message))
        return Request(model, body.get("stream") is True, conversation, tool_names(body.get("tools"), "function"),
                       body)

    def answer(self, request: Request, reply: Reply) -> Answer:
        ident = f"chatcmpl-kp{digest(request.conversation, reply.calls, reply.text)}"
        usage = _usage(request, reply)
        if not request.stream:
            message: dict[str, object] = {"role": "assistant", "content": reply.text, "refusal": None,
                                          "annotations": []}
            if reply.calls:
                message["tool_calls"] = [_tool_call(call.tool_call_id, call.tool, call.arguments)
                                         for call in reply.calls]
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish(reply)}
            return Answer(body={"id": ident, "object": "chat.completion", "created": int(time.time()),
                                "model": request.model, "choices": [choice], "usage": usage,
                                "service_tier": "default", "system_fingerprint": None})
        options = request.body.get("stream_options")
        with_usage = isinstance(options, dict) and options.get("include_usage") is True
        base = {"id": ident, "object": "chat.completion.chunk", "created": int(time.time()), "model": request.model,
                "service_tier": "default", "system_fingerprint": None}
        if with_usage:
            base["usage"] = None

        def chunk(delta: Mapping[str, object], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return sse({**base, "choices": [choice]})

        events = [chunk(delta) for delta in _deltas(reply)] + [chunk({}, _finish(reply))]
        if with_usage:
            events.append(sse({**base, "choices": [], "usage": usage}))
        events.append(sse("[DONE]"))
        return Answer(events=tuple(events))

    def error_body(self, error: WireError) -> dict[str, object]:
        return openai_error_body(error)


def _check_types(message: Mapping[str, object], where: str) -> None:
    """Refuse, naming the field as the real API does, what it refuses as the wrong JSON type: content, a tool
    message's ``tool_call_id``, an assistant's ``tool_calls`` and their ids, names and arguments. An id that is
    not a string would otherwise reach the set of awaited ids (a list there is a TypeError, not an answer)."""
    openai_content(message, "content", where)
    if message["role"] == "tool":
        openai_string(message, "tool_call_id", where)
    calls = message.get("tool_calls")
    if message["role"] != "assistant" or calls is None:
        return
    if not isinstance(calls, list):
        raise invalid_type(f"{where}.tool_calls", "an array of objects", calls)
    for number, call in enumerate(calls):
        at = f"{where}.tool_calls[{number}]"
        if not isinstance(call, dict):
            raise invalid_type(at, "an object", call)
        openai_string(call, "id", at)
        function = call.get("function")
        if function is not None:
            if not isinstance(function, dict):
                raise invalid_type(f"{at}.function", "an object", function)
            openai_string(function, "name", f"{at}.function")
            openai_string(function, "arguments", f"{at}.function", default="")


def _events(message: Mapping[str, object]) -> Iterator[Event]:
    role = str(message["role"])
    if role == "tool":
        yield ToolResult(str(message["tool_call_id"]), content_text(message.get("content")))
        return
    text = content_text(message.get("content"))
    if text:
        yield Text(role, text)
    calls = message.get("tool_calls")
    for call in calls if role == "assistant" and isinstance(calls, list) else ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            yield ToolCall(str(call.get("id")), str(function.get("name")), str(function.get("arguments", "")))


def _check_results(messages: Sequence[Mapping[str, object]]) -> None:
    """Refuse what the real API refuses: tool calls not answered by the tool messages right after them, and a
    tool message that answers no such call."""
    awaited: set[str] = set()
    for index, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            if message.get("tool_call_id") not in awaited:
                raise WireError(400, "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                                     "message with 'tool_calls'.", param=f"messages.[{index}].role")
            awaited.discard(str(message.get("tool_call_id")))
            continue
        if awaited:
            _missing_results(index - 1, awaited, messages)
        calls = message.get("tool_calls")
        if role == "assistant" and isinstance(calls, list):
            awaited = {str(call.get("id")) for call in calls if isinstance(call, dict)}
    if awaited:
        _missing_results(len(messages) - 1, awaited, messages)


def _missing_results(last: int, awaited: set[str], messages: Sequence[Mapping[str, object]]) -> None:
    """The real API's 400 for tool calls left unanswered; their ids (the agent's) quoted bounded."""
    caller = max(index for index in range(last + 1) if messages[index]["role"] == "assistant")
    raise WireError(400, "An assistant message with 'tool_calls' must be followed by tool messages responding to "
                         "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                         + quoted(sorted(awaited)), param=f"messages.[{caller}].role")


def _tool_call(ident: str, name: str, arguments: str) -> dict[str, object]:
    return {"id": ident, "type": "function", "function": {"name": name, "arguments": arguments}}


def _finish(reply: Reply) -> str:
    return "tool_calls" if reply.calls else "stop"


def _deltas(reply: Reply) -> Iterator[Mapping[str, object]]:
    """The chunks' deltas: the role, then each tool call's id and name followed by its arguments in pieces (or
    the answer's text in pieces)."""
    if not reply.calls:
        yield {"role": "assistant", "content": "", "refusal": None}
        for piece in pieces(reply.text or ""):
            yield {"content": piece}
        return
    yield {"role": "assistant", "content": None, "refusal": None}
    for index, call in enumerate(reply.calls):
        yield {"tool_calls": [{"index": index, **_tool_call(call.tool_call_id, call.tool, "")}]}
        for piece in pieces(call.arguments):
            yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}


def _usage(request: Request, reply: Reply) -> dict[str, object]:
    prompt, completion = usage_counts(request, reply)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
