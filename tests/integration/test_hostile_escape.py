"""Processes that leave their run's cgroup: killed once found holding the run's files, the run unknown, the session whole.

The hostile workload (tests/workloads/leaves_its_cgroup.py) runs as root: a child of each
incarnation moves itself into the root cgroup (so the incarnation's ``cgroup.kill`` misses it),
setsids, forks and execs an escapee with an empty environment (so neither the tree, the group
nor the KILLPOINT_* environment leads to it), which holds a file of the run open, works in the
run's folder, maps a file of it, or keeps writing files there. Before the fix each such escapee
outlived the session, which exited 0; the writer crashed a depth-2 ``-j 2`` session with
ENOTEMPTY from ``remove_tree`` (exit 4, no verdict).

The harness must never kill what is not the workload's: the unit-sized tests below hand
``RunFiles`` processes that hold the run's files but were started before the run, in a session
older than the run, hold only a sibling run's folder, or only the lazy file systems' state.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers import DEMO, workload_command
from tests.integration.test_blackbox_runs import SHORT_PLAN
from tests.integration.test_containment import marker  # noqa: F401 - the fixture
from tests.integration.test_containment import sleepers as alive_with
from tests.integration.test_containment import sleepers_after_deadline as alive_with_deadline

pytestmark = [pytest.mark.integration, pytest.mark.hostile]

GONE_DEADLINE_S = 5.0
HOLDS_A_FILE = "import sys, time; held = open(sys.argv[1], 'a'); print('ready', flush=True); time.sleep(600)"
# Keeps writing files in the folder argv[1] names, making it again when it is removed, as fast as it can: a removal
# of the folder's parent finds it growing again.
WRITES_FILES = ("import os, sys\nprint('ready', flush=True)\nnumber = 0\nwhile True:\n"
                "    try:\n"
                "        os.makedirs(sys.argv[1], exist_ok=True)\n"
                "        with open(os.path.join(sys.argv[1], f'out-{number % 20}'), 'w') as out: out.write('x')\n"
                "    except OSError: pass\n"
                "    number += 1")


def escapees_recorded(run_dir: Path) -> list[tuple[int, str]]:
    """The escapees the run's incarnations left, in their order, each with its cgroup (as the workload wrote them)."""
    record = run_dir / "workload" / "escapees.txt"
    return [(int(line.split()[1]), line.split()[2]) for line in record.read_text().splitlines()]


@pytest.mark.parametrize("mode, holding", [("fd", "workload/escapee.log"), ("cwd", "cwd workload"),
                                           ("mmap", "mapped workload/escapee.map")])
@pytest.mark.parametrize("backend", ["forkserver", "subprocess"])
def test_a_process_that_left_its_cgroup_holding_the_runs_files_is_killed_and_the_run_is_unknown(
        killpoint, tmp_path, marker, backend, mode, holding):
    report = tmp_path / "report.json"
    result = killpoint("run", DEMO, "--backend", backend, "--kill-at", "c4:after_effect", "--workload",
                       f"{workload_command('leaves_its_cgroup.py')} {mode} {marker}",
                       "--runs-dir", tmp_path / "runs", "--json", report)
    survivors = alive_with(marker)  # the harness confirmed them dead before it reported: no deadline to wait for
    assert survivors == [], f"{survivors} outlived the session"
    assert result.exit_code == 3, result.out + result.err
    (run,) = json.loads(report.read_text())["runs"]
    assert run["outcome"] == "unknown" and "escaped" in run["error"], run
    escapees = escapees_recorded(tmp_path / "runs" / "run-00000")  # an unknown run keeps its whole evidence
    assert len(escapees) == 2 and all(cgroup == "0::/" for _, cgroup in escapees), escapees  # out of their cgroups
    killed, recovered = run["incarnations"]  # killed at c4, then exited on its own: both ways an incarnation ends
    for incarnation, (pid, _) in zip((killed, recovered), escapees):
        (escaped,) = incarnation["escaped"]
        assert escaped.startswith(f"pid {pid} (") and holding in escaped, escaped
        # Its command line names the escapee, unless the checkout's path is so long the 80 characters shown end first.
        assert "_escapee.py" in escaped or len(escaped.partition(" held ")[0]) == len(f"pid {pid} ()") + 80, escaped
        assert f"pid {pid} (" in run["error"]


