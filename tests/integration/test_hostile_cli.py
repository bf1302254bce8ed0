"""Flags and leftovers, against real harness processes: ``-j`` never forks more workers than there are schedules
and a SIGTERM ends the session promptly; a shard that holds no schedule establishes nothing (exit 3); and
``killpoint clean`` removes what a SIGKILLed harness left (its incarnation cgroup, scratch and control folders,
certify's and the store reader's temporary folders), never what a live session holds."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from killpoint.harness.backends import _cgroup
from killpoint.harness.model import Job
from killpoint.harness.schedules.explore import children, shard_of
from tests.helpers import DEMO, ROOT, workload_command
from tests.integration.test_harness_signals import wait_for

pytestmark = pytest.mark.hostile

# The machine runs other sessions' suites beside this one: a golden run of the demo takes 10 s or more.
START_DEADLINE_S = 240.0
STOP_DEADLINE_S = 30.0
LIAR = ROOT / "tests" / "certify" / "servers" / "liar.py"  # an MCP server (tests/certify/test_mcp_servers.py)


def killpoint(*args: str | Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "killpoint", *map(str, args)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def workers_of(harness: psutil.Process) -> list[psutil.Process]:
    """The harness's parallel workers: children forked from it, so with its very argv (a fork server has its own)."""
    try:
        argv = harness.cmdline()
        return [child for child in harness.children() if child.cmdline() == argv]
    except psutil.Error:
        return []


@pytest.fixture
def reaped() -> Iterator[list[subprocess.Popen[str]]]:
    """Harnesses a test starts; any still running after it is killed with its whole session."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for harness in started:
        if harness.poll() is None:
            os.killpg(harness.pid, signal.SIGKILL)
        harness.communicate()


def test_jobs_never_outnumber_the_schedules_and_sigterm_ends_the_session(tmp_path, reaped):
    """-j 128 on a 3-schedule session forks at most 3 workers (not 128), and SIGTERM ends it in seconds."""
    slow = tmp_path / "slow-demo.toml"  # its last call takes 5 s, so the signal lands while runs are under way
    slow.write_text(DEMO.read_text() + "\n[world.state.latency]\nshell_execute = 5\n")
    harness = killpoint("run", slow, "--random", "3", "--seed", "1", "-j", "128", "--runs-dir", tmp_path / "runs")
    reaped.append(harness)
    process = psutil.Process(harness.pid)
    wait_for(lambda: workers_of(process), "the session's first worker", START_DEADLINE_S)
    most = 0
    settle = time.monotonic() + 2.0  # a pool that forks all its workers at once has forked them by now
    while time.monotonic() < settle and harness.poll() is None:
        most = max(most, len(workers_of(process)))
        time.sleep(0.05)
    stopped = time.monotonic()
    harness.send_signal(signal.SIGTERM)
    _, err = harness.communicate(timeout=STOP_DEADLINE_S)
    assert most <= 3, f"{most} workers for 3 schedules"
    assert harness.returncode == 143, err
    assert time.monotonic() - stopped < STOP_DEADLINE_S
    assert "Traceback" not in err


def test_a_shard_that_holds_no_schedule_establishes_nothing(tmp_path, reaped):
    runs_dir = tmp_path / "runs"
    harness = killpoint("run", DEMO, "--exhaustive", "--shard", "1/40", "--json", tmp_path / "shard.json",
                        "--runs-dir", runs_dir)
    reaped.append(harness)
    out, err = harness.communicate(timeout=START_DEADLINE_S)
    # The demo's 30 schedules, from the points its crash-free run reached, none of them in shard 1 of 40.
    points = json.loads((runs_dir / "golden" / "incarnations.json").read_text())[0]["points"]
    schedules = children((), points)
    assert len(schedules) == 30 and all(shard_of(Job(0, schedule), 40) != 1 for schedule in schedules)
    assert harness.returncode == 3, out + err
    assert ("killpoint: not established: shard 1/40 holds no schedule: all 30 schedule(s) of the session fall in "
            "the other shards") in err
    assert "split the session into fewer shards than 40" in err and "Traceback" not in err
    assert json.loads((tmp_path / "shard.json").read_text())["runs"] == []  # still a report to merge


def own_cgroups(pid: int) -> list[Path]:
    """The incarnation cgroups harness ``pid`` made; it makes them beside this test's (it inherited its cgroup)."""
    parent = _cgroup.usable_parent()
    assert parent is not None, "this machine has cgroups for incarnations: the host backends' tests rely on it"
    return sorted(parent.glob(f"{_cgroup.NAME_PREFIX}{pid}.*"))


def leftovers_of(pid: int) -> dict[str, list[Path]]:
    """Everything harness ``pid`` holds on the host, by kind."""
    temp = [path for root in {Path(tempfile.gettempdir()), Path("/tmp")} for path in root.glob(f"killpoint-*-{pid}.*")]
    return {"cgroup": own_cgroups(pid), "scratch": sorted(Path("/dev/shm").glob(f"killpoint-scratch-{pid}.*")),
            "control": sorted(Path(tempfile.gettempdir()).glob(f"kp-{pid}-*")), "temporary": sorted(temp)}


