"""The reference runtime judged black-box (``[journal] format = "killpoint"``): from copies of its journal taken at
every kill as a store, the ledger and the world, with its decisions ignored.

The correct runtime must pass every kill the white-box checker passes it on (a
false alarm here would be the worst defect); each mutant must fail with the
property that names its bug; a workload that swaps its store at a kill is
reported, never followed, and never hangs the harness.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import DEMO, mutant_workload

pytestmark = pytest.mark.integration

JOURNAL_TABLE = '\n[journal]\nformat = "killpoint"\n'
# Three calls (READ_ONLY, NON_IDEMPOTENT, UNKNOWN): every pair of kills in a few seconds.
SHORT_PLAN = """
name = "short-black-box"
workload = ["{python}", "-m", "killpoint.scenarios.reference_runtime"]

[world.files]
"notes/todo.txt" = "order 2 boxes of tea\\n"

[plan]
task_id = "short"

[[plan.calls]]
call_id = "c1"
tool = "read_file"
args = { path = "notes/todo.txt" }

[[plan.calls]]
call_id = "c2"
tool = "append"
args = { path = "orders/log.txt", text = "ordered 2 x tea\\n" }

[[plan.calls]]
call_id = "c3"
tool = "shell_execute"
args = { command = "echo order submitted >> orders/log.txt" }
"""


@pytest.fixture
def black_box_demo(tmp_path: Path) -> Path:
    path = tmp_path / "demo-black-box.toml"
    path.write_text(DEMO.read_text().replace('name = "demo"', 'name = "demo-black-box"') + JOURNAL_TABLE)
    return path


@pytest.fixture
def black_box_short(tmp_path: Path) -> Path:
    path = tmp_path / "short-black-box.toml"
    path.write_text(SHORT_PLAN + JOURNAL_TABLE)
    return path


def report(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "report.json").read_text())


@pytest.mark.parametrize("flags", [
    pytest.param(("--exhaustive", "--torn-tail"), id="exhaustive-and-torn-tails"),  # every single kill, then torn
    pytest.param(("--exhaustive", "--drift", "append=READ_ONLY"), id="drift"),
    pytest.param(("--random", "20", "--seed", "5", "--torn-tail"), id="random"),
    pytest.param(("--timed", "--runs", "15", "--seed", "3"), id="timed"),
])
def test_the_reference_runtime_passes_black_box(killpoint, tmp_path, black_box_demo, flags):
    result = killpoint("run", black_box_demo, *flags, "--json", tmp_path / "report.json")
    assert result.exit_code == 0, result.out + result.err
    judged = report(tmp_path)
    assert judged["judged"] == "judged black-box from killpoint"
    runs = judged["runs"]
    assert runs and all(run["notes"][0] == "judged black-box from killpoint" for run in runs)
    assert all(set(run["rules"]) == {"write-ahead", "succeeded-not-replayed", "failed-not-replayed",
                                     "verify-before-replay", "liveness", "world-equals-golden"} for run in runs)
    # Kills really landed. A timed kill counts from its incarnation's own start of work, not from its launch,
    # so a slow start-up no longer makes it miss: on 2 loaded cores (load 3 to 9) 206 of 210 landed, in 14
    # sessions of these 15 runs; it misses only an incarnation that did its work faster than the crash-free run.
    assert sum(run["outcome"] == "passed" for run in runs) >= len(runs) * 2 // 3, runs


def test_the_reference_runtime_passes_every_pair_of_kills_black_box(killpoint, black_box_short):
    result = killpoint("run", black_box_short, "--exhaustive", "--depth", "2")
    assert result.exit_code == 0, result.out + result.err
    assert " 0 failed" in result.out, result.out


def test_a_torn_tail_is_judged_on_the_store_the_next_incarnation_found(killpoint, tmp_path, black_box_demo):
    """c3's finished record torn away: the recovery finds c3 RUNNING and RETRIES it, which is right."""
    runs = tmp_path / "runs"
    result = killpoint("run", black_box_demo, "--kill-at", "c3:after_finished/torn:400", "--runs-dir", runs,
                       "--keep-all")
    assert result.exit_code == 0, result.out + result.err
    run = runs / "run-00000"
    assert (run / "store-at-kill-0" / "journal.jsonl").read_bytes().endswith(b'"status":"SUCCEEDED"}\n')
    assert not (run / "store-at-kill-0.found" / "journal.jsonl").read_bytes().endswith(b"\n")
    assert (run / "store-final" / "journal.jsonl").is_file() and (runs / "golden" / "store-final").is_dir()


