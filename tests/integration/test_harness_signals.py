"""A ``killpoint run -j 2`` stopped by a signal leaves nothing behind.

Ctrl-C and SIGTERM end it cleanly: exit 130/143, no traceback, a summary, the
runs under way killed and marked interrupted, no worker, fork server or
incarnation alive, no control directory left. A SIGKILL cannot be handled:
its workers and fork servers die with it (the kernel's parent-death signal),
and the next run sweeps its control directories.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from killpoint.harness.execute.runner import control_root
from killpoint.harness.reporting.progress import SessionPrinter
from tests.helpers import DEMO

pytestmark = pytest.mark.integration
DEADLINE_S = 60.0


def wait_for(condition, what: str, deadline_s: float = DEADLINE_S):
    """Poll ``condition`` until it returns something true; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if result := condition():
            return result
        time.sleep(0.1)
    pytest.fail(f"after {deadline_s:g}s still waiting for {what}")


def start_harness(runs_dir: Path, tmp_path: Path, *flags: str) -> tuple[subprocess.Popen, Path]:
    stderr = tmp_path / f"{runs_dir.name}.stderr"
    with stderr.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "killpoint.harness.frontends.cli", "run", DEMO, *flags, "--runs-dir", str(runs_dir)],
            stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=_as_from_a_terminal)
    return process, stderr


def _as_from_a_terminal() -> None:
    """In the harness's child before its exec: Ctrl-C's disposition as a terminal's shell gives it, whatever the
    test runner's is (an inherited ignored SIGINT would stay ignored, as it should)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def signal_state(pid: int) -> str:
    """What the kernel says of ``pid``'s threads' signals (ignored, caught, blocked, pending): for a failure's message."""
    lines = []
    for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
        with contextlib.suppress(OSError):
            status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines() if ":\t" in line)
            lines.append(f"thread {task.name} {status.get('State', '?')}: " + ", ".join(
                f"{field} {status.get(field, '?')}" for field in ("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")))
    return "\n".join(lines)


def finished_runs(runs_dir: Path) -> int:
    return sum(1 for _ in runs_dir.glob("run-*/verdict.json"))


def family(harness: subprocess.Popen) -> dict[psutil.Process, int]:
    """The harness and every process whose parent chain includes it (workers, fork servers, incarnations): their ppids."""
    root = psutil.Process(harness.pid)
    found = {}
    for process in (root, *root.children(recursive=True)):
        with contextlib.suppress(psutil.Error):
            found[process] = process.ppid()
    return found


def survivors(family_then: dict[psutil.Process, int], runs_dir: Path) -> list[str]:
    """Processes of the harness's family still alive, and any other process pointing into ``runs_dir``."""
    alive = [f"{process.pid} (of the harness's family)" for process in family_then if _alive(process)]
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if str(runs_dir) in " ".join(process.cmdline()) + " ".join(process.environ().values()):
                alive.append(f"{process.pid} {process.cmdline()} (points into {runs_dir})")
    return alive


