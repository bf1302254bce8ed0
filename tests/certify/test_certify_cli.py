"""``killpoint certify`` as a user meets it: bad input, reproduction by seed, certificates, staleness, MCP hints."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import killpoint as killpoint_package
from killpoint.harness.frontends._command import killpoint_command
from tests.helpers import CliResult

TOOLS = Path(__file__).parent / "tools"
Killpoint = Callable[..., CliResult]


def read(out: Path, tool: str) -> dict:
    return json.loads((out / f"{tool}.json").read_text())


@pytest.mark.parametrize(("args", "message"), [
    (["no_such_tool", "--claim", "READ_ONLY"], "unknown tool 'no_such_tool': it is none of the fake tools"),
    (["append", "--claim", "MOSTLY_SAFE"], "--claim 'MOSTLY_SAFE': unknown class; use one of READ_ONLY, "
                                           "IDEMPOTENT_WRITE, NON_IDEMPOTENT, UNKNOWN"),
    (["mytool"], "certify mytool: give the class to check with --claim CLASS"),
    ([], "certify what? give TOOL --claim CLASS, --catalogue FILE, or --check DIR"),
    (["append", "--check", "x"], "TOOL and --check are exclusive"),
    (["--catalogue", "{catalogue}", "--claim", "READ_ONLY"], "--claim goes with TOOL alone"),
    (["append", "--claim", "READ_ONLY", "--trials", "0"], "--trials 0: give a whole number from 1 to 100000"),
    (["t", "--claim", "READ_ONLY", "--python", "nocolon"], "--python 'nocolon': write MODULE:FUNCTION"),
    (["t", "--claim", "READ_ONLY", "--python", "no_such_module_xyz:f"], "cannot import 'no_such_module_xyz'"),
    (["t", "--claim", "READ_ONLY", "--python", "json:no_such_function"], "module 'json' has no 'no_such_function'"),
    (["t", "--claim", "READ_ONLY", "--command", "sh 'unterminated"], "cannot split it into words"),
    (["t", "--claim", "READ_ONLY", "--command", "true", "--python", "json:dumps"], "--python and --command are exclusive"),
    (["t", "--claim", "READ_ONLY", "--command", "true", "--world", "no/such/folder"], "--world no/such/folder: no such folder"),
    (["t", "--claim", "READ_ONLY", "--snapshot-command", "cat x"], "--snapshot-command goes with --command"),
    (["--check", "no/such/folder"], "--check no/such/folder: no such folder of certificates"),
    (["--catalogue", "no/such.toml"], "no/such.toml: cannot read the catalogue"),
    (["t", "--claim", "READ_ONLY", "--mcp-env", "A=1"], "--mcp-env go(es) with --mcp"),
    (["--mcp", "srv {world}", "--mcp-env", "NOEQUALS"], "--mcp-env 'NOEQUALS': write NAME=VALUE"),
    (["--mcp", "srv {world}", "--command", "true"], "--mcp, --python and --command are exclusive"),
    (["--mcp", "srv {world}", "--world", "no/such/folder"], "--world no/such/folder: no such folder"),
    (["--mcp", "srv {world}", "--call-timeout", "0"], "--call-timeout 0.0: give a number of seconds from 0.01 to 86400"),
    (["--mcp", "srv {world}", "--claim", "READ_ONLY"], "--claim with --mcp needs the tool (--tool NAME)"),
    (["--mcp", "srv {world}", "--schema", "s.json"], "--schema describes a tool run by --python or --command"),
    (["a", "--tool", "b", "--mcp", "srv"], "TOOL 'a' and --tool 'b': name the tool once"),
    (["--mcp-url", "ftp://x/mcp", "--world", "."], "--mcp-url 'ftp://x/mcp': not an http:// URL with a host; write "
                                                   "http://HOST:PORT/PATH"),
    (["--mcp-url", "http://127.0.0.1:99999/mcp", "--world", "."], "its port is not a number from 0 to 65535"),
    (["--mcp-url", "http://127.0.0.1:1/mcp"], "--mcp-url without --mcp: give --world DIR, the folder the server acts on"),
    (["--mcp-url", "http://127.0.0.1:1/mcp", "--world-preset", "git"], "--world-preset with --mcp-url alone"),
    (["--mcp-url", "http://127.0.0.1:1/mcp", "--world", "no/such/folder"], "no such folder; give the folder the "
                                                                          "server at --mcp-url acts on"),
    (["--mcp-url", "http://127.0.0.1:1/mcp", "--world", "{tmp}"], "--mcp-url 'http://127.0.0.1:1/mcp': nothing "
                                                                  "listens at http://127.0.0.1:1/mcp"),
    (["--mcp", "srv {world}", "--mcp-url", "http://127.0.0.1:8000/mcp"], "write {port} in both"),
    (["--mcp", "srv {world}", "--mcp-protocol", "stateless"], "--mcp-protocol goes with --mcp-url"),
    (["--mcp-url", "http://127.0.0.1:1/mcp", "--claim", "READ_ONLY"], "--claim with --mcp-url needs the tool"),
])
def test_bad_input_is_one_clear_message_and_exit_2(killpoint: Killpoint, tmp_path: Path, args: list[str],
                                                   message: str) -> None:
    catalogue = tmp_path / "good.toml"
    catalogue.write_text('[tools]\nappend = { class = "NON_IDEMPOTENT" }\n')
    (tmp_path / "world").mkdir()
    result = killpoint("certify", *[arg.replace("{catalogue}", str(catalogue)).replace("{tmp}", str(tmp_path / "world"))
                                    for arg in args],
                       "--out", tmp_path / "certificates")
    assert result.exit_code == 2, result
    assert result.err.startswith("killpoint: ") and message in result.err, result.err
    assert "Traceback" not in result.err and not (tmp_path / "certificates").exists()
    assert result.out == "", "bad input is found before anything is printed or run"


def test_a_bad_catalogue_lists_every_problem(killpoint: Killpoint, tmp_path: Path) -> None:
    catalogue = tmp_path / "bad.toml"
    catalogue.write_text('[tools]\nappend = { class = "MAYBE" }\nread_file = { class = "READ_ONLY", colour = 1 }\n')
    result = killpoint("certify", "--catalogue", catalogue, "--out", tmp_path / "c")
    assert result.exit_code == 2 and "2 problem(s)" in result.err
    assert "unknown class 'MAYBE'" in result.err and "unknown key 'colour'" in result.err


def test_the_same_seed_reproduces_a_certification_exactly(killpoint: Killpoint, tmp_path: Path) -> None:
    for run in ("first", "second"):
        killpoint("certify", "write_file", "--claim", "IDEMPOTENT_WRITE", "--trials", "8", "--seed", "7",
                  "--out", tmp_path / run)
        killpoint("certify", "edit_file", "--claim", "IDEMPOTENT_WRITE", "--seed", "7", "--out", tmp_path / run)
    for tool in ("write_file", "edit_file"):
        first, second = read(tmp_path / "first", tool), read(tmp_path / "second", tool)
        assert first["evidence_digest"] == second["evidence_digest"]
        assert first["observations"] == second["observations"] and first.get("counterexample") == second.get(
            "counterexample")
    assert read(tmp_path / "first", "write_file")["trials"]["kill"] > 0


def test_a_certificate_records_claim_verdict_trials_seed_digest_identity_and_version(killpoint: Killpoint,
                                                                                   tmp_path: Path) -> None:
    result = killpoint("certify", "append", "--claim", "IDEMPOTENT_WRITE", "--seed", "3", "--out", tmp_path)
    data = read(tmp_path, "append")
    assert {"claim", "verdict", "strongest_supported", "reason", "trials", "seed", "evidence_digest", "identity",
            "killpoint_version", "reproduce", "counterexample", "observations", "adapter"} <= set(data)
    assert (data["claim"], data["verdict"], data["seed"]) == ("IDEMPOTENT_WRITE", "REFUTED", 3)
    assert data["identity"]["kind"] == "fake tool source" and data["identity"]["digest"].startswith("sha256:")
    assert data["killpoint_version"] == killpoint_package.__version__ and data["adapter"] == {"adapter": "fake", "tool": "append"}
    assert data["reproduce"] == f"{killpoint_command()} certify append --claim IDEMPOTENT_WRITE --seed 3 --trials 25"
    assert f"reproduce: {data['reproduce']}" in result.out
    again = killpoint(*shlex.split(data["reproduce"])[1:], "--out", tmp_path / "again")
    assert again.exit_code == 1 and read(tmp_path / "again", "append")["evidence_digest"] == data["evidence_digest"]


def test_a_changed_script_makes_its_certificate_stale(killpoint: Killpoint, tmp_path: Path) -> None:
    script = tmp_path / "kv_put.sh"
    shutil.copy(TOOLS / "kv_put.sh", script)
    flags = ["kv_put", "--claim", "IDEMPOTENT_WRITE", "--trials", "3", "--seed", "0", "--out", tmp_path / "c",
             "--command", f"sh {script} {{args}}", "--schema", TOOLS / "kv_put.schema.json"]
    assert killpoint("certify", *flags).exit_code == 0
    fresh = killpoint("certify", "--check", tmp_path / "c")
    assert fresh.exit_code == 0 and "kv_put                   CONFIRMED     fresh" in fresh.out
    script.write_text(script.read_text().replace("mkdir -p settings", "mkdir -p settings  # changed"))
    stale = killpoint("certify", "--check", tmp_path / "c")
    assert stale.exit_code == 1 and "stale: the tool changed since it was certified (script sha256" in stale.out
    rerun = killpoint("certify", *flags)
    assert "kv_put: the certificate it replaced was stale: the tool changed" in rerun.out
    assert killpoint("certify", "--check", tmp_path / "c").exit_code == 0


def test_a_changed_python_tool_makes_its_certificate_stale(tmp_path: Path) -> None:
    """Run as separate processes, as CI would: a module already imported here would hide the change."""
    (tmp_path / "mytool.py").write_text("def put(world, args):\n    (world / 'a.txt').write_text('a')\n")
    killpoint = [sys.executable, "-m", "killpoint.harness.frontends.cli", "certify"]
    subprocess.run([*killpoint, "put", "--claim", "IDEMPOTENT_WRITE", "--python", "mytool:put", "--trials", "2",
                    "--seed", "0", "--out", "c"], cwd=tmp_path, check=True, capture_output=True)
    assert subprocess.run([*killpoint, "--check", "c"], cwd=tmp_path, capture_output=True).returncode == 0
    (tmp_path / "mytool.py").write_text("def put(world, args):\n    (world / 'a.txt').write_text('b')\n")
    check = subprocess.run([*killpoint, "--check", "c"], cwd=tmp_path, capture_output=True, text=True)
    assert check.returncode == 1 and "stale: the tool changed since it was certified (python source" in check.stdout


def test_a_catalogue_from_mcp_hints_is_certified_and_contradicted_hints_are_named(killpoint: Killpoint,
                                                                                tmp_path: Path) -> None:
    tools = [{"name": "read_file", "annotations": {"readOnlyHint": True}},
             {"name": "append", "annotations": {"idempotentHint": True, "destructiveHint": False}},
             {"name": "get_set_settings", "annotations": {"destructiveHint": True}},
             {"name": "notes_search"}]
    (tmp_path / "tools.json").write_text(json.dumps({"tools": tools}))
    generated = killpoint("catalogue", "from-mcp", tmp_path / "tools.json", "--out", tmp_path / "mcp.toml")
    assert generated.exit_code == 0, generated.err
    result = killpoint("certify", "--catalogue", tmp_path / "mcp.toml", "--trials", "8", "--seed", "0",
                       "--out", tmp_path / "c")
    assert result.exit_code == 1, result.out
    verdicts = {tool: read(tmp_path / "c", tool)["verdict"] for tool in ("read_file", "append", "get_set_settings",
                                                                          "notes_search")}
    assert verdicts == {"read_file": "CONFIRMED", "append": "REFUTED", "get_set_settings": "CONSERVATIVE",
                        "notes_search": "INCONCLUSIVE"}
    append = read(tmp_path / "c", "append")["hint"]
    assert append["hints"] == ["idempotentHint", "readOnlyHint"]
    assert append["contradiction"].startswith("the evidence contradicts the MCP hints (idempotentHint: true, "
                                              "readOnlyHint not true) that made it IDEMPOTENT_WRITE")
    settings = read(tmp_path / "c", "get_set_settings")
    assert settings["reason"].startswith("safer than its hints") and "VERIFY could become RETRY" in settings["reason"]
    assert "no trial showed a replay repeating an effect" in settings["hint"]["contradiction"]
    assert read(tmp_path / "c", "read_file")["hint"]["contradiction"] is None
    assert "no way to run it" in read(tmp_path / "c", "notes_search")["reason"]
    assert "contradicts MCP hint idempotentHint, readOnlyHint" in result.out


def test_a_catalogue_no_tool_of_which_can_be_run_is_inconclusive_exit_3_and_says_how_to_run_them(
        killpoint: Killpoint, tmp_path: Path) -> None:
    tools = [{"name": "weather_lookup", "annotations": {"readOnlyHint": True}}, {"name": "send_invoice"}]
    (tmp_path / "tools.json").write_text(json.dumps({"tools": tools}))
    assert killpoint("catalogue", "from-mcp", tmp_path / "tools.json", "--out", tmp_path / "mcp.toml").exit_code == 0
    result = killpoint("certify", "--catalogue", tmp_path / "mcp.toml", "--seed", "0", "--out", tmp_path / "c")
    assert result.exit_code == 3, result.out
    verdicts = [read(tmp_path / "c", tool)["verdict"] for tool in ("send_invoice", "weather_lookup")]
    assert verdicts == ["INCONCLUSIVE", "INCONCLUSIVE"]
    assert "2 tool(s): 0 CONFIRMED, 0 REFUTED, 2 INCONCLUSIVE" in result.out
    advice = result.out.splitlines()[-1]
    assert advice.startswith("certify: 2 tool(s) could not be run (none of the fake tools, no adapter given); give "
                             "certify a way to run them: --python MODULE:FUNCTION"), advice
    assert "--command 'ARGV {tool} {args}'" in advice


def test_an_inconclusive_claim_exits_3_and_so_does_checking_its_fresh_certificate(killpoint: Killpoint,
                                                                                  tmp_path: Path) -> None:
    """A NON_IDEMPOTENT claim on a tool no replay repeats looks over-cautious: not refuted, not established."""
    result = killpoint("certify", "write_file", "--claim", "NON_IDEMPOTENT", "--trials", "3", "--seed", "0",
                       "--no-kill", "--out", tmp_path)
    assert result.exit_code == 3 and read(tmp_path, "write_file")["verdict"] == "INCONCLUSIVE", result.out
    assert "could not be run" not in result.out, "write_file can be run: no advice about adapters"
    check = killpoint("certify", "--check", tmp_path)
    assert check.exit_code == 3 and "write_file               INCONCLUSIVE  fresh" in check.out, check.out


def test_the_reproduce_line_keeps_the_adapter_flags_as_given(killpoint: Killpoint, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Relative, as typed: the line still works from another checkout (the certificate's adapter keeps the paths)."""
    monkeypatch.chdir(TOOLS.parents[2])
    result = killpoint("certify", "atomic_write", "--claim", "IDEMPOTENT_WRITE", "--python",
                       "tests.certify.tools.misclassified:atomic_write", "--world", "tests/certify/tools/world",
                       "--trials", "2", "--seed", "0", "--no-kill", "--out", tmp_path)
    data = read(tmp_path, "atomic_write")
    assert result.exit_code == 0 and data["reproduce"] == (
        f"{killpoint_command()} certify atomic_write --claim IDEMPOTENT_WRITE --seed 0 --trials 2 "
        "--python tests.certify.tools.misclassified:atomic_write --world tests/certify/tools/world"), data["reproduce"]
    assert data["adapter"]["world"] == str(TOOLS / "world")
