"""A real MCP server behind the recording proxy: an unmodified agent's calls judged from the traffic and the world.

The Agents SDK agent starts ``mcp_proxy -- CMD`` as its stdio server; the proxy
starts the real server as its child (so a kill kills the server mid-call, as it
would without killpoint) and reports each ``tools/call`` to the harness, which
writes the ledger and holds the call at its seams, the server itself held at
its first open in the world (``tool_opened``). The npm filesystem server
(pinned, installed by ci/install-mcp-servers, as CI does before the suite) is
the real server.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys

import pytest

from killpoint.harness.agents.mcp_endpoint import PATH
from killpoint.harness.agents.mcp_proxy import Proxy
from killpoint.harness.agents.tool_service import ToolService
from tests.agents.test_tool_service import PLAN, ledger_lines
from tests.helpers import ROOT

pytestmark = pytest.mark.integration

AGENTS = ROOT / "scenarios" / "agents"
PROXY = AGENTS / "openai_agents_mcp_proxy.toml"
REFERENCE = AGENTS / "reference_agent_mcp_proxy.toml"
SERVER_ARGS = "--server node ../../build/npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js {world}"
FILESYSTEM = ROOT / "build" / "npm" / "node_modules" / "@modelcontextprotocol" / "server-filesystem"


@pytest.fixture
def filesystem_server() -> None:
    if not (FILESYSTEM / "dist" / "index.js").is_file() or shutil.which("node") is None:
        if os.environ.get("CI"):
            pytest.fail("the npm filesystem MCP server is not installed: .ci/run runs ci/install-mcp-servers")
        pytest.skip("the npm filesystem MCP server is not installed here: run ci/install-mcp-servers")


def findings(out: str, rule: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if line.strip().startswith(f"[{rule}]")]


@pytest.mark.parametrize("mode", [(), ("--no-pause",)], ids=["pausing", "no-pause"])
@pytest.mark.usefixtures("filesystem_server")
def test_a_real_servers_idempotent_calls_pass_at_every_seam(killpoint, tmp_path, mode):
    """Read, then write_file (IDEMPOTENT_WRITE, as its certificate says): re-run after any kill, nothing repeats;
    the crash-free run's ledger is the proxy's record of the traffic: both invocations, the write's effect."""
    result = killpoint("run", PROXY, "--exhaustive", *mode, "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 0, result.out + result.err
    # 8 seams of each call, tool_opened included; no failure (under load a --no-pause kill at the final answer's
    # model_reply may land after the agent exited: untested, not failed).
    assert "16 runs: " in result.out and " 0 failed" in result.out, result.out
    ledger = [json.loads(line) for line in (tmp_path / "runs" / "golden" / "ledger.jsonl").read_text().splitlines()]
    assert [(line.get("invoked") or f"effect {line.get('effect')}", line["call"]) for line in ledger] == [
        ("read_text_file", "c1"), ("write_file", "c2"), ("effect write_file", "c2")]
    assert (tmp_path / "runs" / "golden" / "world" / "files" / "summary.txt").read_text() == "2 x tea\n"


@pytest.mark.usefixtures("filesystem_server")
def test_a_call_of_a_tool_no_catalogue_lists_rerun_blindly_is_named(killpoint, tmp_path):
    """write_file unclassified is UNKNOWN: its interrupted call must be verified, and the Agents SDK re-runs the
    turn instead. The invocation the proxy reported before the kill survives the proxy's death with the agent."""
    catalogue = tmp_path / "catalogue.toml"
    catalogue.write_text('default = "UNKNOWN"\ninteractive = []\n[tools]\n'
                         'read_text_file = { class = "READ_ONLY", family = "filesystem", why = "reads" }\n')
    scenario = tmp_path / "s.toml"
    scenario.write_text(PROXY.read_text().replace('catalogue = "filesystem_server.toml"', f'catalogue = "{catalogue}"')
                        .replace("../../build", str(ROOT / "build")))
    result = killpoint("run", scenario, "--kill-at", "c2:tool_effect", "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 1, result.out + result.err
    named = findings(result.out, "verify-before-replay")
    assert named and all(line.startswith("[verify-before-replay] c2 ") for line in named), result.out
    ledger = [json.loads(line) for line in next((tmp_path / "runs").glob("run-*/ledger.jsonl")).read_text().splitlines()]
    assert [(line["incarnation"], line["call"]) for line in ledger if line.get("invoked") == "write_file"] == [
        (0, "c2"), (1, "c2")]


@pytest.mark.usefixtures("filesystem_server")
def test_a_kill_in_write_files_first_open_leaves_debris_that_is_named_not_held_against_the_agent(killpoint, tmp_path):
    """Held at its first open in the world (its temporary file, just made) and killed there: the temporary file
    stays, empty; the retry writes summary.txt whole. Its certificate's debris, named in the agent's run."""
    result = killpoint("run", PROXY, "--kill-at", "c2:tool_opened", "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 0, result.out + result.err
    shown = killpoint("show", tmp_path / "runs" / "run-00000")
    debris = [line for line in shown.out.splitlines() if line.startswith("  note: debris: files/summary.txt.")]
    assert debris and ".tmp, left by kill 0 and unchanged since" in debris[0], shown.out


@pytest.mark.usefixtures("filesystem_server")
@pytest.mark.parametrize("mode", [
    ("--exhaustive",),
    ("--exhaustive", "--no-pause"),
    ("--exhaustive", "--drift", "edit_file=IDEMPOTENT_WRITE"),
    ("--exhaustive", "--drift", "write_file=NON_IDEMPOTENT"),
    ("--exhaustive", "--depth", "2", "--shard", "3/16"),
    ("--random", "12", "--seed", "3"),
    ("--exhaustive", "--power-loss"),
], ids=["pausing", "no-pause", "drift-to-retry", "drift-to-verify", "depth-2", "random", "power-loss"])
def test_the_reference_agent_passes_every_kill_through_the_proxy(killpoint, mode):
    """A correct agent behind the proxy, its NON_IDEMPOTENT edit VERIFIED with the server's own read: no finding in
    any mode (a false alarm here would blame a correct agent for the proxy)."""
    result = killpoint("run", REFERENCE, *mode)
    assert result.exit_code == 0, result.out + result.err
    assert " 0 failed" in result.out, result.out


@pytest.mark.usefixtures("filesystem_server")
def test_an_interrupted_edit_is_verified_with_the_servers_read_and_not_made_again(killpoint, tmp_path):
    result = killpoint("run", REFERENCE, "--kill-at", "c2:tool_effect", "--keep-all", "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 0, result.out + result.err
    run = tmp_path / "runs" / "run-00000"
    ledger = [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines()]
    assert [(line["incarnation"], line.get("invoked") or line.get("probe") or "effect") for line in ledger
            if line.get("call") == "c2"] == [(0, "edit_file"), (0, "effect"), (1, "effect_present")]
    assert (run / "world" / "files" / "notes" / "todo.txt").read_text() == "order 2 boxes of tea (ordered)\n"


@pytest.mark.usefixtures("filesystem_server")
@pytest.mark.parametrize(("mutant", "kill", "rule"), [
    ("blind-retry", "c2:tool_request", "verify-before-replay"),
    ("forgets", "c3:tool_effect", "succeeded-not-replayed"),
    # Killed while the final answer's request is held: the model had c2's and c3's results, the agent re-runs them.
    ("retries-done", "model_request", "succeeded-not-replayed"),
])
def test_each_mutant_is_caught_through_the_proxy(killpoint, mutant, kill, rule):
    result = killpoint("run", REFERENCE, "--kill-at", kill, "--workload",
                       f"{{python}} -m killpoint.scenarios.agents.mutants {mutant} {SERVER_ARGS}")
    assert result.exit_code == 1, result.out + result.err
    assert findings(result.out, rule), result.out


# A server that answers every request with a result naming its method, and keeps each line it read in a file.
ECHO_SERVER = """
import json, sys
with open(sys.argv[1], "ab") as kept:
    for line in sys.stdin.buffer:
        kept.write(line)
        kept.flush()
        message = json.loads(line)
        if "id" in message:
            print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"content": [
                {"type": "text", "text": "did " + message["method"]}]}}), flush=True)
"""


def test_the_proxy_passes_traffic_through_and_refuses_an_unplanned_call_before_the_server_sees_it(world, tmp_path):
    received = tmp_path / "received.jsonl"
    messages = [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "append", "arguments": {
                    "path": "log.txt", "text": "one\n"}}},
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "append", "arguments": {
                    "path": "elsewhere.txt", "text": "one\n"}}},
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}},
                [{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "append", "arguments": {}}}]]
    agent_in = io.BytesIO(b"".join(json.dumps(message).encode() + b"\n" for message in messages))
    agent_out = io.BytesIO()
    with ToolService(PLAN, world, tmp_path / "ledger.jsonl") as tools:
        tools.begin(0)
        proxy = Proxy([sys.executable, "-c", ECHO_SERVER, str(received)], f"{tools.url}{PATH}", agent_in, agent_out)
        assert proxy.run() == 0
    answers = {answer["id"]: answer for answer in map(json.loads, agent_out.getvalue().splitlines())}
    assert answers[None]["error"]["message"].startswith("batches are not read")  # never reaches the server
    assert answers[1]["result"]["content"][0]["text"] == "did tools/list"
    assert answers[2]["result"]["content"][0]["text"] == "did tools/call"
    assert answers[3]["result"]["isError"] and "no planned call of append" in answers[3]["result"]["content"][0]["text"]
    assert [json.loads(line).get("id") for line in received.read_text().splitlines()] == [1, 2, None]
    assert [(line.get("invoked") or "effect", line["call"]) for line in ledger_lines(tmp_path / "ledger.jsonl")] == [
        ("append", "c2"), ("effect", "c2")]
