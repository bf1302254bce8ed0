"""Runs carried out in a scratch folder on tmpfs keep on disk what runs on disk kept, and nothing stays in scratch.

A correct runtime passes there as on a disk; a passing run leaves run.json and
verdict.json, a failing one its whole evidence (``killpoint show`` reads it);
the copy of a hostile run's folder follows no link, opens no FIFO, copies no
hard link and says what it left out; --no-scratch and power-loss runs are
carried out in the runs directory itself; a session stopped by a signal still
leaves the evidence of the runs under way on disk, and the folder a SIGKILLed
harness left is swept by the next session.
"""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path

import pytest

from killpoint.harness.execute import scratch
from killpoint.harness.execute.scratch import PREFIX, default_root
from killpoint.harness.layout import SCRATCH_COPY_NAME
from tests.helpers import DEMO, mutant_workload
from tests.integration.test_harness_signals import (DEADLINE_S, finished_runs, interrupt_midway, start_harness,
                                                    survivors, wait_for)
from tests.integration.test_hostile_world import run_harness

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(default_root() is None, reason="/dev/shm is no tmpfs with room here")]
PLANTS = "{python} -m killpoint.scenarios.hostile.plants_in_run_dir"


def scratch_folders(pid: int, root: Path = scratch.DEFAULT_ROOT) -> list[Path]:
    return sorted(root.glob(f"{PREFIX}{pid}.*"))


def run_dirs(runs: Path) -> list[Path]:
    return sorted(runs.glob("run-*"))


def workload_said(run: Path) -> Path:
    """Where the plants_in_run_dir workload's first incarnation found its run directory."""
    line = (run / "incarnation-0.stderr").read_text().splitlines()[0]
    return Path(line.removeprefix("run dir: "))


@pytest.mark.parametrize("flags", [("--exhaustive",), ("--exhaustive", "--depth", "2", "--shard", "1/12", "-j", "2")],
                         ids=["demo-exhaustive", "depth-2-shard"])
def test_a_correct_runtime_passes_on_scratch_and_leaves_only_its_verdicts_on_disk(killpoint, tmp_path, flags):
    runs, report = tmp_path / "runs", tmp_path / "report.json"
    before = scratch_folders(os.getpid())  # an earlier test in this process may have left one (an escapee's)
    result = killpoint("run", DEMO, *flags, "--runs-dir", runs, "--json", report)
    assert result.exit_code == 0, result.out + result.err
    runs_seen = run_dirs(runs)
    assert len(runs_seen) >= 20
    for run in runs_seen:
        assert sorted(entry.name for entry in run.iterdir()) == ["run.json", "verdict.json"], run
        assert json.loads((run / "verdict.json").read_text())["run_dir"] == str(run)
    assert set(scratch_folders(os.getpid())) <= set(before), "the session left a scratch folder"
    assert PREFIX not in report.read_text()


def test_a_failing_run_keeps_its_whole_evidence_on_disk_and_show_reads_it(killpoint, tmp_path):
    runs, report = tmp_path / "runs", tmp_path / "report.json"
    before = scratch_folders(os.getpid())  # an earlier test in this process may have left one (an escapee's)
    result = killpoint("run", DEMO, "--workload", mutant_workload("retry_non_idempotent"), "--kill-at",
                       "c5:after_effect", "--runs-dir", runs, "--json", report)
    assert result.exit_code == 1, result.out + result.err
    (run,) = run_dirs(runs)
    for evidence in ("run.json", "verdict.json", "plan.json", "catalogue.json", "ledger.jsonl", "incarnations.json",
                     "journal-at-kill-0.jsonl", "workload/journal.jsonl", "world/files", "incarnation-0.stdout",
                     "incarnation-0.stderr", "incarnation-1.stdout", "incarnation-1.stderr"):
        assert (run / evidence).exists(), f"{evidence} is not on disk: {sorted(run.rglob('*'))}"
    assert (run / "ledger.jsonl").stat().st_size > 0 and (run / "workload" / "journal.jsonl").stat().st_size > 0
    assert not (run / SCRATCH_COPY_NAME).exists()  # nothing was left out
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["valid"] is False and verdict["run_dir"] == str(run)
    assert PREFIX not in report.read_text() and PREFIX not in (run / "verdict.json").read_text()
    assert set(scratch_folders(os.getpid())) <= set(before), "the session left a scratch folder"
    shown = killpoint("show", run)
    assert shown.exit_code == 0, shown.out + shown.err
    assert "verdict: failed" in shown.out and "[interrupted-action] c5" in shown.out


