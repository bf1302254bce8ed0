"""What the three wire formats share: the parsed request, the answer to write, the API error, SSE framing.

Each API module (``_wire_openai_chat``, ``_wire_openai_responses``, ``_wire_anthropic``) turns a request body
into a ``Request`` holding the neutral conversation, and a ``Reply`` into an ``Answer``; the endpoint does the
HTTP and the script the deciding, so a wire module is only the translation its SDK parses strictly.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from killpoint.errors import InternalError
from killpoint.harness.agents.script import Conversation, Reply

# How many characters one streamed delta carries: small enough that every reply is split, as real ones are.
DELTA_CHARS = 16
# The most one request body may hold (16 MiB: a long conversation fits; more is refused, 413, never read into
# memory), and so the most a conversation the Responses API rebuilds from ``previous_response_id`` may hold.
MAX_BODY_BYTES = 1 << 24


class WireError(InternalError):
    """A request the real API would refuse: its HTTP status, message and the fields of its error JSON."""

    def __init__(self, status: int, message: str, *, kind: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.code = code

    def __reduce__(self) -> tuple[Any, ...]:
        return _wire_error, (self.status, self.message, self.kind, self.param, self.code)


@dataclass(frozen=True)
class Request:
    """A model request as the script needs it: the conversation, the tools offered, and how to answer."""

    model: str
    stream: bool
    conversation: Conversation
    tools: frozenset[str]
    body: Mapping[str, object] = field(hash=False)


@dataclass(frozen=True)
class Answer:
    """The reply to write: a JSON body, or (streaming) the server-sent events, each already framed."""

    body: Mapping[str, object] | None = None
    events: tuple[bytes, ...] = ()


class Api(Protocol):
    """One wire format: the route it serves, its parsing, its answer and its error JSON."""

    name: str
    path: str

    def parse(self, body: Mapping[str, object]) -> Request: ...

    def answer(self, request: Request, reply: Reply) -> Answer: ...

    def error_body(self, error: WireError) -> dict[str, object]: ...


def openai_error_body(error: WireError) -> dict[str, object]:
    """The error JSON of both OpenAI APIs."""
    return {"error": {"message": error.message, "type": error.kind, "param": error.param, "code": error.code}}


def sse(data: Mapping[str, object] | str, event: str | None = None) -> bytes:
    """One server-sent event as the APIs frame it: an optional ``event:`` line, one ``data:`` line, a blank line."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def pieces(text: str) -> list[str]:
    """``text`` cut into the deltas a stream carries (one empty piece for empty text, so a delta is still sent)."""
    return [text[start:start + DELTA_CHARS] for start in range(0, len(text), DELTA_CHARS)] or [""]


def content_text(content: object) -> str:
    """The text of a message's content in any of the formats: a string, or a list of parts with ``text``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part["text"] for part in content
                         if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def digest(*parts: object) -> str:
    """A short stable id for a reply to a conversation: the same request answered twice gets the same ids."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode()).hexdigest()[:24]


def usage_counts(request: Request, reply: Reply) -> tuple[int, int]:
    """Rough (prompt, completion) token counts for the usage fields: SDKs read them, nothing judges them."""
    prompt = sum(len(str(event)) for event in request.conversation) // 4
    return max(1, prompt), max(1, len(reply.text or "".join(call.arguments for call in reply.calls)) // 4)


def require(body: Mapping[str, object], name: str, kind: type, error: WireError) -> object:
    """``body[name]`` when present and of ``kind``, else ``error`` (each API words its own)."""
    value = body.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise error
    return value


def json_kind(value: object) -> str:
    """A JSON value's type as the OpenAI APIs name it in an error ("an integer", "an array", ...)."""
    if value is None:
        return "null"
    kinds = ((bool, "a boolean"), (int, "an integer"), (float, "a decimal"), (str, "a string"), (list, "an array"))
    return next((name for kind, name in kinds if isinstance(value, kind)), "an object")


def invalid_type(field: str, expected: str, value: object) -> WireError:
    """The OpenAI APIs' 400 for a field of the wrong JSON type."""
    return WireError(400, f"Invalid type for '{field}': expected {expected}, but got {json_kind(value)} instead.",
                     param=field, code="invalid_type")


def openai_string(holder: Mapping[str, object], key: str, where: str, default: str | None = None) -> str:
    """``holder[key]`` when it is a string (``default`` when absent and there is one), else the OpenAI APIs' 400
    naming ``where.key``: an id, a name or a role of another JSON type must not reach the code that hashes,
    compares and quotes them as strings."""
    field = f"{where}.{key}"
    if key not in holder:
        if default is not None:
            return default
        raise WireError(400, f"Missing required parameter: '{field}'.", param=field,
                        code="missing_required_parameter")
    value = holder[key]
    if not isinstance(value, str):
        raise invalid_type(field, "a string", value)
    return value


def openai_content(holder: Mapping[str, object], key: str, where: str) -> None:
    """Refuse, as the OpenAI APIs do, content that is neither absent, null, a string nor an array of objects (a
    part's ``text`` a string): ``content_text`` would otherwise read it as no text at all."""
    content = holder.get(key)
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        raise invalid_type(f"{where}.{key}", "one of a string or array of objects", content)
    for number, part in enumerate(content):
        if not isinstance(part, dict):
            raise invalid_type(f"{where}.{key}[{number}]", "an object", part)
        if "text" in part and not isinstance(part["text"], str):
            raise invalid_type(f"{where}.{key}[{number}].text", "a string", part["text"])


def tool_names(tools: object, name_of: str | None = None) -> frozenset[str]:
    """The names of the function tools a request offers (``name_of``: the key holding the name's table)."""
    names = set()
    for tool in tools if isinstance(tools, list) else ():
        holder = tool.get(name_of) if name_of and isinstance(tool, dict) else tool
        if isinstance(holder, dict) and isinstance(holder.get("name"), str):
            names.add(holder["name"])
    return frozenset(names)


def _wire_error(status: int, message: str, kind: str, param: str | None, code: str | None) -> WireError:
    """A ``WireError`` unpickled (its keyword arguments are not in ``args``)."""
    return WireError(status, message, kind=kind, param=param, code=code)
