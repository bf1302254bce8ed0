"""A real MCP server over streamable HTTP behind the harness ([agent.mcp_server]): started once a run, outside the
agent's tree, every message forwarded, each tools/call held at the seams and written to the ledger.

The unit tests drive the forwarding against small HTTP servers in this process (an answer as JSON or as an SSE
stream, one too big, one that never ends); the integration tests run the shipped scenarios, whose notes server
(scenarios/agents/notes_server.py) is the SDK's own MCPServer over streamable HTTP.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from killpoint.harness.agents import mcp_http_proxy
from killpoint.harness.agents.mcp_http_proxy import Answer, HttpServer
from tests.helpers import ROOT
from tests.test_config_errors import assert_usage_error, write

AGENTS = ROOT / "scenarios" / "agents"
REFERENCE = AGENTS / "reference_agent_mcp_http.toml"
AGENTS_SDK = AGENTS / "openai_agents_mcp_http.toml"
SSE = b'event: message\ndata: {"jsonrpc": "2.0", "method": "notifications/progress"}\n\n' \
      b'event: message\ndata: {"jsonrpc": "2.0", "id": 7,\ndata:  "result": {"tools": []}}\n\n'


def test_an_answer_is_read_from_json_or_from_the_last_answer_of_an_sse_stream():
    assert Answer(200, (("content-type", "application/json"),), b'{"jsonrpc": "2.0", "id": 1, "result": {}}'
                  ).message() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    sse = Answer(200, (("content-type", "text/event-stream"),), SSE)
    assert sse.message() == {"jsonrpc": "2.0", "id": 7, "result": {"tools": []}}
    assert json.loads(sse.as_json(sse.message()).body) == sse.message()
    assert Answer(200, (("content-type", "application/json"),), b"not json").message() is None
    assert Answer(200, (("content-type", "text/event-stream"),), b"data: {not json\n\n").message() is None


class Canned(http.server.BaseHTTPRequestHandler):
    """Answers every POST with the class's ``answer``: (status, content type, body chunks, pause between them)."""

    answer: tuple[int, str, list[bytes]] = (200, "application/json", [b"{}"])
    seen: list[dict[str, str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).seen.append(dict(self.headers.items()))
        status, content_type, chunks = self.answer
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Mcp-Session-Id", "s-1")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(chunk)
            self.wfile.flush()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def canned(tmp_path: Path) -> Iterator[HttpServer]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Canned)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    server = HttpServer({"command": ["true"], "url": ""}, tmp_path, tmp_path / "log")
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    Canned.seen = []
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_headers_mcp_gives_meaning_to_are_forwarded_and_relayed(canned):
    Canned.answer = (200, "text/event-stream", [SSE])
    answer = canned.forward("POST", b"{}", {"Mcp-Session-Id": "s-1", "MCP-Protocol-Version": "2025-06-18",
                                           "Accept": "application/json, text/event-stream", "Cookie": "secret"})
    assert answer.status == 200 and dict(answer.headers) == {"content-type": "text/event-stream",
                                                             "mcp-session-id": "s-1"}
    assert Canned.seen[0]["Mcp-Session-Id"] == "s-1" and Canned.seen[0]["MCP-Protocol-Version"] == "2025-06-18"
    assert "Cookie" not in Canned.seen[0]


def test_an_answer_past_its_bound_is_a_502_saying_so(canned, monkeypatch):
    monkeypatch.setattr(mcp_http_proxy, "MAX_ANSWER_BYTES", 1000)
    Canned.answer = (200, "application/json", [b"x" * 600] * 3)
    answer = canned.forward("POST", b"{}", {})
    assert answer.status == 502 and "passed 1000 bytes" in json.loads(answer.body)["error"]["message"]


def test_a_header_the_agent_forged_is_a_502_and_reaches_no_server(canned):
    answer = canned.forward("POST", b"{}", {"Mcp-Session-Id": "s-1\r\nX-Injected: 1"})
    assert answer.status == 502 and "did not answer" in json.loads(answer.body)["error"]["message"]
    assert Canned.seen == []


