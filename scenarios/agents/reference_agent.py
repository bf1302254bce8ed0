"""The reference agent: a plain ``openai`` chat loop with a journal of its own that obeys the recovery rules.

It is what an agent judged at its network seams should do, written the way a
user writes an agent: the model is asked what to do (``OPENAI_BASE_URL``, here
killpoint's scripted model), tools are HTTP calls (``KILLPOINT_TOOLS_URL``, here
killpoint's tool service, described by its OpenAPI document), and the
conversation is the agent's durable state: every message is appended to
``agent-journal.jsonl`` in ``$KILLPOINT_RUN_DIR`` and fsynced (the folder too,
when the journal is created) before the agent acts on it; a model reply that
calls tools is journaled with each tool's class as the catalogue said when the
model chose it. A restart rebuilds the conversation from the journal; a tool
call the journal holds no result for was interrupted, and the agent, by the
class journaled with it (the catalogue may have changed since: a class is the
call's, fixed when it started):

- READ_ONLY or IDEMPOTENT_WRITE: calls it again (RETRY);
- NON_IDEMPOTENT or UNKNOWN (and any tool the catalogue does not list): tells
  the model, as the call's result, that it may already have run and its
  outcome is unknown (VERIFY): the model checks with a read-only tool before
  asking for it again.

A journal line cut by the kill (no newline) is ignored: it was never durable.

With ``--server CMD [ARG...]`` its tools are a real stdio MCP server's instead,
started behind killpoint's recording proxy (``{world}`` in its arguments being
the folder it is to act on), and spoken to over a plain JSON-RPC pipe
(``McpStdioTools``); with ``--mcp-http``, the MCP server at ``$KILLPOINT_MCP_URL``
over streamable HTTP (``McpHttpTools``: the scenario's own server behind the
harness, ``[agent.mcp_server]``). Either way killpoint adds ``verify_effect``,
answered with the server's own read the scenario names.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from openai import OpenAI

JOURNAL_NAME = "agent-journal.jsonl"
MODEL = "killpoint-scripted"
INTERRUPTED = ("interrupted: this call may already have run before the agent was killed, and its outcome is "
               "unknown; check with read-only tools before redoing it")
RETRIED_CLASSES = ("READ_ONLY", "IDEMPOTENT_WRITE")
MAX_TURNS = 100


class Journal:
    """The conversation, one ``{"message", "classes"}`` line per message, each fsynced before the agent acts on it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.messages: list[Any] = []
        self.classes: dict[str, str] = {}  # tool_call_id -> the class of its tool when the model chose it
        if path.exists():
            *whole, _torn = path.read_bytes().split(b"\n")
            for line in filter(None, whole):
                record = json.loads(line)
                self.messages.append(record["message"])
                self.classes.update(record.get("classes", {}))

    def append(self, message: dict[str, Any], classes: dict[str, str] | None = None) -> None:
        created = not self.path.exists()
        with open(self.path, "ab") as journal:
            journal.write(json.dumps({"message": message, "classes": classes or {}}).encode() + b"\n")
            journal.flush()
            os.fsync(journal.fileno())
        if created:  # the new name is durable only once its folder is
            folder = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
        self.messages.append(message)
        self.classes.update(classes or {})


class Tools(Protocol):
    """Where the agent's tools are: their definitions for the model, and a call's result as text."""

    def definitions(self) -> Any: ...

    def call(self, name: str, arguments: str) -> str: ...


