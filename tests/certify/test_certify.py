"""Quality tests: certification confirms every class of the fake catalogue, and refutes misclassified tools
with shrunk counterexamples (one only a kill part-way can catch), Python and shell alike."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from killpoint import protocol as p
from killpoint.catalogue import REFERENCE_CATALOGUE, load_catalogue
from tests.helpers import CliResult

TOOLS = Path(__file__).parent / "tools"
MODULE = "tests.certify.tools.misclassified"
Killpoint = Callable[..., CliResult]


def python_tool(function: str) -> list[str]:
    return ["--python", f"{MODULE}:{function}", "--world", str(TOOLS / "world")]


def certify(killpoint: Killpoint, out: Path, *args: Any, seed: int = 0) -> tuple[CliResult, dict[str, Any]]:
    """``killpoint certify ARGS`` into ``out``; the result and the one certificate it wrote (the first, by name)."""
    result = killpoint("certify", *args, "--seed", str(seed), "--out", out)
    written = sorted(out.glob("*.json"))
    return result, json.loads(written[0].read_text()) if written else {}


def test_certifying_the_whole_reference_catalogue_confirms_every_class(killpoint: Killpoint, tmp_path: Path) -> None:
    started = time.monotonic()
    result = killpoint("certify", "--catalogue", REFERENCE_CATALOGUE, "--trials", "6", "--seed", "0", "--out", tmp_path)
    seconds = time.monotonic() - started
    certificates = {path.stem: json.loads(path.read_text()) for path in tmp_path.glob("*.json")}
    catalogue = load_catalogue(REFERENCE_CATALOGUE)
    assert len(certificates) == len(catalogue.tools) == 96
    assert {tool: data["reason"] for tool, data in certificates.items() if data["verdict"] != "CONFIRMED"} == {}
    assert result.exit_code == 0 and "96 CONFIRMED, 0 REFUTED, 0 INCONCLUSIVE" in result.out, result.out
    for tool, data in certificates.items():
        claim = catalogue.class_of(tool)
        if catalogue.is_interactive(tool):
            assert data["interactive"] and data["reason"].startswith("interactive:"), tool
        elif claim == p.READ_ONLY:
            assert data["strongest_supported"] == p.READ_ONLY, tool
        elif claim == p.IDEMPOTENT_WRITE:
            assert data["trials"]["kill"] > 0 and data["trials"]["kill_diverged"] == 0, tool
        elif claim == p.NON_IDEMPOTENT:
            assert data["witness"]["check"] == "one call, then the same call again", tool
    print(f"certified the 96 fake tools (6 draws each) in {seconds:.1f}s")


def test_an_append_claimed_idempotent_is_refuted_with_the_shortest_text(killpoint: Killpoint, tmp_path: Path) -> None:
    result, data = certify(killpoint, tmp_path, "append", "--claim", "IDEMPOTENT_WRITE")
    assert result.exit_code == 1 and data["verdict"] == "REFUTED" and data["strongest_supported"] == p.NON_IDEMPOTENT
    example = data["counterexample"]
    assert example["args"] == {"path": "notes/todo.txt", "text": "0"}
    # the file's diff comes first (paths sorted); what the tool also records under state/ may follow it
    assert example["diffs"]["the replay changed (against one call)"][:5] == [
        "changed files/notes/todo.txt:", "    @@ -2,2 +2,2 @@", "     milk", "    -0", "    +00"]
    assert example["snapshots"]["before"]["files/notes/todo.txt"] == "tea tea tea\nmilk\n"
    assert "REFUTED append: claimed IDEMPOTENT_WRITE" in result.out and "+00" in result.out


def test_a_write_that_stamps_the_time_is_refuted(killpoint: Killpoint, tmp_path: Path) -> None:
    result, data = certify(killpoint, tmp_path, "stamped_write", "--claim", "IDEMPOTENT_WRITE",
                           *python_tool("stamped_write"))
    assert result.exit_code == 1 and data["verdict"] == "REFUTED"
    example = data["counterexample"]
    assert example["args"] == {"path": "draft.txt", "content": ""}, "shrunk to the first path and no content"
    assert example["diffs"]["one call changed (against before)"] == ["extra   draft.txt"]
    replay = example["diffs"]["the replay changed (against one call)"]
    assert replay[0] == "changed draft.txt:" and replay[-2].startswith("    -saved at ") and replay[-1].startswith(
        "    +saved at ")


def test_a_read_that_bumps_an_access_counter_is_refuted(killpoint: Killpoint, tmp_path: Path) -> None:
    result, data = certify(killpoint, tmp_path, "counted_read", "--claim", "READ_ONLY", *python_tool("counted_read"))
    assert result.exit_code == 1 and data["verdict"] == "REFUTED"
    assert data["reason"] == "one call changed the world, and its replay changed it again"
    example = data["counterexample"]
    assert example["args"] == {"path": "notes.txt"}
    assert example["diffs"]["one call changed (against before)"] == ["extra   .access-count"]
    assert example["snapshots"]["after the replay"][".access-count"] == "2\n"


def test_a_torn_write_is_refuted_only_by_the_kill_part_way(killpoint: Killpoint, tmp_path: Path) -> None:
    replays_only, data = certify(killpoint, tmp_path / "replays", "torn_write", "--claim", "IDEMPOTENT_WRITE",
                                 "--no-kill", *python_tool("torn_write"))
    assert replays_only.exit_code == 0 and data["verdict"] == "CONFIRMED", "two calls alone cannot see it"
    result, data = certify(killpoint, tmp_path / "kills", "torn_write", "--claim", "IDEMPOTENT_WRITE",
                           *python_tool("torn_write"))
    assert result.exit_code == 1 and data["verdict"] == "REFUTED"
    assert data["trials"]["replay_differed"] == 0 and data["trials"]["kill_diverged"] >= 1
    example = data["counterexample"]
    assert example["check"] == "killed part-way, then replayed"
    assert example["args"] == {"path": "draft.txt", "content": "0"}
    assert example["kill"]["point"] == 2 and example["kill"]["label"] == "write draft.txt", example["kill"]
    assert example["snapshots"]["after the kill"]["draft.txt"] == "", "half a file: opened, nothing written yet"
    assert example["diffs"]["the replay left (against one uninterrupted call)"] == [
        "changed draft.txt:", "    @@ -1 +0,0 @@", "    -0"]
    assert "killed at point 2, before write draft.txt" in result.out


def test_a_true_idempotent_write_survives_every_kill(killpoint: Killpoint, tmp_path: Path) -> None:
    result, data = certify(killpoint, tmp_path, "atomic_write", "--claim", "IDEMPOTENT_WRITE", "--trials", "10",
                           *python_tool("atomic_write"), "--python-snapshot", f"{MODULE}:note_lines")
    assert result.exit_code == 0 and data["verdict"] == "CONFIRMED", data["reason"]
    kills = [observation for observation in data["observations"] if observation["kind"] == "kill"]
    assert kills and {observation["kill_label"] for observation in kills} <= {
        "open(w) .draft.txt.tmp", "write .draft.txt.tmp", "replace .draft.txt.tmp -> draft.txt", "return",
        "open(w) .final.txt.tmp", "write .final.txt.tmp", "replace .final.txt.tmp -> final.txt"}


def test_a_shell_tool_is_certified_with_kills_at_the_points_it_declares(killpoint: Killpoint, tmp_path: Path) -> None:
    result, data = certify(killpoint, tmp_path, "kv_put", "--claim", "IDEMPOTENT_WRITE", "--trials", "10",
                           "--command", f"sh {TOOLS / 'kv_put.sh'} {{args}}",
                           "--schema", TOOLS / "kv_put.schema.json")
    assert result.exit_code == 0 and data["verdict"] == "CONFIRMED", data["reason"]
    assert data["identity"]["kind"] == "script sha256" and data["identity"]["files"].endswith("kv_put.sh")
    labels = {observation.get("kill_label") for observation in data["observations"] if observation["kind"] == "kill"}
    assert any(label and label.startswith("between the two lines of settings/") for label in labels), labels


def test_a_shell_tool_fed_on_stdin_and_snapshotted_by_a_command_is_refuted(killpoint: Killpoint,
                                                                         tmp_path: Path) -> None:
    result, data = certify(killpoint, tmp_path, "log_line", "--claim", "IDEMPOTENT_WRITE",
                           "--command", f"sh {TOOLS / 'log_line.sh'}", "--snapshot-command",
                           f"sh {TOOLS / 'snapshot.sh'}", "--schema", TOOLS / "log_line.schema.json")
    assert result.exit_code == 1 and data["verdict"] == "REFUTED"
    example = data["counterexample"]
    assert example["args"] == {"level": "info", "count": 0}
    assert example["snapshots"]["after the replay"] == {"snapshot": "== ./log.txt\ninfo 0\ninfo 0\n"}


def test_a_command_that_declares_no_points_is_killed_after_seeded_delays(killpoint: Killpoint, tmp_path: Path) -> None:
    result, data = certify(killpoint, tmp_path, "state_put", "--claim", "IDEMPOTENT_WRITE", "--trials", "5",
                           "--command", "sh -c 'printf %s \"$1\" > state.json' put {args}",
                           "--schema", TOOLS / "kv_put.schema.json")
    assert result.exit_code == 0 and data["verdict"] == "CONFIRMED", data["reason"]
    kills = [observation for observation in data["observations"] if observation["kind"] == "kill"]
    assert kills and all("kill_after_ms" in observation and "kill_at" not in observation for observation in kills)
    assert data["identity"]["kind"] == "command line and sh --version"


def test_one_python_function_can_serve_a_whole_catalogue(killpoint: Killpoint, tmp_path: Path) -> None:
    catalogue = tmp_path / "mine.toml"
    catalogue.write_text('[tools]\natomic_write = { class = "IDEMPOTENT_WRITE" }\n'
                         'stamped_write = { class = "IDEMPOTENT_WRITE" }\n')
    result = killpoint("certify", "--catalogue", catalogue, "--trials", "5", "--seed", "0", "--out", tmp_path / "c",
                       *python_tool("by_name"))
    assert result.exit_code == 1 and "1 CONFIRMED, 1 REFUTED" in result.out, result.out
    assert json.loads((tmp_path / "c" / "stamped_write.json").read_text())["verdict"] == "REFUTED"
