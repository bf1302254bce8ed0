"""A small MCP server with an entity store, like ``@modelcontextprotocol/server-memory``: the tests certify it.

``python entities.py WORLD [--memory]``: newline-delimited JSON-RPC on stdin and stdout, spoken by hand (no
SDK: its pydantic schemas would use ``$ref``, and a start costs no import). The store is ``WORLD/entities.json``,
read at start and written whole (a temporary file renamed over it) after each change; with ``--memory`` it is
only in the server's memory, so no file of the world ever shows it. Five tools:

- ``create_entities`` (the creator) adds each named entity not there yet: a replay changes nothing.
- ``add_observations`` appends observations to an entity that exists, and refuses a name that does not: on a
  fresh world every call is refused, and a replay appends them again (NON_IDEMPOTENT, as its hints say).
- ``set_entity_note`` sets an existing entity's note whole, refusing a missing one (``idempotentHint: true``,
  and it keeps it).
- ``read_graph`` (``readOnlyHint: true``) returns the whole store: what shows an effect kept in memory.
- ``uptime`` (``readOnlyHint: true``) returns the seconds since the server started: a read whose answer
  changes by itself, which certify must not take for a view of the store.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

WRITE = {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False}
NAME = {"type": "string"}
TOOLS = [
    {"name": "create_entities", "description": "Create entities (one already there is left as it is).",
     "annotations": {**WRITE, "idempotentHint": True},
     "inputSchema": {"type": "object", "required": ["entities"], "properties": {"entities": {
         "type": "array", "minItems": 1, "items": {"type": "object", "required": ["name", "entityType"],
                                                   "properties": {"name": NAME, "entityType": NAME}}}}}},
    {"name": "add_observations", "description": "Append observations to an existing entity.",
     "annotations": {**WRITE, "idempotentHint": False},
     "inputSchema": {"type": "object", "required": ["entityName", "observations"], "properties": {
         "entityName": NAME, "observations": {"type": "array", "minItems": 1, "items": NAME}}}},
    {"name": "set_entity_note", "description": "Set the note of an existing entity (the whole note).",
     "annotations": {**WRITE, "destructiveHint": True, "idempotentHint": True},
     "inputSchema": {"type": "object", "required": ["entityName", "note"],
                     "properties": {"entityName": NAME, "note": NAME}}},
    {"name": "read_graph", "description": "Read the whole store.",
     "annotations": {"readOnlyHint": True, "openWorldHint": False},
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "uptime", "description": "Seconds since the server started.",
     "annotations": {"readOnlyHint": True, "openWorldHint": False},
     "inputSchema": {"type": "object", "properties": {}}},
]
STARTED = time.monotonic()


class Store:
    """The entities, name -> {type, observations, note}; kept in ``path`` unless it is None (``--memory``)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.entities: dict[str, dict[str, Any]] = (
            json.loads(path.read_text()) if path is not None and path.is_file() else {})

    def save(self) -> None:
        if self.path is None:
            return
        temporary = self.path.with_name(f"{self.path.name}.{secrets.token_hex(8)}.tmp")
        temporary.write_text(json.dumps(self.entities, sort_keys=True))
        os.replace(temporary, self.path)

    def existing(self, name: str) -> dict[str, Any]:
        if name not in self.entities:
            raise ValueError(f"no entity {name!r}; create it first")
        return self.entities[name]

    def call(self, tool: str, args: dict[str, Any]) -> str:
        if tool == "read_graph":
            return json.dumps(self.entities, sort_keys=True)
        if tool == "uptime":
            return f"{time.monotonic() - STARTED:.6f}"
        if tool == "create_entities":
            for entity in args["entities"]:
                self.entities.setdefault(entity["name"], {"type": entity["entityType"], "observations": [], "note": ""})
        elif tool == "add_observations":
            self.existing(args["entityName"])["observations"] += args["observations"]
        elif tool == "set_entity_note":
            self.existing(args["entityName"])["note"] = args["note"]
        else:
            raise ValueError(f"no tool {tool!r}")
        self.save()
        return "done"


def answer(request: dict[str, Any], result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}) + "\n")
    sys.stdout.flush()


def called(store: Store, params: dict[str, Any]) -> dict[str, Any]:
    try:
        text = store.call(params["name"], params.get("arguments") or {})
    except (ValueError, KeyError, TypeError) as error:
        return {"content": [{"type": "text", "text": str(error)}], "isError": True}
    return {"content": [{"type": "text", "text": text}]}


def main() -> None:
    world = Path(sys.argv[1])
    store = Store(None if "--memory" in sys.argv else world / "entities.json")
    for line in sys.stdin:
        request = json.loads(line)
        method = request.get("method")
        if method == "initialize":
            answer(request, {"protocolVersion": request["params"]["protocolVersion"], "capabilities": {"tools": {}},
                             "serverInfo": {"name": "entities", "version": "1"}})
        elif method == "tools/list":
            answer(request, {"tools": TOOLS})
        elif method == "tools/call":
            answer(request, called(store, request["params"]))


if __name__ == "__main__":
    main()
