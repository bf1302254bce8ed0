"""Power losses for real: a lazy file system under the runtime's storage, dropped after each confirmed kill.

The reference runtime fsyncs every record and its journal's folder, so no mode
with every kill a power loss finds anything; a mutant that never fsyncs is
caught, through every backend, and its token reproduces the same failure every
time (the drop is seeded). A harness SIGKILLed mid-run leaves a mount whose
daemon died with it; ``killpoint clean`` (and the next session) unmounts it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from killpoint.harness.faults import lazyfs
from killpoint.harness.faults.lazyfs import mount
from killpoint.harness.layout import RunPaths
from killpoint.harness.schedules.hunt import FOUND_NAME
from tests.conftest import workload_processes
from tests.helpers import DEMO, ROOT, mutant_workload
from tests.integration.test_docker_backend import docker_engine  # noqa: F401  (a fixture)

NEVER_FSYNCED = mutant_workload("journal_never_fsynced")
DEADLINE_S = 30.0


def lazy_mounts() -> list[str]:
    """The mount points of every lazy file system on this machine (``/proc/self/mountinfo``)."""
    with open("/proc/self/mountinfo") as mounts:
        return [line.split()[4] for line in mounts if f" - fuse.{lazyfs.FSNAME} " in line]


def mounts_under(folder: Path) -> list[str]:
    return [mount for mount in lazy_mounts() if mount.startswith(str(folder))]


def report(killpoint, tmp_path: Path, *args: str | Path) -> tuple[int, dict, str]:
    path = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
    result = killpoint("run", *args, "--json", path)
    return result.exit_code, json.loads(path.read_text()) if path.exists() else {}, result.out + result.err


def test_the_reference_runtime_passes_every_exhaustive_power_loss_and_each_keeps_what_was_dropped(killpoint, tmp_path):
    runs = tmp_path / "runs"
    code, data, out = report(killpoint, tmp_path, DEMO, "--exhaustive", "--power-loss", "--keep-all",
                             "--runs-dir", runs, "-j", "2")
    assert code == 0, out[-3000:]
    assert "power loss" in out and data["summary"]["failed"] == 0 and len(data["runs"]) == 30
    assert mounts_under(tmp_path) == []
    for run in data["runs"]:
        run_dir = Path(run["run_dir"])
        dropped = json.loads(RunPaths(run_dir).power_loss_report(0).read_text())
        assert dropped["variant"] == "plain" and dropped["entries"] == []
        # Every record the reference journaled was fsynced before the point it was killed at: nothing to lose.
        assert all(not file["dropped"] for file in dropped["files"]), dropped
        assert (RunPaths(run_dir).disk_at_kill(0) / "journal.jsonl").read_bytes() == \
            (RunPaths(run_dir).disk_after_drop(0) / "journal.jsonl").read_bytes() == \
            RunPaths(run_dir).journal_after_drop(0).read_bytes()
        workload = RunPaths(run_dir).workload
        assert workload.is_dir() and not os.path.ismount(workload) and (workload / "journal.jsonl").exists()
        assert not (run_dir / ".lazyfs").exists()
        marker = next(json.loads(line) for line in (run_dir / "ledger.jsonl").read_text().splitlines()
                      if '"killed"' in line)
        assert marker["power"] == "plain" and marker["seed"] == 0


@pytest.mark.parametrize("flags", [
    pytest.param(("--random", "12", "--seed", "5"), id="random"),
    pytest.param(("--random", "12", "--seed", "5", "--torn-tail"), id="random-torn"),
    pytest.param(("--exhaustive", "--torn-tail"), id="exhaustive-torn"),
    pytest.param(("--timed", "--runs", "6", "--seed", "2"), id="timed"),
    pytest.param(("--kill-on", "ledger:effect:c3"), id="kill-on"),
    pytest.param(("--kill-at", "c3:after_started/now"), id="no-pause"),
    pytest.param(("--exhaustive", "--drift", "append=READ_ONLY"), id="drift"),
])
def test_no_power_loss_mode_finds_anything_in_the_reference_runtime(killpoint, tmp_path, flags):
    code, data, out = report(killpoint, tmp_path, DEMO, "--power-loss", *flags, "-j", "2")
    assert code == 0, out[-3000:]
    kills = [kill for run in data["runs"] for kill in run["schedule"]]
    assert kills and all("/power" in kill for kill in kills), kills
    torn = {variant for kill in kills for variant in ("op", "seq") if f"/power:{variant}:" in kill}
    if "--exhaustive" in flags and "--torn-tail" in flags:
        assert torn == {"op", "seq"}, kills
    elif "--torn-tail" in flags:
        assert torn, kills


def failing_token(killpoint, tmp_path: Path, *args: str | Path) -> str:
    code, data, out = report(killpoint, tmp_path, DEMO, "--workload", NEVER_FSYNCED, *args)
    assert code == 1, out[-3000:]
    failed = [run for run in data["runs"] if run["valid"] is False]
    assert failed and "write-ahead" in {finding["property"] for finding in failed[0]["findings"]}
    return failed[0]["token"]


def test_a_mutant_that_never_fsyncs_passes_a_kill_and_is_caught_by_the_same_kill_as_a_power_loss(killpoint, tmp_path):
    code, _, out = report(killpoint, tmp_path, DEMO, "--workload", NEVER_FSYNCED, "--kill-at", "c3:after_effect")
    assert code == 0, out[-2000:]
    code, data, out = report(killpoint, tmp_path, DEMO, "--workload", NEVER_FSYNCED, "--kill-at", "c3:after_effect/power")
    assert code == 1, out[-2000:]
    [finding, *_] = [finding for finding in data["runs"][0]["findings"] if finding["call"] == "c3"]
    assert finding["property"] == "write-ahead" and "survived the loss of what was never durable" in finding["message"]
    assert any(line.startswith("power-loss-0.json: journal.jsonl: bytes 0..") and "never fsynced" in line
               for line in finding["evidence"]), finding
    shown = killpoint("show", data["runs"][0]["run_dir"])
    assert "power loss at kill 0:\n  power-loss-0.json: journal.jsonl: bytes 0.." in shown.out, shown.out


@pytest.fixture
def world_on_device(tmp_path) -> Path:
    """The demo with its fake world on the device too (``world_on_device = true``)."""
    text = DEMO.read_text()
    start = text.index("\n[")
    path = tmp_path / "demo_device.toml"
    path.write_text(f"{text[:start]}\nworld_on_device = true\n{text[start:]}")
    return path


def test_a_world_on_the_device_is_dropped_too_and_the_fake_tools_keep_it_by_syncing_it(killpoint, tmp_path,
                                                                                        world_on_device):
    code, data, out = report(killpoint, tmp_path, world_on_device, "--exhaustive", "--power-loss", "--keep-all",
                             "-j", "2")
    assert code == 0, out[-3000:]
    run_dir = Path(data["runs"][-1]["run_dir"])
    assert json.loads((run_dir / "power-loss-0.world.json").read_text())["variant"] == "plain"
    assert (run_dir / "world-at-kill-0").is_dir() and (run_dir / "world-after-drop-0").is_dir()
    assert not os.path.ismount(RunPaths(run_dir).world) and mounts_under(tmp_path) == []
    # Fake tools that never sync the world (the workload drops the flag that asks them to): their effects are lost.
    code, data, out = report(killpoint, tmp_path, world_on_device, "--kill-at", "c4:before_started/power",
                             "--workload", "env -u KILLPOINT_WORLD_DURABLE {python} -m killpoint.scenarios.reference_runtime")
    assert code == 1, out[-3000:]
    assert any(finding["property"] == "world-equals-golden" and "missing files/orders/summary.txt" in finding["evidence"]
               for finding in data["runs"][0]["findings"]), data["runs"][0]["findings"]


def test_a_torn_power_loss_token_reproduces_its_failure_twenty_times_out_of_twenty(killpoint, tmp_path):
    token = failing_token(killpoint, tmp_path, "--kill-at", "c4:after_effect/power:op:7")
    reproduced = [killpoint("repro", token) for _ in range(20)]
    assert [repro.exit_code for repro in reproduced] == [1] * 20, reproduced[0].out[-2000:]
    assert all(re.search(r"reproduced: this run broke [\w, -]*write-ahead[\w, -]*, as the token recorded", repro.out)
               for repro in reproduced), reproduced[0].out[-2000:]


@pytest.mark.parametrize("restart", ["new", "same"])
def test_a_power_loss_reaches_a_runtime_in_a_container_through_the_bound_mount(killpoint, tmp_path, restart,
                                                                               docker_engine):
    backend = ("--backend", "docker", "--restart", restart)
    code, _, out = report(killpoint, tmp_path, DEMO, "--kill-at", "c3:after_effect/power", *backend)
    assert code == 0, out[-3000:]
    failing_token(killpoint, tmp_path, "--kill-at", "c3:after_effect/power", *backend)
    assert mounts_under(tmp_path) == []


def test_the_fork_server_and_subprocess_backends_both_lose_what_was_never_fsynced(killpoint, tmp_path):
    for backend in ("forkserver", "subprocess"):
        failing_token(killpoint, tmp_path, "--kill-at", "c2:after_effect/power", "--backend", backend)


def test_a_hunt_with_power_losses_finds_the_mutant_and_shrinks_it_to_a_power_loss(killpoint, tmp_path):
    result = killpoint("hunt", DEMO, "--workload", NEVER_FSYNCED, "--power-loss", "--examples", "40",
                       "--out", tmp_path / "found")
    assert result.exit_code == 1, result.out + result.err
    assert "write-ahead" in result.out and "/power" in result.out and (tmp_path / "found" / FOUND_NAME).exists()


def test_a_hunt_with_power_losses_finds_nothing_in_the_reference_runtime(killpoint, tmp_path):
    result = killpoint("hunt", DEMO, "--power-loss", "--examples", "25", "--out", tmp_path / "found")
    assert result.exit_code == 0, result.out + result.err
    assert not (tmp_path / "found" / FOUND_NAME).exists()


def test_a_harness_killed_mid_run_leaves_a_dead_mount_that_clean_unmounts(killpoint, tmp_path):
    runs = tmp_path / "runs"
    harness = subprocess.Popen(
        [sys.executable, "-m", "killpoint", "run", str(DEMO), "--power-loss", "--random", "5000", "--seed", "1",
         "--runs-dir", str(runs), "-q"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not mounts_under(runs):
            assert time.monotonic() < deadline, "no lazy file system was mounted in time"
            time.sleep(0.02)
    finally:
        os.killpg(harness.pid, signal.SIGKILL)
        harness.wait()
    # An incarnation the dead harness can no longer kill may hold files of the mount open, which keeps its
    # daemon serving the (lazily detached) mount: a harness SIGKILLed mid-run leaves such orphans to clean-up.
    for orphan in workload_processes(tmp_path):
        with contextlib.suppress(psutil.NoSuchProcess):
            orphan.kill()
    deadline = time.monotonic() + DEADLINE_S
    while daemons_of(runs):  # each daemon exits once its harness's end of their socket pair closes
        assert time.monotonic() < deadline, f"lazy fs daemons outlived their harness: {daemons_of(runs)}"
        time.sleep(0.02)
    left = mounts_under(runs)
    result = killpoint("clean")
    assert all(f"unmounted {mount}" in result.out for mount in left), result.out
    assert mounts_under(runs) == []


def daemons_of(runs: Path) -> list[int]:
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = process.info["cmdline"] or []
        if "killpoint.harness.faults.lazyfs.daemon" in cmdline and any(str(runs) in word for word in cmdline):
            found.append(process.info["pid"])
    return found


def test_power_loss_where_fuse_is_missing_is_bad_input_before_anything_runs(killpoint, tmp_path, monkeypatch):
    monkeypatch.setenv(mount.FUSE_DEVICE_ENV, str(tmp_path / "no-fuse"))
    monkeypatch.setattr(mount, "_probed", False)
    runs = tmp_path / "runs"
    result = killpoint("run", DEMO, "--exhaustive", "--power-loss", "--runs-dir", runs)
    assert result.exit_code == 2, result.out + result.err
    assert "--power-loss needs FUSE" in result.err and "apt-get install fuse3" in result.err
    assert "Traceback" not in result.err and not (runs / "golden").exists()
    result = killpoint("run", DEMO, "--kill-at", "c2:after_effect/power", "--runs-dir", runs)
    assert result.exit_code == 2 and "--power-loss needs FUSE" in result.err