@pytest.mark.parametrize("where", ["dev-shm", "named-folder"])
def test_a_hostile_run_folder_is_copied_without_following_opening_or_linking_and_says_what_it_left_out(
        tmp_path, where):
    """--keep-all copies every run, so the copy meets the plants though the runtime passes.

    In a named folder on the disk the hard link to the outside file can be made (on /dev/shm it would cross devices).
    """
    runs, outside = tmp_path / "runs", tmp_path / "host" / "secret.txt"
    outside.parent.mkdir()
    outside.write_text("host secret: never copied\n")
    chosen = tmp_path / "scratch"
    chosen.mkdir()
    flags = ("--scratch", chosen) if where == "named-folder" else ()
    harness = run_harness(tmp_path / "harness.log", "run", DEMO, "--kill-at", "c4:after_effect", "--keep-all",
                          "--workload", f"{PLANTS} {outside}", "--runs-dir", runs, *flags)
    assert harness.exit_code == 0, harness.output[-3000:]
    (run,) = run_dirs(runs)
    root = chosen if where == "named-folder" else scratch.DEFAULT_ROOT
    assert workload_said(run).is_relative_to(root) and workload_said(run).name == "workload"
    refused = {line.split()[3].rstrip(":") for run_dir in (runs / "golden", run)
               for line in (run_dir / "incarnation-0.stderr").read_text().splitlines()
               if line.startswith("could not plant ")}  # a socket path too long, a hard link across devices
    planted = {"passwd-link", "pipe", "socket", "linked.txt"} - refused
    assert {"passwd-link", "pipe"} <= planted and ("linked.txt" in planted) == (where == "named-folder"), refused
    said = (run / SCRATCH_COPY_NAME).read_text()
    assert all(f"workload/{name}" in said for name in planted), said
    notes = json.loads((run / "verdict.json").read_text())["notes"]
    assert any(SCRATCH_COPY_NAME in note for note in notes), notes
    for path in run.rglob("*"):  # the golden run is carried out on disk: its plants are where it made them
        mode = path.lstat().st_mode
        assert stat.S_ISDIR(mode) or stat.S_ISREG(mode), f"{path} is neither a file nor a folder"
        if stat.S_ISREG(mode):
            assert path.lstat().st_nlink == 1, f"{path} is a hard link"
            assert b"host secret" not in path.read_bytes(), f"{path} holds the outside file's content"
            assert b"root:x:0:0" not in path.read_bytes(), f"{path} holds /etc/passwd"
    assert outside.read_text() == "host secret: never copied\n"
    assert list(chosen.iterdir()) == []


def test_no_scratch_carries_runs_out_in_the_runs_directory(killpoint, tmp_path):
    runs = tmp_path / "runs"
    result = killpoint("run", DEMO, "--kill-at", "c4:after_effect", "--keep-all", "--no-scratch",
                       "--workload", PLANTS, "--runs-dir", runs)
    assert result.exit_code == 0, result.out + result.err
    (run,) = run_dirs(runs)
    assert workload_said(run) == (run / "workload").resolve()
    assert os.path.lexists(run / "workload" / "passwd-link")  # left where the workload made it, as before
    assert not (run / SCRATCH_COPY_NAME).exists()


