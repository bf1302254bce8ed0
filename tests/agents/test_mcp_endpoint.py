"""The fake tools as an MCP server over streamable HTTP, driven by the official MCP SDK's client (which parses
strictly) in both protocols it speaks: a call takes the tool service's one path, seams and ledger included."""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.client import Client

from killpoint import protocol as p
from killpoint.harness.agents.mcp_endpoint import ANNOTATIONS, PATH
from killpoint.harness.agents.seams import TOOL_EFFECT, TOOL_REQUEST
from killpoint.harness.agents.tool_service import VERIFY_TOOL, ToolService
from tests.agents.test_tool_service import PLAN, ledger_lines

CLASSES = {"read_file": p.READ_ONLY, "append": p.NON_IDEMPOTENT}
MODES = ["auto", "legacy", "2026-07-28"]  # discover then the stateless protocol; the handshake; stateless outright


def session(url: str, mode: str, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[Any], list[Any]]:
    """What the SDK's client lists, and what each of ``calls`` returns, in one session."""

    async def run() -> tuple[list[Any], list[Any]]:
        async with Client(url, mode=mode) as client:
            listed = (await client.list_tools()).tools
            return listed, [await client.call_tool(name, arguments) for name, arguments in calls]

    return anyio.run(run)


@pytest.mark.parametrize("mode", MODES)
def test_the_plans_tools_and_the_probe_are_listed_annotated_by_their_class(world, tmp_path, mode):
    with ToolService(PLAN, world, tmp_path / "ledger.jsonl", classes=CLASSES) as tools:
        tools.begin(0)
        listed, _ = session(f"{tools.url}{PATH}", mode, [])
    by_name = {tool.name: tool for tool in listed}
    assert set(by_name) == {"read_file", "append", VERIFY_TOOL}
    for name, tool_class in (*CLASSES.items(), (VERIFY_TOOL, p.READ_ONLY)):
        hints = by_name[name].annotations
        assert (hints.read_only_hint, hints.idempotent_hint, hints.destructive_hint) == tuple(
            ANNOTATIONS[tool_class][key] for key in ("readOnlyHint", "idempotentHint", "destructiveHint")), name
    assert by_name["append"].input_schema["type"] == "object"


@pytest.mark.parametrize("mode", MODES)
def test_a_call_acts_once_writes_the_ledger_and_passes_its_seams(world, tmp_path, mode):
    seen: list[tuple[str, tuple[str, ...]]] = []
    ledger = tmp_path / "ledger.jsonl"
    with ToolService(PLAN, world, ledger, lambda point, calls, _: seen.append((point, calls)), classes=CLASSES) as tools:
        tools.begin(0)
        _, (appended, read) = session(f"{tools.url}{PATH}", mode, [
            ("append", {"path": "log.txt", "text": "one\n"}), ("read_file", {"path": "notes.txt"})])
    assert not appended.is_error and not read.is_error
    assert "tea" in read.content[0].text
    assert (world / "files" / "log.txt").read_text() == "one\n"
    assert [(line.get("invoked"), line.get("call")) for line in ledger_lines(ledger) if "invoked" in line] == [
        ("append", "c2"), ("read_file", "c1")]
    assert [point for point, calls in seen if calls == ("c2",)][:2] == [TOOL_REQUEST, TOOL_EFFECT]
    assert (TOOL_REQUEST, ("c1",)) in seen and seen.index((TOOL_REQUEST, ("c1",))) > seen.index((TOOL_EFFECT, ("c2",)))


def test_a_call_the_plan_does_not_hold_is_an_error_result_and_acts_on_nothing(world, tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    with ToolService(PLAN, world, ledger, classes=CLASSES) as tools:
        tools.begin(0)
        _, (stray,) = session(f"{tools.url}{PATH}", "auto", [("append", {"path": "log.txt", "text": "two\n"})])
    assert stray.is_error and "no planned call of append with these arguments" in stray.content[0].text
    assert not (world / "files" / "log.txt").exists() and ledger_lines(ledger) == []


def test_the_probe_answers_over_mcp_as_over_http(world, tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    with ToolService(PLAN, world, ledger, classes=CLASSES) as tools:
        tools.begin(0)
        _, (done, probed) = session(f"{tools.url}{PATH}", "legacy", [
            ("append", {"path": "log.txt", "text": "one\n"}), (VERIFY_TOOL, {"tool_call_id": "call_kp_c2"})])
    assert not done.is_error and json.loads(probed.content[0].text) == {"effect_found": True}
    assert any(line.get("probe") == "effect_present" and line.get("call") == "c2" for line in ledger_lines(ledger))


def raw(url: str, body: bytes, method: str = "POST") -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body if method == "POST" else None, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.parametrize(("body", "status", "code"), [
    (b'{"jsonrpc": "2.0", "method": "notifications/initialized"}', 202, None),
    (b'{"jsonrpc": "2.0", "id": 7, "method": "resources/list"}', 200, -32601),
    (b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": 3}}', 200, -32602),
    (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', 400, -32600),
    (b'{"id": 1, "method": "ping"}', 400, -32600),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', 400, -32700),
])
def test_a_message_that_is_no_request_gets_the_error_the_specification_gives_it(world, tmp_path, body, status, code):
    with ToolService(PLAN, world, tmp_path / "ledger.jsonl") as tools:
        tools.begin(0)
        answered, data = raw(f"{tools.url}{PATH}", body)
        assert raw(f"{tools.url}{PATH}", b"", method="GET")[0] == 405  # no stream from the server is offered
    assert answered == status
    assert (json.loads(data)["error"]["code"] if data else None) == code
    assert ledger_lines(tmp_path / "ledger.jsonl") == []


@pytest.mark.integration  # starts the shim as a process, as an agent starts a stdio server
@pytest.mark.parametrize("mode", ["handshake", "stateless"])
def test_the_stdio_shim_an_agent_starts_forwards_every_call_to_the_harness(world, tmp_path, mode):
    """The SDK's stdio client starts the shim as its child, as an agent starts a stdio MCP server; what the calls
    did is in the ledger the harness wrote, and the shim keeps nothing."""
    ledger = tmp_path / "ledger.jsonl"

    async def run(url: str) -> tuple[list[str], Any]:
        server = StdioServerParameters(command=sys.executable, args=["-m", "killpoint.harness.agents.mcp_stdio"],
                                       env={**os.environ, p.ENV_MCP_URL: url})
        async with stdio_client(server) as (read, write), ClientSession(read, write) as client:
            if mode == "handshake":
                await client.initialize()
            listed = [tool.name for tool in (await client.list_tools()).tools]
            return listed, await client.call_tool("append", {"path": "log.txt", "text": "one\n"})

    with ToolService(PLAN, world, ledger, classes=CLASSES) as tools:
        tools.begin(0)
        listed, appended = anyio.run(run, f"{tools.url}{PATH}")
    assert set(listed) == {"read_file", "append", VERIFY_TOOL} and not appended.is_error
    assert [line.get("invoked") for line in ledger_lines(ledger) if "invoked" in line] == ["append"]
    assert (world / "files" / "log.txt").read_text() == "one\n"