def test_a_process_that_left_its_cgroup_in_the_crash_free_run_is_a_workload_error(killpoint, tmp_path, marker):
    result = killpoint("run", DEMO, "--kill-at", "c4:after_effect", "--workload",
                       f"{workload_command('leaves_its_cgroup.py')} fd {marker} golden", "--runs-dir", tmp_path / "runs")
    assert alive_with(marker) == []
    assert result.exit_code == 2, result.out + result.err
    assert "could not run the plan even without a crash: it left processes that escaped its cgroup" in result.err
    ((pid, _),) = escapees_recorded(tmp_path / "runs" / "golden")
    assert f"pid {pid} (" in result.err and "fd 3 workload/escapee.log" in result.err, result.err


def test_a_writer_that_left_its_cgroup_does_not_end_a_parallel_depth_2_session(killpoint, tmp_path, marker):
    """It escapes in three runs, one of depth 2; what it writes races the removal of their scratch folders."""
    scenario, report = tmp_path / "short.toml", tmp_path / "report.json"
    scenario.write_text(SHORT_PLAN)
    result = killpoint("run", scenario, "--exhaustive", "--depth", "2", "-j", "2", "--workload",
                       f"{workload_command('leaves_its_cgroup.py')} writer {marker} run-00000,run-00001,run-00020",
                       "--runs-dir", tmp_path / "runs", "--json", report)
    assert result.exit_code in (0, 3), result.out + result.err
    assert "Traceback" not in result.err, result.err
    runs = json.loads(report.read_text())["runs"]
    assert len(runs) == 150 and all(run["outcome"] in ("passed", "unknown", "untested") for run in runs)
    unknown = [run for run in runs if run["outcome"] == "unknown"]
    assert all("escaped" in run["error"] for run in unknown), unknown


# Leads a new session, forks and exits, so the session outlives its leader; the child starts a holder of the file
# argv[1] names (with HOLDS_A_FILE) each time it reads a line, in that session, and says when it is ready.
SPAWNS_IN_A_LEADERLESS_SESSION = (
    "import os, subprocess, sys\n"
    "if os.fork(): os._exit(0)\n"
    "print('ready', flush=True)\n"
    "for _ in sys.stdin: subprocess.Popen([sys.executable, '-c', sys.argv[3], sys.argv[1], sys.argv[2]])\n")


def sleeper(*command: str, new_session: bool) -> subprocess.Popen[str]:
    """A process started with ``command`` once it says it is ready (it holds what it was told to)."""
    process = subprocess.Popen([sys.executable, "-c", *command], stdout=subprocess.PIPE, text=True,
                               start_new_session=new_session)
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    return process


def test_only_a_process_of_the_runs_time_and_session_holding_its_files_is_killed(tmp_path, marker):
    from killpoint.harness.execute._escapees import RunFiles

    run_dir = tmp_path / "run-0000"
    (run_dir / "workload").mkdir(parents=True)
    (tmp_path / "run-00001").mkdir()
    (run_dir / ".lazyfs").mkdir()
    before_the_run = sleeper(HOLDS_A_FILE, str(run_dir / "workload" / "early"), marker, new_session=True)
    older_session = LeaderlessSession(run_dir / "workload" / "y", marker)
    time.sleep(0.05)  # a clock tick (10 ms) later
    files = RunFiles.of(run_dir, run_dir / "workload")
    spared = [
        before_the_run,
        sleeper(HOLDS_A_FILE, str(run_dir / "workload" / "x"), marker, new_session=False),  # in pytest's session
        sleeper(HOLDS_A_FILE, str(tmp_path / "run-00001" / "x"), marker, new_session=True),  # another run's folder
        sleeper(HOLDS_A_FILE, str(run_dir / ".lazyfs" / "log"), marker, new_session=True),  # the lazy fs's state
    ]
    escaped = sleeper(HOLDS_A_FILE, str(run_dir / "workload" / "x"), marker, new_session=True)
    spared.append(older_session.holder())  # started since the run began, in a session made before it
    with open(run_dir / "ledger.jsonl", "a"):  # this process holds one too, and is the harness
        (described,) = files.hunt()
    assert described.startswith(f"pid {escaped.pid} (") and "fd 3 workload/x" in described, described
    assert escaped.wait(timeout=GONE_DEADLINE_S) == -9
    assert all(process.is_running() for process in map(as_process, spared)), spared
    for process in spared:
        process.kill()
    older_session.close()
    assert alive_with_deadline(marker) == []


