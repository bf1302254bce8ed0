"""Issue 28, item 2: debris is not a repeated effect.

A kill part-way can leave a file one call never leaves (``a.txt.<hex>.tmp`` of
a write by temporary file and rename) that the replay does not remove, while
the replay leaves everything else exactly as one call does. That is debris, a
crash-safety finding reported apart (the certificate's ``debris``); it counts
against the class only when the replay fails (a lock left behind). A replay
that repeats an effect is still refuted, however the tool writes.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from killpoint import protocol as p
from killpoint.harness.certify.adapters import ExternalSpec, external_target
from killpoint.harness.certify.certificate import CONFIRMED, REFUTED, debris_found, debris_text, judge
from killpoint.harness.certify.trials import KILL, REPLAY, Observation, SearchResult, debris, kill_trial, replay_trial
from killpoint.harness.frontends._command import killpoint_command
from tests.helpers import ROOT, CliResult

TOOLS = Path(__file__).parent / "tools"
MODULE = "tests.certify.tools.debris"
ATOMIC = Path(__file__).parent / "servers" / "atomic.py"
Killpoint = Callable[..., CliResult]

ONCE = {"a.txt": "new\n", "b.txt": "beta\n"}


@pytest.mark.parametrize(("at_kill", "recovered", "expected"), [
    # the kill left a temporary file; the replay wrote its own, renamed it, and left the first as it was
    ({"a.txt": "old\n", "b.txt": "beta\n", "a.txt.1f2e3d4c5b6a7980.tmp": ""},
     {**ONCE, "a.txt.1f2e3d4c5b6a7980.tmp": ""}, ONCE),
    ({"a.txt": "old\n", "b.txt": "beta\n", "sub/": "", "sub/x.tmp": "half"},
     {**ONCE, "sub/": "", "sub/x.tmp": "half"}, ONCE),
])
def test_what_only_the_kill_left_untouched_by_the_replay_is_debris(at_kill: dict[str, str], recovered: dict[str, str],
                                                                   expected: dict[str, str]) -> None:
    assert debris(at_kill, recovered, expected) == tuple(sorted(set(recovered) - set(expected)))


@pytest.mark.parametrize(("at_kill", "recovered"), [
    ({"a.txt": "old\n", "b.txt": "beta\n"}, {**ONCE, "a.txt.bak": "old\n"}),            # the replay made it
    ({**ONCE, "a.txt.x.tmp": ""}, {**ONCE, "a.txt.x.tmp": "new\n"}),                   # the replay rewrote it
    ({"a.txt": "old\n", "b.txt": "beta\n", "x.tmp": ""}, {"a.txt": "old\n", "b.txt": "beta\n", "x.tmp": ""}),
    ({"a.txt": "new\n", "x.tmp": ""}, {"a.txt": "new\n", "x.tmp": ""}),                # b.txt missing
    ({**ONCE, "git: locks": ".git/index.lock"}, {**ONCE, "git: locks": ".git/index.lock"}),  # changed, not extra
    (ONCE, ONCE),                                                                      # nothing to split
])
def test_a_change_a_loss_or_a_file_the_replay_made_is_no_debris(at_kill: dict[str, str],
                                                                 recovered: dict[str, str]) -> None:
    expected = ONCE if "git: locks" not in recovered else {**ONCE, "git: locks": ""}
    assert debris(at_kill, recovered, expected) == ()


def python_target(function: str) -> Any:
    return external_target(function, ExternalSpec(python=f"{MODULE}:{function}", world=str(TOOLS / "world"),
                                                   cwd=str(ROOT)))


def killed_before(function: str, verb: str, tmp_path: Path) -> Observation:
    """``function`` writing draft.txt, killed at its point ``verb ...`` and replayed."""
    target = python_target(function)
    args = {"path": "draft.txt", "content": "hello"}
    (tmp_path / "one").mkdir()
    labels = target.call(target.fresh_world(tmp_path / "one"), args, tmp_path / "one").labels
    point = next(number for number, label in enumerate(labels, 1) if label.startswith(verb))
    (tmp_path / "two").mkdir()
    _, snapshots, _ = replay_trial(target, args, tmp_path / "two")
    (tmp_path / "three").mkdir()
    try:
        killed, _ = kill_trial(target, args, tmp_path / "three", snapshots["after one call"], at_point=point)
    finally:
        target.close()
    return killed


@pytest.mark.integration  # a fork server runs the tool's children
def test_a_temporary_file_the_replay_survives_is_debris_and_no_divergence(tmp_path: Path) -> None:
    killed = killed_before("random_temp_write", "replace", tmp_path)
    assert killed.ok and killed.debris == ("draft.txt.<hex>.tmp",) and not killed.differs, killed
    assert killed.kill_label == "replace draft.txt.<hex>.tmp -> draft.txt", "labels are scrubbed: equal seeds, equal digests"


@pytest.mark.integration  # a fork server runs the tool's children
def test_a_lock_the_replay_fails_on_counts_against_the_class_though_the_file_was_written(tmp_path: Path) -> None:
    killed = killed_before("locked_write", "unlink", tmp_path)
    assert killed.debris == ("draft.txt.lock",) and not killed.ok and killed.differs, killed
    assert "FileExistsError" in str(killed.error), killed.error


DEBRIS = Observation(KILL, {"path": "a.txt"}, ok=True, error=None, changed=True, differs=False, points=3, kill_at=1,
                     kill_label="just after create a.txt.<hex>.tmp", debris=("a.txt.<hex>.tmp",))
LOCKED = Observation(KILL, {"path": "a.txt"}, ok=False, error="a.txt.lock exists", changed=True, differs=True,
                     points=3, kill_at=2, kill_label="unlink a.txt.lock", debris=("a.txt.lock",))
PUT = Observation(REPLAY, {"path": "a.txt"}, ok=True, error=None, changed=True, differs=False, points=3)


def test_debris_changes_no_verdict_and_the_reason_and_certificate_name_it() -> None:
    judgement = judge(p.IDEMPOTENT_WRITE, interactive=False, result=SearchResult((PUT, DEBRIS), None, None, 0.1))
    assert judgement.verdict == CONFIRMED and judgement.strongest == p.IDEMPOTENT_WRITE
    assert judgement.reason.endswith("a kill left a.txt.<hex>.tmp, which the replay did not remove and one call does "
                                     "not leave: debris (a crash-safety finding), not a repeated effect")
    found = debris_found((DEBRIS, LOCKED))
    assert found == [
        {"files": ["a.txt.<hex>.tmp"], "args": {"path": "a.txt"}, "kill_at": 1,
         "kill_label": "just after create a.txt.<hex>.tmp", "kill_after_ms": None, "replay_ok": True},
        {"files": ["a.txt.lock"], "args": {"path": "a.txt"}, "kill_at": 2, "kill_label": "unlink a.txt.lock",
         "kill_after_ms": None, "replay_ok": False, "replay_error": "a.txt.lock exists"}]
    assert debris_text(found) == "debris: a.txt.<hex>.tmp", "a leftover the replay failed on is no mere debris"
    from killpoint.harness.certify.trials import Evidence

    refuted = judge(p.IDEMPOTENT_WRITE, interactive=False,
                    result=SearchResult((PUT, LOCKED), Evidence(LOCKED, {}), None, 0.1))
    assert refuted.verdict == REFUTED and refuted.reason.startswith(
        "killed at point 2 of the call (before unlink a.txt.lock), the replay failed on what the kill left "
        "(a.txt.lock): a.txt.lock exists"), refuted.reason


def certify(killpoint: Killpoint, out: Path, function: str) -> tuple[CliResult, dict[str, Any]]:
    result = killpoint("certify", function, "--claim", "IDEMPOTENT_WRITE", "--python", f"{MODULE}:{function}",
                       "--world", str(TOOLS / "world"), "--seed", "0", "--out", out)
    return result, json.loads((out / f"{function}.json").read_text())


@pytest.mark.integration  # a fork server runs the tool's children
def test_a_write_by_temporary_file_and_rename_is_confirmed_with_its_debris_reported(killpoint: Killpoint,
                                                                                  tmp_path: Path) -> None:
    result, data = certify(killpoint, tmp_path, "random_temp_write")
    assert result.exit_code == 0 and data["verdict"] == "CONFIRMED", result.out
    assert data["trials"]["kill_diverged"] == 0 and data["debris"], data["trials"]
    assert {name for entry in data["debris"] for name in entry["files"]} <= {"draft.txt.<hex>.tmp",
                                                                             "notes.txt.<hex>.tmp"}
    assert all(entry["replay_ok"] and entry["kill_at"] for entry in data["debris"]), data["debris"]
    assert "debris: " in result.out and "DEBRIS random_temp_write: a kill left files the replay did not remove" in (
        result.out)


@pytest.mark.integration  # a fork server runs the tool's children
def test_an_append_by_temporary_file_and_rename_is_still_refuted(killpoint: Killpoint, tmp_path: Path) -> None:
    result, data = certify(killpoint, tmp_path, "random_temp_append")
    assert result.exit_code == 1 and data["verdict"] == "REFUTED", result.out
    assert data["counterexample"]["check"] == "one call, then the same call again"


@pytest.mark.integration  # a fork server runs the tool's children
def test_a_lock_left_by_a_kill_that_makes_the_replay_fail_is_still_refuted(killpoint: Killpoint,
                                                                          tmp_path: Path) -> None:
    result, data = certify(killpoint, tmp_path, "locked_write")
    assert result.exit_code == 1 and data["verdict"] == "REFUTED", result.out
    example = data["counterexample"]
    assert example["check"] == "killed part-way, then replayed" and not example["call_ok"]
    assert "extra   draft.txt.lock" in example["diffs"]["the replay left (against one uninterrupted call)"]


@pytest.mark.integration
def test_an_mcp_servers_temp_file_is_debris_while_an_append_and_a_lock_are_refuted(tmp_path: Path) -> None:
    """A real server killed part-way (held at its change, ``world_holds``), seed 0, 2 draws per tool."""
    command = shlex.join([sys.executable, str(ATOMIC), "{world}"])
    done = subprocess.run([*shlex.split(killpoint_command()), "certify", "--mcp", command, "--seed", "0",
                           "--trials", "2", "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=False)
    certificates = {path.stem: json.loads(path.read_text()) for path in tmp_path.glob("*.json")}
    assert done.returncode == 1, done.stdout + done.stderr
    assert {tool: data["verdict"] for tool, data in certificates.items()} == {
        "append_line": "REFUTED", "locked_save": "REFUTED", "save_file": "CONFIRMED"}, done.stdout
    save = certificates["save_file"]
    assert save["adapter"]["annotations"]["idempotentHint"] is True and save["strongest_supported"] == p.IDEMPOTENT_WRITE
    assert save["trials"]["kill"] > 0 and save["trials"]["kill_diverged"] == 0, save["trials"]
    assert save["debris"] and all(entry["replay_ok"] for entry in save["debris"]), save["debris"]
    assert all(len(entry["files"]) == 1 and entry["files"][0].endswith(".txt.<hex>.tmp")
               for entry in save["debris"]), save["debris"]
    assert "debris: a.txt.<hex>.tmp" in done.stdout and "DEBRIS save_file" in done.stdout, done.stdout
    locked = certificates["locked_save"]["counterexample"]
    assert locked["check"] == "killed part-way, then replayed" and not locked["call_ok"], locked
    assert "extra   a.txt.lock" in locked["diffs"]["the replay left (against one uninterrupted call)"], locked
