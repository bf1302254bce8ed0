"""The fake tools as an MCP server over streamable HTTP, on the tool service's own port: ``POST {url}/mcp``.

An agent that takes its tools from an MCP server is pointed at
``$KILLPOINT_MCP_URL``. Every ``tools/call`` goes through the tool service's
one path (``ToolService.handle``): it is attributed to a planned call by its
arguments, held at the same seams (request received, effect committed, reply
sent), and its invocation and effect are written to the ledger by the
harness, outside the agent's process tree. ``tools/list`` lists the plan's
tools and ``verify_effect``, each with the annotations its class in the
scenario's catalogue gives (``tool_annotations``).

The server answers both protocols the pinned SDK speaks: the handshake one
(``initialize``, then requests; no session id is handed out, so a client keeps
no session and opens no stream) and the stateless one (``server/discover``,
then requests carrying their version in ``_meta``), with results shaped for
both. Replies are JSON, never a stream. A tool that fails, or a call the plan
does not hold, is a result with ``isError`` (an MCP client raises on a
JSON-RPC error); a message that is not JSON-RPC is answered with the error the
specification gives it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from killpoint import protocol as p

PATH = "/mcp"
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
STATELESS_VERSION = "2026-07-28"
SERVER_INFO = {"name": "killpoint-fake-tools", "version": "1"}  # this server's version, as the OpenAPI document's
CAPABILITIES = {"tools": {"listChanged": False}}
# What a stateless-protocol client requires of a result, and a handshake client ignores.
COMPLETE = {"resultType": "complete"}
UNCACHED = {**COMPLETE, "ttlMs": 0, "cacheScope": "private"}
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602

# A tool's MCP annotations by its class: READ_ONLY reads, IDEMPOTENT_WRITE may overwrite but a repeat changes
# nothing more, NON_IDEMPOTENT and UNKNOWN get the specification's cautious defaults said outright.
ANNOTATIONS: dict[str, dict[str, bool]] = {
    p.READ_ONLY: {"readOnlyHint": True, "idempotentHint": True, "destructiveHint": False},
    p.IDEMPOTENT_WRITE: {"readOnlyHint": False, "idempotentHint": True, "destructiveHint": True},
    p.NON_IDEMPOTENT: {"readOnlyHint": False, "idempotentHint": False, "destructiveHint": True},
    p.UNKNOWN: {"readOnlyHint": False, "idempotentHint": False, "destructiveHint": True},
}

# (status, JSON-RPC message or None for an empty body) -> None: how the HTTP handler answers.
Send = Callable[[int, "dict[str, Any] | None"], None]
# (tool, arguments, reply(status, body)) -> None: the tool service's one path for a tool request.
Handle = Callable[[str, Any, Callable[[int, dict[str, Any]], None]], None]


def tool_annotations(tool_class: str) -> dict[str, bool]:
    return dict(ANNOTATIONS.get(tool_class, ANNOTATIONS[p.UNKNOWN]))


def listed_tool(name: str, description: str, schema: dict[str, Any], tool_class: str) -> dict[str, Any]:
    """One entry of ``tools/list``."""
    return {"name": name, "description": description, "inputSchema": schema,
            "annotations": tool_annotations(tool_class)}


def answer(message: Any, tools: list[dict[str, Any]], handle: Handle, send: Send) -> None:
    """Answer one JSON-RPC message posted to ``PATH``; a ``tools/call`` through ``handle``."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        if isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message):
            send(202, None)  # a client's answer to a request this server never sends
            return
        send(400, _error(message.get("id") if isinstance(message, dict) else None, INVALID_REQUEST,
                         "not a JSON-RPC 2.0 request (one object with \"jsonrpc\": \"2.0\" and a \"method\"; "
                         "batches are not read)"))
        return
    if "id" not in message:
        send(202, None)  # a notification: nothing to answer
        return
    ident, method, params = message["id"], message["method"], message.get("params") or {}
    if not isinstance(params, dict):
        send(200, _error(ident, INVALID_PARAMS, "params must be an object"))
        return
    if method == "tools/call":
        _call(ident, params, handle, send)
        return
    result = _result(method, params, tools)
    send(200, _error(ident, METHOD_NOT_FOUND, f"method not found: {method[:200]}") if result is None
         else {"jsonrpc": "2.0", "id": ident, "result": result})


def _result(method: str, params: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    if method == "initialize":
        asked = params.get("protocolVersion")
        return {"protocolVersion": asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1],
                "capabilities": CAPABILITIES, "serverInfo": SERVER_INFO}
    if method == "server/discover":
        return {"supportedVersions": [STATELESS_VERSION], "capabilities": CAPABILITIES, **UNCACHED,
                "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": tools, **UNCACHED}
    return None


def _call(ident: Any, params: dict[str, Any], handle: Handle, send: Send) -> None:
    name, arguments = params.get("name"), params.get("arguments", {})
    if not isinstance(name, str) or not isinstance(arguments, dict):
        send(200, _error(ident, INVALID_PARAMS, "tools/call takes {\"name\": TOOL, \"arguments\": {...}}"))
        return

    def reply(status: int, body: dict[str, Any]) -> None:
        """The tool service's answer as a tool result: its output as text, its failure as ``isError``."""
        failed = status != 200 or not body.get("ok")
        text = str(body.get("error")) if failed else _text(body.get("output"))
        send(200, {"jsonrpc": "2.0", "id": ident, "result": {
            "content": [{"type": "text", "text": text}], "isError": failed, **COMPLETE}})

    handle(name, arguments, reply)


def _text(output: Any) -> str:
    return output if isinstance(output, str) else json.dumps(output, default=str)


def _error(ident: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}


def parse_error(reason: str) -> dict[str, Any]:
    return _error(None, PARSE_ERROR, f"the body is not one JSON value: {reason}")

