"""OpenAI Responses (POST /v1/responses), the Agents SDK's default, as the ``openai`` SDK parses it.

A tool call is a ``function_call`` output item, its result a ``function_call_output`` input item. A durable
agent may send only its new items plus ``previous_response_id``, so every response sent is kept (bounded) with
the conversation it ends, and the conversation of a request is rebuilt from it; an id never sent gets the real
API's error. A stream is the typed events ``response.created`` ... ``response.completed``, numbered in order.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence

from killpoint.harness.agents._wire import (Answer, Request, WireError, content_text, digest, openai_error_body,
                                            pieces, require, sse, tool_names, usage_counts)
from killpoint.harness.agents.script import ChosenCall, Conversation, Event, Reply, Text, ToolCall, ToolResult

# Responses kept for previous_response_id; the oldest is forgotten past this (an agent that far back gets a 400).
KEPT_RESPONSES = 4096


class Responses:
    name = "responses"
    path = "/v1/responses"

    def __init__(self) -> None:
        self._kept: OrderedDict[str, Conversation] = OrderedDict()
        self._lock = threading.Lock()

    def parse(self, body: Mapping[str, object]) -> Request:
        model = require(body, "model", str, WireError(
            400, "Missing required parameter: 'model'.", param="model", code="missing_required_parameter"))
        raw_input = body.get("input")
        if not isinstance(raw_input, (str, list)):
            raise WireError(400, "Missing required parameter: 'input'.", param="input",
                            code="missing_required_parameter")
        assert isinstance(model, str)
        items = [{"role": "user", "content": raw_input}] if isinstance(raw_input, str) else raw_input
        conversation = self._earlier(body.get("previous_response_id")) + tuple(
            event for item in items if isinstance(item, dict) for event in _events(item))
        _check_outputs(conversation)
        instructions = body.get("instructions")
        if isinstance(instructions, str) and instructions:
            conversation = (Text("system", instructions),) + conversation
        return Request(model, body.get("stream") is True, conversation, tool_names(body.get("tools")), body)

    def answer(self, request: Request, reply: Reply) -> Answer:
        ident = digest(request.conversation, reply.calls, reply.text)
        self._keep(f"resp_kp{ident}", request, reply)
        items = [_function_call(call) for call in reply.calls]
        if reply.text is not None:
            items.append(_message(f"msg_kp{ident}", reply.text))
        response = _response(f"resp_kp{ident}", request, items, _usage(request, reply))
        if not request.stream:
            return Answer(body=response)
        events = _numbered(_stream(response, items, reply.text or ""))
        return Answer(events=tuple(sse(event, str(event["type"])) for event in events))

    def error_body(self, error: WireError) -> dict[str, object]:
        return openai_error_body(error)

    def _earlier(self, previous: object) -> Conversation:
        if previous is None:
            return ()
        with self._lock:
            kept = self._kept.get(previous) if isinstance(previous, str) else None
        if kept is None:
            raise WireError(400, f"Previous response with id '{previous}' not found.", param="previous_response_id",
                            code="previous_response_not_found")
        return kept

    def _keep(self, ident: str, request: Request, reply: Reply) -> None:
        """Remember the conversation this response ends (without the instructions, which the real API does not
        carry over), so a later request may continue it by id."""
        said: tuple[Event, ...] = tuple(ToolCall(call.tool_call_id, call.tool, call.arguments) for call in reply.calls)
        if reply.text is not None:
            said += (Text("assistant", reply.text),)
        instructions = request.body.get("instructions")
        shown = request.conversation[1:] if isinstance(instructions, str) and instructions else request.conversation
        with self._lock:
            self._kept[ident] = shown + said
            self._kept.move_to_end(ident)
            while len(self._kept) > KEPT_RESPONSES:
                self._kept.popitem(last=False)


def _events(item: Mapping[str, object]) -> Iterator[Event]:
    kind = item.get("type", "message")
    if kind == "function_call":
        yield ToolCall(str(item.get("call_id")), str(item.get("name")), str(item.get("arguments", "")))
    elif kind == "function_call_output":
        yield ToolResult(str(item.get("call_id")), content_text(item.get("output")))
    elif kind == "message" and isinstance(item.get("role"), str):
        text = content_text(item.get("content"))
        if text:
            yield Text(str(item["role"]), text)


def _check_outputs(conversation: Sequence[Event]) -> None:
    """Refuse what the real API refuses: a function call with no output after it, an output with no call."""
    called: set[str] = set()
    for event in conversation:
        if isinstance(event, ToolCall):
            called.add(event.id)
        elif isinstance(event, ToolResult):
            if event.id not in called:
                raise WireError(400, f"No tool call found for function call output with call_id {event.id}.",
                                param="input")
            called.discard(event.id)
    if called:
        first = next(event.id for event in conversation if isinstance(event, ToolCall) and event.id in called)
        raise WireError(400, f"No tool output found for function call {first}.", param="input")


def _function_call(call: ChosenCall, status: str = "completed", arguments: str | None = None) -> dict[str, object]:
    return {"id": f"fc_kp_{call.tool_call_id}", "type": "function_call", "status": status,
            "arguments": call.arguments if arguments is None else arguments, "call_id": call.tool_call_id,
            "name": call.tool}


def _message(ident: str, text: str, status: str = "completed") -> dict[str, object]:
    content = [_text_part(text)] if status == "completed" else []
    return {"id": ident, "type": "message", "status": status, "role": "assistant", "content": content}


def _text_part(text: str) -> dict[str, object]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _response(ident: str, request: Request, output: list[dict[str, object]],
              usage: Mapping[str, object]) -> dict[str, object]:
    body = request.body
    return {
        "id": ident, "object": "response", "created_at": int(time.time()), "status": "completed",
        "completed_at": int(time.time()), "error": None, "incomplete_details": None,
        "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
        "model": request.model, "output": output, "parallel_tool_calls": True,
        "previous_response_id": body.get("previous_response_id"), "reasoning": {"effort": None, "summary": None},
        "store": body.get("store", True), "temperature": 1.0, "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools", []), "top_p": 1.0,
        "truncation": "disabled", "usage": usage, "user": None, "metadata": body.get("metadata") or {},
    }


def _stream(response: Mapping[str, object], items: Sequence[Mapping[str, object]],
            text: str) -> Iterator[dict[str, object]]:
    """The events of a streamed response, unnumbered: the response in progress, each output item added, filled
    by deltas and done, then the response completed."""
    in_progress = {**response, "status": "in_progress", "output": [], "usage": None, "completed_at": None}
    yield {"type": "response.created", "response": in_progress}
    yield {"type": "response.in_progress", "response": in_progress}
    for index, item in enumerate(items):
        at = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "function_call":
            yield {"type": "response.output_item.added", "output_index": index,
                   "item": {**item, "status": "in_progress", "arguments": ""}}
            for piece in pieces(str(item["arguments"])):
                yield {"type": "response.function_call_arguments.delta", **at, "delta": piece}
            yield {"type": "response.function_call_arguments.done", **at, "name": item["name"],
                   "arguments": item["arguments"]}
        else:
            yield {"type": "response.output_item.added", "output_index": index,
                   "item": _message(str(item["id"]), text, status="in_progress")}
            part = {**at, "content_index": 0}
            yield {"type": "response.content_part.added", **part, "part": _text_part("")}
            for piece in pieces(text):
                yield {"type": "response.output_text.delta", **part, "delta": piece, "logprobs": []}
            yield {"type": "response.output_text.done", **part, "text": text, "logprobs": []}
            yield {"type": "response.content_part.done", **part, "part": _text_part(text)}
        yield {"type": "response.output_item.done", "output_index": index, "item": item}
    yield {"type": "response.completed", "response": response}


def _numbered(events: Iterator[dict[str, object]]) -> Iterator[dict[str, object]]:
    for number, event in enumerate(events):
        yield {**event, "sequence_number": number}


def _usage(request: Request, reply: Reply) -> dict[str, object]:
    prompt, completion = usage_counts(request, reply)
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion}