def still_running(harness: subprocess.Popen[str]) -> bool:
    """True while ``harness`` runs; a harness that ended fails the test at once, with what it printed."""
    if harness.poll() is None:
        return True
    out, err = harness.communicate()
    pytest.fail(f"{shlex.join(map(str, harness.args))} ended (exit {harness.returncode}) before the test held it:\n"
                f"{out}{err}")


def hanging_session(runs_dir: Path) -> subprocess.Popen[str]:
    return killpoint("run", DEMO, "--workload", workload_command("hangs.py"), "--timeout", "600", "--kill-at",
                     "c1:after_effect", "--runs-dir", runs_dir)


def test_clean_removes_what_a_sigkilled_harness_left_and_nothing_of_a_live_one(tmp_path, reaped):
    killed, live = hanging_session(tmp_path / "killed"), hanging_session(tmp_path / "live")
    # Claims that hold, so every one of the 100000 draws runs (a refuted or confirmed claim ends at its first trial).
    certifying = killpoint("certify", "write_file", "--claim", "IDEMPOTENT_WRITE", "--trials", "100000", "--seed", "0",
                           "--out", tmp_path / "certificates")
    serving = killpoint("certify", "--mcp", shlex.join([sys.executable, str(LIAR), "{world}"]), "--tool", "set_value",
                        "--trials", "100000", "--seed", "0", "--out", tmp_path / "mcp-certificates")
    reaped += [killed, live, certifying, serving]
    for harness in (killed, live):  # each holds its golden incarnation, hung, in a cgroup of its own
        wait_for(lambda: all(leftovers_of(harness.pid)[kind] for kind in ("cgroup", "scratch", "control")),
                 f"harness {harness.pid}'s cgroup, scratch and control folders", START_DEADLINE_S)
    wait_for(lambda: still_running(certifying) and leftovers_of(certifying.pid)["temporary"],
             "certify's temporary folder", START_DEADLINE_S)
    wait_for(lambda: still_running(serving) and any(
        path.name.startswith("killpoint-mcp-") and "-list-" not in path.name
        for path in leftovers_of(serving.pid)["temporary"]), "the MCP worlds' folder", START_DEADLINE_S)
    held = leftovers_of(killed.pid)
    held["temporary"] = leftovers_of(certifying.pid)["temporary"] + leftovers_of(serving.pid)["temporary"]
    os.kill(killed.pid, signal.SIGKILL)  # the harness alone, as the OOM killer takes it: its incarnation stays
    for harness in (certifying, serving):
        os.killpg(harness.pid, signal.SIGKILL)
    for harness in (killed, certifying, serving):
        harness.wait(timeout=STOP_DEADLINE_S)
    still_live = leftovers_of(live.pid)

    clean = subprocess.run([sys.executable, "-m", "killpoint", "clean"], cwd=ROOT, capture_output=True, text=True,
                           timeout=STOP_DEADLINE_S * 4)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    for kind, paths in held.items():
        for path in paths:
            assert not path.exists(), f"{kind} {path} of the SIGKILLed harness is still there"
    # Any harness that starts meanwhile (this machine runs others) sweeps gone harnesses' cgroups, scratch and
    # control folders too; the temporary folders only clean takes.
    for folder in held["temporary"]:
        assert f"removed {folder}, a temporary folder of a harness process now gone" in clean.stdout
    assert leftovers_of(live.pid) == still_live, "clean took something of a live session"
    live.send_signal(signal.SIGTERM)
    _, err = live.communicate(timeout=STOP_DEADLINE_S)
    assert live.returncode == 143, err
    wait_for(lambda: not any(leftovers_of(live.pid).values()), "the live session's own clean-up", STOP_DEADLINE_S)


def test_a_store_copy_of_a_sigkilled_reader_is_removed(tmp_path, reaped):
    """The SQLite store reader's private copy (killpoint-store-*), held by a process SIGKILLed while it reads."""
    reader = subprocess.Popen([sys.executable, "-c", (
        "import time\n"
        "from killpoint.harness.judge.stores._sandbox import private_folder\n"
        "with private_folder():\n"
        "    print('reading', flush=True); time.sleep(600)\n")],
        cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True)
    reaped.append(reader)
    assert reader.stdout is not None and reader.stdout.readline() == "reading\n"
    (copy,) = leftovers_of(reader.pid)["temporary"]
    os.kill(reader.pid, signal.SIGKILL)
    reader.wait(timeout=STOP_DEADLINE_S)
    clean = subprocess.run([sys.executable, "-m", "killpoint", "clean"], cwd=ROOT, capture_output=True, text=True,
                           timeout=STOP_DEADLINE_S * 4)
    assert f"removed {copy}, a temporary folder of a harness process now gone" in clean.stdout, clean.stdout
    assert not copy.exists()