def as_process(process: subprocess.Popen[str] | psutil.Process) -> psutil.Process:
    return process if isinstance(process, psutil.Process) else psutil.Process(process.pid)


class LeaderlessSession:
    """A session whose leader has exited and been reaped (a CI runner's shell that started the harness in the
    background and left): its id names no process. A child left in it starts holders of a file on demand."""

    def __init__(self, path: Path, marker: str):
        self.path, self.marker = path, marker
        self.leader = subprocess.Popen([sys.executable, "-c", SPAWNS_IN_A_LEADERLESS_SESSION, str(path), marker,
                                        HOLDS_A_FILE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                       start_new_session=True)
        assert self.leader.wait(timeout=GONE_DEADLINE_S) == 0
        assert self.leader.stdout is not None and self.leader.stdout.readline() == "ready\n"

    def close(self) -> None:
        """End the child left in the session: it reaps nothing, so the holders it started are reaped once it is gone."""
        assert self.leader.stdin is not None
        self.leader.stdin.close()

    def holder(self) -> psutil.Process:
        """A holder of the file, started now in the session."""
        assert self.leader.stdin is not None and self.leader.stdout is not None
        self.leader.stdin.write("go\n")
        self.leader.stdin.flush()
        assert self.leader.stdout.readline() == "ready\n"
        (holder,) = [process for process in psutil.process_iter(["cmdline"])
                     if process.info["cmdline"] and process.info["cmdline"][2:] == [HOLDS_A_FILE, str(self.path), self.marker]]
        assert os.getsid(holder.pid) == self.leader.pid and not psutil.pid_exists(self.leader.pid)
        return holder


# Run as the first process of a new PID namespace, where its session (made outside) reads as 0, as a CI runner's
# sandbox starts its jobs: it starts a holder of the run's file in that session, after the run began, and hunts.
HUNTS_IN_SESSION_ZERO = (
    "import json, os, subprocess, sys\n"
    "from pathlib import Path\n"
    "from killpoint.harness.execute._escapees import RunFiles\n"
    "run_dir = Path(sys.argv[1])\n"
    "files = RunFiles.of(run_dir, run_dir / 'workload')\n"
    "holder = subprocess.Popen([sys.executable, '-c', sys.argv[3], str(run_dir / 'workload' / 'x'), sys.argv[2]],\n"
    "                          stdout=subprocess.PIPE, text=True)\n"
    "assert holder.stdout.readline() == 'ready\\n' and os.getsid(holder.pid) == 0\n"
    "print(json.dumps(files.hunt()))\n"
    "holder.kill()\n"
    "holder.wait()\n")


def test_a_process_in_session_zero_is_never_the_workloads(tmp_path, marker):
    """Session 0 is the boot session, or one whose leader is outside the PID namespace: older than any run.

    On CI's machine pytest itself runs in it, and the hunt killed pytest's own helpers (the last CI run's failure).
    """
    run_dir = tmp_path / "run-00000"
    (run_dir / "workload").mkdir(parents=True)
    hunt = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", HUNTS_IN_SESSION_ZERO,
                           str(run_dir), marker, HOLDS_A_FILE], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parents[2])
    assert hunt.returncode == 0, hunt.stderr
    assert json.loads(hunt.stdout) == []