class HttpTools:
    """The tool service: its OpenAPI operations as the model's function tools, a call as one POST."""

    def __init__(self, url: str) -> None:
        self.url = url

    def definitions(self) -> Any:
        with urllib.request.urlopen(f"{self.url}/openapi.json", timeout=60) as response:
            document = json.load(response)
        return [{"type": "function", "function": {
            "name": operation["operationId"], "description": operation.get("summary", ""),
            "parameters": operation["requestBody"]["content"]["application/json"]["schema"]}}
            for operation in (path["post"] for path in document["paths"].values())]

    def call(self, name: str, arguments: str) -> str:
        request = urllib.request.Request(f"{self.url}/tools/{name}", data=arguments.encode() or b"{}",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                return response.read().decode()
        except urllib.error.HTTPError as error:  # the service's refusal is the call's result, as a model would see it
            return error.read().decode()


class McpTools:
    """An MCP server's tools over JSON-RPC: ``initialize``, ``tools/list`` (every page), ``tools/call``; how a
    message travels is the transport's (``McpStdioTools``, ``McpHttpTools``)."""

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "reference-agent", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        raise NotImplementedError

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The answer to one request (a JSON-RPC error as ``{"error": ...}``)."""
        raise NotImplementedError

    def definitions(self) -> Any:
        tools: list[dict[str, Any]] = []
        cursor = None
        while True:
            result = self.request("tools/list", {"cursor": cursor} if cursor else {})["result"]
            tools += result["tools"]
            cursor = result.get("nextCursor")
            if not cursor:
                break
        return [{"type": "function", "function": {"name": tool["name"], "description": tool.get("description", ""),
                                                  "parameters": tool["inputSchema"]}} for tool in tools]

    def call(self, name: str, arguments: str) -> str:
        answer = self.request("tools/call", {"name": name, "arguments": json.loads(arguments or "{}")})
        if "error" in answer:
            return json.dumps(answer["error"])
        text = "".join(part.get("text", "") for part in answer["result"].get("content", []))
        return f"error: {text}" if answer["result"].get("isError") else text


class McpStdioTools(McpTools):
    """A stdio MCP server the agent starts: newline-delimited JSON-RPC on its pipes, one request at a time."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        super().__init__()

    def send(self, message: dict[str, Any]) -> None:
        assert self.server.stdin is not None
        self.server.stdin.write(json.dumps(message).encode() + b"\n")
        self.server.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        ident = next(self.ids)
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        assert self.server.stdout is not None
        for line in self.server.stdout:
            message = json.loads(line)
            if message.get("id") == ident and "method" not in message:
                return dict(message)
        raise RuntimeError(f"the MCP server exited before answering {method}")


class McpHttpTools(McpTools):
    """An MCP server over streamable HTTP: one POST a message, its answer JSON or an SSE stream ending in it."""

    def __init__(self, url: str) -> None:
        self.url, self.session = url, ""
        super().__init__()

    def send(self, message: dict[str, Any]) -> None:
        self.post(message)

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        ident = next(self.ids)
        answers = self.post({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        return next(answer for answer in answers if answer.get("id") == ident and "method" not in answer)

    def post(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2025-06-18", **({"Mcp-Session-Id": self.session} if self.session else {})}
        request = urllib.request.Request(self.url, data=json.dumps(message).encode(), headers=headers)
        with urllib.request.urlopen(request, timeout=600) as response:
            self.session = response.headers.get("Mcp-Session-Id") or self.session
            body = response.read().decode()
            if not response.headers.get("Content-Type", "").startswith("text/event-stream"):
                return [json.loads(body)] if body.strip() else []
        return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


def mcp_tools(command: list[str]) -> McpStdioTools:
    """The real server ``command`` behind killpoint's recording proxy, acting on the world's files."""
    world = str(Path(os.environ["KILLPOINT_WORLD"]) / "files")
    return McpStdioTools([sys.executable, "-m", "killpoint.harness.agents.mcp_proxy", "--",
                     *(word.replace("{world}", world) for word in command)],
                    {"PATH": os.environ.get("PATH", ""), "KILLPOINT_MCP_URL": os.environ["KILLPOINT_MCP_URL"]})


def tool_class(catalogue: dict[str, Any], tool: str) -> str:
    return str(catalogue.get("tools", {}).get(tool, catalogue.get("default", "UNKNOWN")))


def unanswered(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool calls of the last assistant message that have no result in the conversation."""
    answered = {message.get("tool_call_id") for message in messages if message.get("role") == "tool"}
    last = next((message for message in reversed(messages) if message.get("role") == "assistant"), None)
    return [call for call in (last or {}).get("tool_calls") or [] if call["id"] not in answered]


def recover(journal: Journal, tools: Tools) -> list[dict[str, Any]]:
    """The results of the interrupted calls, each by its journaled class: a retry's, or the note that it is unknown."""
    results = []
    for interrupted in unanswered(journal.messages):
        content = (tools.call(interrupted["function"]["name"], interrupted["function"]["arguments"])
                   if journal.classes.get(interrupted["id"]) in RETRIED_CLASSES else INTERRUPTED)
        results.append({"role": "tool", "tool_call_id": interrupted["id"], "content": content})
    return results


Recovery = Callable[[Journal, Tools], list[dict[str, Any]]]


def main(recovery: Recovery = recover, arguments: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if arguments is None else arguments
    run_dir = Path(os.environ["KILLPOINT_RUN_DIR"])
    tools: Tools = (mcp_tools(arguments[arguments.index("--server") + 1:]) if "--server" in arguments
                    else McpHttpTools(os.environ["KILLPOINT_MCP_URL"]) if "--mcp-http" in arguments
                    else HttpTools(os.environ["KILLPOINT_TOOLS_URL"]))
    catalogue = json.loads(Path(os.environ["KILLPOINT_CATALOGUE"]).read_text())
    task = json.loads(Path(os.environ["KILLPOINT_PLAN"]).read_text()).get("task_id", "the task")
    journal = Journal(run_dir / JOURNAL_NAME)
    definitions = tools.definitions()
    client = OpenAI(max_retries=0)
    if not journal.messages:
        journal.append({"role": "user", "content": f"Carry out {task}."})
    for result in recovery(journal, tools):
        journal.append(result)
    for _ in range(MAX_TURNS):
        reply = client.chat.completions.create(model=MODEL, messages=journal.messages,
                                               tools=definitions).choices[0].message
        message = reply.model_dump(exclude_none=True)
        calls = message.get("tool_calls") or []
        journal.append(message, {call["id"]: tool_class(catalogue, call["function"]["name"]) for call in calls})
        if not calls:
            print(reply.content)
            return 0
        for call in calls:
            content = tools.call(call["function"]["name"], call["function"]["arguments"])
            journal.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    print(f"no final answer after {MAX_TURNS} turns", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
