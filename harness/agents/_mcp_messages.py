"""The few JSON-RPC messages of MCP the recording proxies read or make, shared by the stdio and the HTTP one.

Standard library only: the stdio proxy runs in the agent's process tree, and imports nothing of the harness.
"""

from __future__ import annotations

import json
from typing import Any

VERIFY_TOOL = "verify_effect"
VERIFY_LISTED = {"name": VERIFY_TOOL, "description": "read-only: is the effect of an interrupted tool call in the "
                 "world? Give the interrupted call's tool_call_id.",
                 "inputSchema": {"type": "object", "properties": {"tool_call_id": {"type": "string"}},
                                 "required": ["tool_call_id"]},
                 "annotations": {"readOnlyHint": True, "idempotentHint": True, "destructiveHint": False}}
MAX_TEXT_CHARS = 1 << 20  # of a read's text handed to the harness: a probe looks for a short string in it
ERROR_CHARS = 500


def tool_call(message: Any) -> tuple[Any, Any, Any] | None:
    """(id, tool, arguments) of a ``tools/call`` request; None for any other message."""
    if not isinstance(message, dict) or message.get("method") != "tools/call" or "id" not in message:
        return None
    params = message.get("params")
    return (message["id"], params.get("name"), params.get("arguments", {})) if isinstance(params, dict) else (
        message["id"], None, None)


def outcome(message: Any) -> dict[str, Any]:
    """Whether a reply says the call succeeded, and its error's text where it did not."""
    if not isinstance(message, dict) or "error" in message:
        return {"ok": False, "error": str(message.get("error") if isinstance(message, dict) else message)[
            :ERROR_CHARS]}
    result = message.get("result")
    if not isinstance(result, dict) or result.get("isError"):
        return {"ok": False, "error": json.dumps(result.get("content") if isinstance(result, dict) else result,
                                                 default=str)[:ERROR_CHARS]}
    return {"ok": True}


def text_of(message: Any) -> str:
    """The text a tool's reply carries (its content's text parts), bounded."""
    result = message.get("result") if isinstance(message, dict) else None
    content = result.get("content") if isinstance(result, dict) else None
    parts = [part.get("text") for part in content if isinstance(part, dict)] if isinstance(content, list) else []
    return "".join(part for part in parts if isinstance(part, str))[:MAX_TEXT_CHARS]


def with_verify(message: Any) -> dict[str, Any] | None:
    """The server's answer to ``tools/list`` with ``verify_effect`` added to its last page; None for any other
    message (or a page with more to come)."""
    result = message.get("result") if isinstance(message, dict) else None
    if not isinstance(result, dict) or not isinstance(result.get("tools"), list) or result.get("nextCursor"):
        return None
    return {**message, "result": {**result, "tools": [*result["tools"], VERIFY_LISTED]}}


def tool_result(ident: Any, text: str, *, failed: bool) -> dict[str, Any]:
    """A ``tools/call`` result of one text part (``isError`` when ``failed``)."""
    return {"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": text}], "isError": failed}}
