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

from killpoint.harness.agents._loopback import excerpt
from killpoint.harness.agents._wire import (MAX_BODY_BYTES, Answer, Request, WireError, content_text, digest,
                                            invalid_type, openai_content, openai_error_body, openai_string, pieces,
                                            require, sse, tool_names, usage_counts)
from killpoint.harness.agents.script import (QUOTED_CHARS, ChosenCall, Conversation, Event, Reply, Text, ToolCall,
                                             ToolResult)

# Responses kept for previous_response_id; the oldest is forgotten past this many, or past this weight all told
# (an agent that far back gets a 400). Chained conversations share their events, so the weight overcounts.
KEPT_RESPONSES = 4096
KEPT_WEIGHT = 4 * MAX_BODY_BYTES
# What an event weighs besides its strings: about the least JSON an input item takes, so a conversation's weight
# is at most the bytes of one request carrying it whole.
EVENT_WEIGHT = 24


class Responses:
    name = "responses"
    path = "/v1/responses"

    def __init__(self) -> None:
        self._kept: OrderedDict[str, Conversation] = OrderedDict()
        self._weights: dict[str, int] = {}  # the weight (``_weight``) of each kept conversation
        self._kept_weight = 0  # their sum, which KEPT_WEIGHT bounds
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
        earlier, earlier_weight = self._earlier(body.get("previous_response_id"))
        new = tuple(event for index, item in enumerate(items) for event in _events(item, f"input[{index}]"))
        if earlier_weight + _weight(new) > MAX_BODY_BYTES:
            # Each body is bounded, but chained by previous_response_id the conversation the harness holds, scans
            # and hashes would grow without bound: past what one body could carry, it is refused.
            raise WireError(400, "Your input exceeds the context window of this model. Please adjust your input and "
                                 "try again.", param="input", code="context_length_exceeded")
        conversation = earlier + new
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

    def _earlier(self, previous: object) -> tuple[Conversation, int]:
        """The conversation ``previous_response_id`` continues, and its weight; the id (the agent's) quoted
        bounded in the error."""
        if previous is None:
            return (), 0
        if not isinstance(previous, str):
            raise invalid_type("previous_response_id", "a string", previous)
        with self._lock:
            kept = self._kept.get(previous)
            weight = self._weights.get(previous, 0)
        if kept is None:
            raise WireError(400, f"Previous response with id '{excerpt(previous, QUOTED_CHARS)}' not found.",
                            param="previous_response_id", code="previous_response_not_found")
        return kept, weight

    def _keep(self, ident: str, request: Request, reply: Reply) -> None:
        """Remember the conversation this response ends (without the instructions, which the real API does not
        carry over), so a later request may continue it by id; the oldest go past the count or the weight."""
        said: tuple[Event, ...] = tuple(ToolCall(call.tool_call_id, call.tool, call.arguments) for call in reply.calls)
        if reply.text is not None:
            said += (Text("assistant", reply.text),)
        instructions = request.body.get("instructions")
        shown = request.conversation[1:] if isinstance(instructions, str) and instructions else request.conversation
        weight = _weight(shown) + _weight(said)
        with self._lock:
            self._kept_weight += weight - self._weights.get(ident, 0)
            self._kept[ident], self._weights[ident] = shown + said, weight
            self._kept.move_to_end(ident)
            while len(self._kept) > 1 and (len(self._kept) > KEPT_RESPONSES or self._kept_weight > KEPT_WEIGHT):
                oldest, _ = self._kept.popitem(last=False)
                self._kept_weight -= self._weights.pop(oldest)


def _weight(events: Sequence[Event]) -> int:
    """About the bytes of JSON ``events`` take in a request: their strings and ``EVENT_WEIGHT`` each."""
    return sum(EVENT_WEIGHT + (len(event.id) + len(event.name) + len(event.arguments) if isinstance(event, ToolCall)
                               else len(event.id) + len(event.text) if isinstance(event, ToolResult)
                               else len(event.role) + len(event.text)) for event in events)


def _events(item: object, where: str) -> Iterator[Event]:
    """The events of one input item; an item, id, name, role or content of the wrong JSON type is the real API's
    400 naming the field (never read as something else, or quoted whole)."""
    if not isinstance(item, dict):
        raise invalid_type(where, "an object", item)
    kind = item.get("type", "message")
    if not isinstance(kind, str):
        raise invalid_type(f"{where}.type", "a string", kind)
    if kind == "function_call":
        yield ToolCall(openai_string(item, "call_id", where), openai_string(item, "name", where),
                       openai_string(item, "arguments", where, default=""))
    elif kind == "function_call_output":
        call_id = openai_string(item, "call_id", where)
        openai_content(item, "output", where)
        yield ToolResult(call_id, content_text(item.get("output")))
    elif kind == "message":
        role = openai_string(item, "role", where)
        openai_content(item, "content", where)
        text = content_text(item.get("content"))
        if text:
            yield Text(role, text)


def _check_outputs(conversation: Sequence[Event]) -> None:
    """Refuse what the real API refuses: a function call with no output after it, an output with no call."""
    called: set[str] = set()
    for event in conversation:
        if isinstance(event, ToolCall):
            called.add(event.id)
        elif isinstance(event, ToolResult):
            if event.id not in called:
                raise WireError(400, f"No tool call found for function call output with call_id "
                                     f"{excerpt(event.id, QUOTED_CHARS)}.", param="input")
            called.discard(event.id)
    if called:
        first = next(event.id for event in conversation if isinstance(event, ToolCall) and event.id in called)
        raise WireError(400, f"No tool output found for function call {excerpt(first, QUOTED_CHARS)}.",
                        param="input")


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