def _alive(process: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    return False


def control_dirs(pids: set[int]) -> list[Path]:
    return [path for pid in pids for path in control_root().glob(f"kp-{pid}-*")]


def interrupt_midway(tmp_path: Path, signum: int, *flags: str) -> tuple[subprocess.Popen, Path, Path,
                                                                         dict[psutil.Process, int]]:
    """Start a long ``-j 2`` session (with ``flags`` added), let a few runs finish, then send ``signum``.

    SIGINT goes to the harness's process group, as Ctrl-C in a terminal does (workers and fork
    servers get it too); SIGTERM and SIGKILL to the harness alone, as ``kill PID`` does.
    """
    runs_dir = tmp_path / "runs"
    # Thousands of runs: the session is still under way whenever the signal comes, however loaded the machine.
    harness, stderr = start_harness(runs_dir, tmp_path, "--random", "5000", "--seed", "0", "-j", "2", *flags)
    wait_for(lambda: finished_runs(runs_dir) >= 3, "3 finished runs")
    processes = wait_for(lambda: len(found := family(harness)) >= 5 and found, "workers and their fork servers")
    if signum == signal.SIGINT:
        os.killpg(harness.pid, signum)
    else:
        harness.send_signal(signum)
    deadline = time.monotonic() + DEADLINE_S
    while harness.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if harness.poll() is None:
        pytest.fail(f"after {DEADLINE_S:g}s the harness has not acted on {signal.Signals(signum).name}:\n"
                    f"{signal_state(harness.pid)}\n{stderr.read_text()}")
    return harness, runs_dir, stderr, processes


@pytest.mark.parametrize(("signum", "exit_code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stopped_run_ends_cleanly_and_marks_the_runs_under_way(tmp_path, signum, exit_code):
    harness, runs_dir, stderr, processes = interrupt_midway(tmp_path, signum)
    err = stderr.read_text()
    assert harness.returncode == exit_code, err
    assert "Traceback" not in err
    assert f"killpoint: stopped by {signal.Signals(signum).name}: " in err
    wait_for(lambda: not survivors(processes, runs_dir), "no process of the harness left")
    assert control_dirs({process.pid for process in processes}) == []
    # Every run started was either judged or is marked interrupted (runs finish fast: maybe none was under way).
    runs = sorted(runs_dir.glob("run-*"))
    interrupted = [run for run in runs if (run / "interrupted.json").exists()]
    assert all((run / "verdict.json").exists() != (run / "interrupted.json").exists() for run in runs), runs
    assert f"; {len(interrupted)} under way killed and marked interrupted" in err
    judged = [json.loads((run / "verdict.json").read_text()) for run in runs if run not in interrupted]
    assert len(judged) >= 3 and all(verdict["outcome"] == "passed" for verdict in judged)


def test_a_stop_swallowed_on_its_way_still_ends_the_session_after_the_run_being_reported(killpoint, monkeypatch,
                                                                                          ctrl_c_raises):
    """A KeyboardInterrupt lands wherever the main thread is; where a callee swallows it (here the printer of
    each outcome), the session raises it again before the next run: the user's Ctrl-C is never lost."""
    reported = []
    on_outcome = SessionPrinter.on_outcome

    def printed_then_interrupted_in_a_swallowing_callee(printer, outcome):
        on_outcome(printer, outcome)
        reported.append(outcome)
        if len(reported) == 3:
            try:
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:
                pass

    monkeypatch.setattr(SessionPrinter, "on_outcome", printed_then_interrupted_in_a_swallowing_callee)
    result = killpoint("run", DEMO, "--exhaustive", "-j", "1")
    assert result.exit_code == 130, result.err
    assert "killpoint: stopped by SIGINT: 3 run(s) finished (3 passed, 0 failed, 0 unknown, 0 untested); " \
           "0 under way killed and marked interrupted" in result.err, result.err
    assert len(reported) == 3


def test_a_killed_harness_takes_its_helpers_along_and_the_next_run_sweeps_its_control_dirs(tmp_path):
    harness, runs_dir, stderr, processes = interrupt_midway(tmp_path, signal.SIGKILL)
    assert harness.returncode == -signal.SIGKILL
    # The workers and fork servers (the harness's own, of the golden run, and each worker's) are the
    # harness's children and grandchildren; below them are incarnations.
    children = {process.pid for process, ppid in processes.items() if ppid == harness.pid}
    helpers = [process for process, ppid in processes.items() if ppid == harness.pid or ppid in children]
    assert len(children) == 3 and len(helpers) >= 5, processes
    wait_for(lambda: not any(_alive(helper) for helper in helpers), "workers and fork servers to die with the harness")
    pids = {process.pid for process in processes}
    # What a SIGKILLed harness cannot remove, the next session does; one it certainly left:
    (control_root() / f"kp-{harness.pid}-left").mkdir()
    after, after_stderr = start_harness(tmp_path / "after", tmp_path, "--kill-at", "c1:after_started")
    assert after.wait(DEADLINE_S) == 0, after_stderr.read_text()
    assert control_dirs(pids) == []
    wait_for(lambda: not survivors(processes, runs_dir), "no process of the killed harness left")


def test_a_closed_output_stops_the_session_without_a_traceback(tmp_path):
    """`killpoint run --machine | head -1`: the reader goes, the next line cannot be written; the harness stops
    as a pipe's writer does (128 + SIGPIPE), says so in one line, and keeps what finished."""
    runs_dir = tmp_path / "runs"
    harness = subprocess.Popen([sys.executable, "-m", "killpoint.harness.frontends.cli", "run", DEMO, "--machine",
                                "--runs-dir", str(runs_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL)
    assert harness.stdout is not None and harness.stderr is not None
    first = json.loads(harness.stdout.readline())
    assert first["kind"] == "run"
    harness.stdout.close()
    err = harness.stderr.read().decode()
    assert harness.wait(DEADLINE_S) == 128 + signal.SIGPIPE, err
    assert err.strip() == ("killpoint: stopped: the output was closed (broken pipe); the runs that finished keep "
                           "their evidence"), err
    assert (runs_dir / "run-00000" / "verdict.json").exists()
    assert control_dirs({harness.pid}) == []