def test_a_power_loss_session_is_carried_out_on_disk(killpoint, tmp_path):
    runs = tmp_path / "runs"
    result = killpoint("run", DEMO, "--kill-at", "c4:after_effect/power", "--keep-all", "--workload", PLANTS,
                       "--runs-dir", runs)
    if result.exit_code == 2 and "FUSE" in result.err:
        pytest.skip(result.err)
    assert result.exit_code == 0, result.out + result.err
    (run,) = run_dirs(runs)
    assert workload_said(run) == (run / "workload").resolve()
    refused = killpoint("run", DEMO, "--power-loss", "--scratch", tmp_path, "--runs-dir", tmp_path / "refused")
    assert refused.exit_code == 2 and "--scratch" in refused.err and "power-loss" in refused.err, refused.err


@pytest.mark.parametrize(("flags", "flag"), [(("--scratch", "/no/such/folder"), "--scratch /no/such/folder"),
                                             (("--scratch", "/dev/null"), "--scratch /dev/null"),
                                             (("--scratch", "/tmp", "--no-scratch"), "--no-scratch")])
def test_a_bad_scratch_choice_is_bad_input_naming_the_flag(killpoint, tmp_path, flags, flag):
    result = killpoint("run", DEMO, *flags, "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 2 and flag in result.err and "Traceback" not in result.err, result.err
    assert not (tmp_path / "runs").exists()


def test_a_stopped_session_keeps_the_evidence_of_its_runs_under_way_on_disk(tmp_path):
    laid_out: list[Path] = []
    for attempt in range(5):  # the signal may find no run under way past its layout: then stop another session
        (tmp_path / f"attempt-{attempt}").mkdir()
        harness, runs, stderr, _ = interrupt_midway(tmp_path / f"attempt-{attempt}", signal.SIGTERM)
        assert harness.returncode == 143, stderr.read_text()
        laid_out += [run for run in run_dirs(runs) if (run / "interrupted.json").exists() and kept_under_way(run)]
        assert scratch_folders(harness.pid) == []
        if laid_out:
            break
    assert laid_out, "no run under way had its evidence kept"


def kept_under_way(run: Path) -> bool:
    """Check what a run marked interrupted kept on disk; True if it had laid its run out (it has its plan)."""
    entries = sorted(entry.name for entry in run.iterdir())
    assert {"run.json", "interrupted.json"} <= set(entries) or entries == ["interrupted.json"], entries
    assert not (run / "verdict.json").exists(), entries  # a run judged and saved is never marked interrupted
    # Stopped while it laid its run out, a run keeps part of the layout; once an incarnation has ended
    # (incarnations.json lists it), the whole scratch folder came over, its logs too.
    if (run / "incarnations.json").exists() and json.loads((run / "incarnations.json").read_text()):
        assert {"plan.json", "catalogue.json", "workload", "world", "incarnation-0.stdout",
                "incarnation-0.stderr"} <= set(entries), (entries, (run / "incarnations.json").read_text())
    return (run / "plan.json").exists()


def test_the_scratch_folder_of_a_killed_harness_is_swept_by_the_next_session(tmp_path):
    # A scratch root of the test's own: any session starting elsewhere (another xdist worker's) sweeps /dev/shm too.
    root = tmp_path / "scratch"
    root.mkdir()
    harness, runs, _, processes = interrupt_midway(tmp_path, signal.SIGKILL, "--scratch", str(root))
    assert finished_runs(runs) >= 3
    wait_for(lambda: not survivors(processes, runs), "no process of the killed harness left")
    left = scratch_folders(harness.pid, root)
    assert left, "a SIGKILLed harness cannot remove its scratch folder"
    after, after_stderr = start_harness(tmp_path / "after", tmp_path, "--kill-at", "c1:after_started",
                                        "--scratch", str(root))
    assert after.wait(DEADLINE_S) == 0, after_stderr.read_text()
    assert scratch_folders(harness.pid, root) == []
    assert str(left[0]) not in after_stderr.read_text()  # another session's housekeeping is not this one's news
