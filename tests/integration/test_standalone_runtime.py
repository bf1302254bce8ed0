"""The standalone runtime is judged through the protocol alone.

scenarios/standalone/runtime.py shares no code with killpoint: it passes every
single-kill schedule of the demo, and each one-line bug planted in a copy of it
is caught with the right property named. Also: ``python -m killpoint.fake_tools``, the
command-line door through which it (and a runtime in any language) calls tools.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType

import pytest

from killpoint import protocol
from killpoint.fake_tools.world import seed_world
from tests.helpers import DEMO, ROOT

STANDALONE = ROOT / "scenarios" / "standalone" / "runtime.py"


def standalone_workload(script: Path) -> str:
    # The demo's workloads run in scenarios/, so the script's path must be absolute.
    return f"{{python}} {script.resolve()}"


def test_standalone_runtime_imports_only_the_standard_library():
    tree = ast.parse(STANDALONE.read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_standalone_runtime_spells_every_protocol_name_as_killpoint_does():
    # It copies the names from the spec rather than importing them; a copy that drifts from
    # killpoint.protocol (or a name killpoint misspelt) would make the two sides disagree unseen.
    standalone = load_standalone()
    copied = {name: value for name, value in vars(standalone).items() if name.isupper() and isinstance(value, str)}
    assert copied, "the standalone runtime names no protocol constants"
    assert {name: getattr(protocol, name, None) for name in copied} == copied
    assert set(standalone.RETRY_SAFE_CLASSES) == {protocol.READ_ONLY, protocol.IDEMPOTENT_WRITE}


@pytest.mark.parametrize("tools", [(), ("--tools-command",)], ids=["tool-service", "tools-command-line"])
def test_standalone_runtime_passes_exhaustive_demo(killpoint, tmp_path, tools):
    report_path = tmp_path / "report.json"
    result = killpoint("run", DEMO, "--exhaustive", "--workload", " ".join((standalone_workload(STANDALONE), *tools)),
                       "--json", report_path)
    assert result.exit_code == 0, result.out + result.err
    assert "30 runs: 30 passed, 0 failed" in result.out
    for run in json.loads(report_path.read_text())["runs"]:
        first, *rest = run["incarnations"]
        assert run["valid"] and not run["unreached"]
        assert first["killed_at"] == run["schedule"][0] and first["exit_code"] is None
        assert rest and rest[-1]["exit_code"] == 0


# (line of the standalone runtime, its one-line replacement, where to kill, property that must catch it)
MUTATIONS = [
    pytest.param("RETRY_SAFE_CLASSES = (READ_ONLY, IDEMPOTENT_WRITE)",
                 'RETRY_SAFE_CLASSES = (READ_ONLY, IDEMPOTENT_WRITE, "NON_IDEMPOTENT")',
                 "c5:after_effect", "interrupted-action", id="retries-non-idempotent"),
    pytest.param("        if found != OUTCOME_UNKNOWN or started is None:",
                 "        if found in (FAILED, NOT_STARTED) or started is None:",
                 "c3:after_finished", "succeeded-not-replayed", id="decides-succeeded-by-class"),
    pytest.param('        ok = self.fake_tool("call", call, op)["ok"]',
                 '        ok = self.finish(call_id, op, SUCCEEDED) or self.fake_tool("call", call, op)["ok"]',
                 "c1:after_finished", "write-ahead", id="finished-before-tool"),
    pytest.param('        effect_found = self.fake_tool("probe", call)["effect_found"]',
                 "        effect_found = False",
                 "c5:after_effect", "verify-before-replay", id="redoes-without-probe"),
]


@pytest.mark.parametrize(("line", "replacement", "kill_at", "caught_by"), MUTATIONS)
def test_one_line_bug_is_caught(killpoint, tmp_path, line, replacement, kill_at, caught_by):
    source = STANDALONE.read_text()
    assert source.splitlines().count(line) == 1, f"the line to mutate is not in the runtime exactly once: {line!r}"
    mutant = tmp_path / "runtime.py"
    mutant.write_text(source.replace(line + "\n", replacement + "\n"))

    result = killpoint("run", DEMO, "--kill-at", kill_at, "--workload", standalone_workload(mutant))
    assert result.exit_code == 1, result.out + result.err
    assert f"[{caught_by}]" in result.out, result.out


def load_standalone() -> ModuleType:
    spec = importlib.util.spec_from_file_location("standalone_runtime", STANDALONE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_standalone_journal_cuts_a_torn_last_line_and_keeps_the_rest(tmp_path):
    journal_path = tmp_path / "journal.jsonl"
    started = {"kind": "started", "op": "t-op1", "call": "c1", "tool": "ui_tap", "class": "NON_IDEMPOTENT",
               "interactive": False, "attempt": 1}
    intact = (json.dumps(started) + "\n").encode()
    journal_path.write_bytes(intact + b'{"kind": "finished", "op": "t-o')

    journal = load_standalone().Journal(str(journal_path))

    assert journal_path.read_bytes() == intact
    assert journal.ops["c1"]["status"] == "RUNNING"
    journal.append({"kind": "finished", "op": "t-op1", "status": "SUCCEEDED"})
    assert journal.ops["c1"]["status"] == "SUCCEEDED"
    assert journal_path.read_bytes().count(b"\n") == 2


# -- python -m killpoint.fake_tools --------------------------------------------------------


@pytest.fixture
def tool_env(tmp_path: Path) -> dict[str, str]:
    """A protocol environment for incarnation 3 with a seeded world and no control socket."""
    seed_world(tmp_path / "world", {"notes/todo.txt": "tea\n"}, {})
    (tmp_path / "ledger.jsonl").touch()
    environ = {key: value for key, value in os.environ.items() if not key.startswith("KILLPOINT_")}
    return environ | {
        protocol.ENV_RUN_DIR: str(tmp_path), protocol.ENV_PLAN: str(tmp_path / "plan.json"),
        protocol.ENV_CATALOGUE: str(tmp_path / "catalogue.json"), protocol.ENV_WORLD: str(tmp_path / "world"),
        protocol.ENV_LEDGER: str(tmp_path / "ledger.jsonl"), protocol.ENV_INCARNATION: "3",
    }


def fake_tools_cli(env: dict[str, str], *args: str) -> tuple[int, dict[str, object] | None, str]:
    """Run ``python -m killpoint.fake_tools ARGS``; return (exit code, its JSON answer or None, stderr)."""
    done = subprocess.run([sys.executable, "-m", "killpoint.fake_tools", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=30)
    return done.returncode, (json.loads(done.stdout) if done.stdout.strip() else None), done.stderr


def ledger_records(env: dict[str, str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in Path(env[protocol.ENV_LEDGER]).read_text().splitlines()]


def test_fake_tools_call_succeeds_and_records_its_invocation(tool_env):
    code, answer, _ = fake_tools_cli(tool_env, "call", "read_file", "--call", "c1",
                                     "--args", '{"path": "notes/todo.txt"}')
    assert (code, answer) == (0, {"ok": True, "output": "tea\n", "error": None})
    (invocation,) = ledger_records(tool_env)
    assert invocation["invoked"] == "read_file" and invocation["call"] == "c1" and invocation["incarnation"] == 3


def test_fake_tools_failed_call_exits_1_with_the_reason(tool_env):
    code, answer, _ = fake_tools_cli(tool_env, "call", "read_file", "--call", "c1", "--args", '{"path": "../etc"}')
    assert code == 1
    assert answer is not None and answer["ok"] is False and answer["output"] is None
    assert "refused" in str(answer["error"])


def test_fake_tools_probe_answers_whether_the_effect_is_there(tool_env):
    args = ("write_file", "--call", "c3", "--args", '{"path": "orders/summary.txt", "content": "2 x tea\\n"}')
    assert fake_tools_cli(tool_env, "probe", *args)[:2] == (0, {"effect_found": False})
    assert fake_tools_cli(tool_env, "call", *args)[0] == 0
    assert fake_tools_cli(tool_env, "probe", *args)[:2] == (0, {"effect_found": True})
    assert [record.get("probe") for record in ledger_records(tool_env) if "probe" in record] == ["effect_present"] * 2


def test_fake_tools_call_sends_after_effect_with_its_op(tool_env, tmp_path):
    control = tmp_path / "control.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(control))
    listener.listen(1)
    messages: list[dict[str, object]] = []

    def answer_one_point() -> None:
        connection, _ = listener.accept()
        with connection, connection.makefile("rb") as lines:
            messages.append(json.loads(lines.readline()))
            connection.sendall(b"ok\n")

    server = threading.Thread(target=answer_one_point, daemon=True)
    server.start()
    code, answer, _ = fake_tools_cli(tool_env | {protocol.ENV_CONTROL: str(control)}, "call", "write_file",
                                     "--call", "c3", "--op", "demo-op3", "--args", '{"path": "a.txt", "content": "x"}')
    server.join(timeout=10)
    listener.close()
    assert code == 0 and answer is not None and answer["ok"] is True
    assert messages == [{"point": "after_effect", "call": "c3", "op": "demo-op3", "incarnation": 3}]


@pytest.mark.parametrize(("args", "complaint"), [
    (("call", "read_file", "--call", "c1", "--args", "[1]"), "JSON object"),
    (("call", "read_file", "--call", "c1", "--args", "{nope"), "not valid JSON"),
    (("probe", "read_file", "--args", "{}"), "--call"),
])
def test_fake_tools_bad_usage_exits_2(tool_env, args, complaint):
    code, answer, stderr = fake_tools_cli(tool_env, *args)
    assert (code, answer) == (2, None)
    assert complaint in stderr


def test_fake_tools_outside_a_workload_is_bad_usage(tool_env):
    environ = {key: value for key, value in tool_env.items() if key != protocol.ENV_WORLD}
    code, _, stderr = fake_tools_cli(environ, "call", "read_file", "--call", "c1", "--args", "{}")
    assert code == 2
    assert protocol.ENV_WORLD in stderr and "killpoint" in stderr