def test_a_server_that_is_not_there_is_a_502_saying_so(canned):
    canned.url = "http://127.0.0.1:9/mcp"
    answer = canned.forward("POST", b"{}", {})
    assert answer.status == 502 and "did not answer" in json.loads(answer.body)["error"]["message"]


HEADER = ('workload = ["{python}", "-m", "killpoint.scenarios.agents.reference_agent", "--mcp-http"]\n[plan]\n'
          'task_id = "t"\n[[plan.calls]]\ncall_id = "c1"\ntool = "read_note"\nargs = { path = "a" }\n[agent]\n')


@pytest.mark.parametrize(("table", "fragment"), [
    ('mcp_server = "server.py"\n', "agent.mcp_server: must be a table"),
    ('[agent.mcp_server]\nurl = "http://127.0.0.1:{port}/mcp"\n', "agent.mcp_server.command: must be the server's"),
    ('[agent.mcp_server]\ncommand = ["s"]\nurl = "https://example.com/mcp"\n', "agent.mcp_server.url: must be the"),
    ('[agent.mcp_server]\ncommand = ["s"]\nurl = "http://127.0.0.1:{port}/mcp"\nport = 1\n',
     "agent.mcp_server.port: unknown key"),
], ids=["not-a-table", "no-command", "not-http", "unknown-key"])
def test_a_bad_mcp_server_table_is_named_with_its_fix(killpoint, tmp_path, table, fragment):
    path = write(tmp_path, "s.toml", HEADER + table)
    assert_usage_error(killpoint("run", path, "--kill-at", "c1:tool_effect"), fragment)


def findings(out: str, rule: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if line.strip().startswith(f"[{rule}]")]


@pytest.mark.integration
@pytest.mark.parametrize("mode", [(), ("--no-pause",)], ids=["pausing", "no-pause"])
def test_the_reference_agent_passes_every_kill_against_an_http_server(killpoint, mode):
    """Its interrupted append VERIFIED with the server's own read; the server, outside its tree, outlives each
    kill and finishes what it was asked: no finding (and nothing left running: the fixture checks)."""
    result = killpoint("run", REFERENCE, "--exhaustive", *mode)
    assert result.exit_code == 0, result.out + result.err
    # No failure; under load a --no-pause kill at the final answer's model_reply may land after the agent exited.
    assert "20 runs: " in result.out and " 0 failed" in result.out, result.out


@pytest.mark.integration
def test_a_blind_retry_against_an_http_server_is_named(killpoint, tmp_path):
    result = killpoint("run", REFERENCE, "--kill-at", "c2:tool_effect", "--workload",
                       "{python} -m killpoint.scenarios.agents.mutants blind-retry --mcp-http", "--keep-all",
                       "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 1, result.out + result.err
    assert findings(result.out, "verify-before-replay"), result.out
    world = tmp_path / "runs" / "run-00000" / "world" / "files"
    assert (world / "log.txt").read_text() == "ordered 2 x tea\n" * 2  # the server made it, the retry again
    assert "Uvicorn running" in (tmp_path / "runs" / "run-00000" / "mcp-server.log").read_text()


@pytest.mark.integration
def test_the_agents_sdk_against_an_http_server_reruns_the_append(killpoint):
    result = killpoint("run", AGENTS_SDK, "--kill-at", "c2:tool_effect")
    assert result.exit_code == 1, result.out + result.err
    named = findings(result.out, "verify-before-replay")
    assert named and all(line.startswith("[verify-before-replay] c2 ") for line in named), result.out


@pytest.mark.integration
def test_a_server_that_cannot_start_is_a_workload_error_quoting_its_log(killpoint, tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(REFERENCE.read_text().replace(
        '"-m", "killpoint.scenarios.agents.notes_server"', '"-c", "import sys; sys.exit(\'no port for me\')"')
        .replace('catalogue = "notes_catalogue.toml"', f'catalogue = "{AGENTS / "notes_catalogue.toml"}"'))
    result = killpoint("run", scenario, "--kill-at", "c1:tool_effect")
    assert result.exit_code == 2, result.out + result.err
    assert "the scenario's MCP server exited with 1 before it listened" in result.out + result.err
    assert "no port for me" in result.out + result.err