@pytest.mark.parametrize(("mutant", "kills", "finding"), [
    pytest.param("retry_non_idempotent", ("--kill-at", "c4:after_effect"),
                 "[verify-before-replay] c4 (kill c4:after_effect): at-least-once: c4 (append, NON_IDEMPOTENT) was "
                 "re-executed after the kill without a read-only check; its effect is in the ledger 2 time(s), 1 "
                 "before the kill and 1 after it (the crash-free run: 1); no read-only probe of it was run",
                 id="verify"),
    pytest.param("replays_succeeded", ("--kill-at", "c1:after_finished"),
                 "[succeeded-not-replayed] c1 (kill c1:after_finished): c1 was recorded SUCCEEDED in the store at "
                 "the kill, yet its tool read_file ran again 1 time(s) after the kill", id="skip"),
    pytest.param("task_lost_after_retry_crash", ("--kill-at", "c1:after_started", "--kill-at", "c1:after_started"),
                 "[liveness] c2: c2's run was lost after the crash: the crash-free run's store records it SUCCEEDED, "
                 "this run's final store holds no record of it", id="liveness"),
])
def test_each_mutant_is_caught_black_box_by_the_property_of_its_bug(killpoint, black_box_demo, mutant, kills,
                                                                    finding):
    result = killpoint("run", black_box_demo, *kills, "--workload", mutant_workload(mutant))
    assert result.exit_code == 1, result.out + result.err
    assert finding in result.out, result.out
    assert "note: judged black-box from killpoint" in result.out


def _swapping_workload(tmp_path: Path) -> str:
    """The reference runtime, swapping its journal (its store here) for a FIFO just before it is killed."""
    script = tmp_path / "swaps_store_for_fifo.py"
    script.write_text(textwrap.dedent('''
        import os, sys
        from killpoint import protocol
        from killpoint.client import Rendezvous, WorkloadEnv
        from killpoint.scenarios.reference_runtime import ReferenceRuntime

        class SwapsForFifo(Rendezvous):
            def point(self, point, *, call=None, op=None):
                journal = str(env.journal_path)
                if point == protocol.AFTER_STARTED and self.incarnation == 0 and "/golden/" not in journal:
                    os.replace(journal, journal + ".real")
                    os.mkfifo(journal)
                super().point(point, call=call, op=op)

        env = WorkloadEnv.from_environ()
        if os.path.exists(str(env.journal_path) + ".real"):  # a later incarnation puts the real one back
            os.replace(str(env.journal_path) + ".real", env.journal_path)
        runtime = ReferenceRuntime(env)
        runtime.rendezvous = SwapsForFifo(env.control_path, env.incarnation)
        sys.exit(runtime.run())
    '''))
    return f"{sys.executable} {script}"


@pytest.mark.parametrize("plant", ["symlink", "fifo"])
def test_a_store_swapped_at_the_kill_is_reported_never_followed_and_the_run_unknown(killpoint, tmp_path,
                                                                                    black_box_demo, plant):
    secret = tmp_path / "host-secret"
    secret.write_bytes(b"root's secret\n")
    secret.chmod(0o600)
    workload = (f"{{python}} -m killpoint.scenarios.hostile.swaps_journal_for_symlink {secret}" if plant == "symlink"
                else _swapping_workload(tmp_path))
    runs = tmp_path / "runs"
    result = killpoint("run", black_box_demo, "--kill-at", "c1:after_started", "--workload", workload,
                       "--runs-dir", runs, "--json", tmp_path / "report.json")
    assert result.exit_code not in (0, 2) and "Traceback" not in result.err, result.out + result.err
    assert secret.read_bytes() == b"root's secret\n" and secret.stat().st_mode & 0o777 == 0o600
    assert not any(b"root's secret" in path.read_bytes() for path in runs.rglob("*")
                   if path.is_file() and not path.is_symlink())
    (run,) = report(tmp_path)["runs"]
    assert run["valid"] is None and run["rules"]["succeeded-not-replayed"]["status"] == "unknown", run
    kind = "a symlink; it was not followed" if plant == "symlink" else "a FIFO; it was not read"
    assert any(f"at the kill, the store file journal.jsonl: journal.jsonl is {kind}" in note
               for note in run["notes"]), run["notes"]
    assert "store-at-kill-0 was refused" in run["rules"]["succeeded-not-replayed"]["reason"]
