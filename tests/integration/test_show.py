"""``killpoint show`` on real run directories: one judged, one whose harness never judged it, and the ones a
SIGKILLed ``killpoint run`` left behind, each saying what it was running and how far it got."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from killpoint.harness.backends import make_backend
from killpoint.harness.config.scenario import load_scenario, with_workload
from killpoint.harness.execute.run_record import new_run_record, write_run_record
from killpoint.harness.execute.runner import carry_out_schedule, run_golden
from killpoint.harness.execute.session import run_job
from killpoint.harness.frontends import cli
from killpoint.harness.model import Job
from killpoint.harness.reporting.show import describe_run_dir
from killpoint.harness.repro.safety import repro_line
from killpoint.harness.schedules.schedule import parse_kill_point
from tests.helpers import DEMO, mutant_workload
from tests.integration.test_harness_signals import DEADLINE_S, family, survivors, wait_for

pytestmark = pytest.mark.integration
# The session writes run.json before a run's first launch and the CLI has `show` once they are wired in.
WIRED = hasattr(cli, "command_show")
needs_wiring = pytest.mark.skipif(not WIRED, reason="killpoint show is not yet a command of cli.py")


@pytest.fixture(scope="module")
def backend():
    made = make_backend("subprocess")
    yield made
    made.close()


def test_a_judged_failing_run_shows_its_verdict_and_repro(tmp_path, backend):
    scenario = with_workload(load_scenario(DEMO), mutant_workload("retry_non_idempotent"))
    golden = run_golden(scenario, tmp_path / "golden", backend)
    outcome = run_job(scenario, golden, Job(0, (parse_kill_point("c4:after_started", scenario.plan),)), tmp_path,
                      backend)
    text = "\n".join(describe_run_dir(outcome.run_dir))
    assert outcome.result == "failed" and f"verdict: failed\n  [{outcome.verdict.findings[0].property}] " in text
    assert "incarnation 0 (pid " in text and "KILLED at c4:after_started" in text
    assert f"incarnations: {len(outcome.incarnations)} finished" in text
    assert text.endswith(f"reproduce: {repro_line(outcome.token)}")


def test_a_run_its_harness_never_judged_says_what_it_was_running(tmp_path, backend):
    """As a harness killed after the run's incarnations ended and before the verdict leaves it."""
    scenario = load_scenario(DEMO)
    schedule = (parse_kill_point("c5:after_effect", scenario.plan),)
    gone = subprocess.Popen(["true"])
    gone.wait()  # a harness pid that is no more
    run_dir = tmp_path / "run-00007"
    record = new_run_record(scenario, run=7, schedule=("c5:after_effect",), seed=None, drift=None,
                            token="kp1.unused", backend=backend.name, backend_options={})
    write_run_record(run_dir, replace(record, harness_pid=gone.pid, harness_identity=f"{gone.pid}:0"))
    incarnations = carry_out_schedule(scenario, schedule, run_dir, backend)
    text = "\n".join(describe_run_dir(run_dir))
    assert "schedule: run 7, kill at c5:after_effect" in text and f"backend: {backend.name}" in text
    assert f"incarnations: {len(incarnations)} finished\n  incarnation 0 (pid {incarnations[0].pid}," in text
    assert "verdict: none: the harness stopped before judging (interrupted or killed)" in text


def freeze_with_a_run_under_way(harness: subprocess.Popen, runs_dir: Path) -> Path | None:
    """Stop the harness (SIGSTOP) and return a run it started and has not judged; None (and resumed) if none."""
    os.kill(harness.pid, signal.SIGSTOP)
    started = [run for run in sorted(runs_dir.glob("run-*")) if (run / "run.json").exists()]
    if len(started) >= 3 and not (started[-1] / "verdict.json").exists():
        return started[-1]
    os.kill(harness.pid, signal.SIGCONT)
    return None


@needs_wiring
def test_the_run_dirs_a_sigkilled_harness_leaves_say_what_they_were_running(tmp_path, killpoint):
    runs_dir, stderr = tmp_path / "runs", tmp_path / "harness.stderr"
    with stderr.open("wb") as err:
        # -j 1: a SIGSTOP of the harness freezes its runs only when it carries them out itself, not in workers.
        harness = subprocess.Popen([sys.executable, "-m", "killpoint", "run", str(DEMO), "--exhaustive", "--depth",
                                    "2", "-j", "1", "--runs-dir", str(runs_dir)],
                                   stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    try:
        # Frozen, the harness writes nothing: the run it has started and not judged stays so until the kill.
        under_way = wait_for(lambda: freeze_with_a_run_under_way(harness, runs_dir), "a third run under way")
        processes = family(harness)
        harness.kill()
        wait_for(lambda: harness.poll() is not None, "the harness to die")
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait(DEADLINE_S)
    assert harness.returncode == -signal.SIGKILL, stderr.read_text()
    # Stopped at a random moment, it may have held the incarnation frozen (a point's state being copied), and
    # nothing thaws a frozen cgroup once its harness is gone: `killpoint clean` (or the next session) kills it.
    assert killpoint("clean").exit_code == 0
    wait_for(lambda: not survivors(processes, runs_dir), "no process of the killed harness left")
    shown = killpoint("show", under_way)
    assert shown.exit_code == 0 and "Traceback" not in shown.err, shown.err
    assert f"run directory: {under_way}\nscenario: demo (scenarios/demo.toml); digest " in shown.out
    record = json.loads((under_way / "run.json").read_text())
    assert f"schedule: run {int(under_way.name[4:])}, kill at {', '.join(record['schedule'])}" in shown.out
    assert record["argv"][1:4] == ["run", str(DEMO), "--exhaustive"] and f"argv: {shlex.join(record['argv'])}" in shown.out
    assert "verdict: none: the harness stopped before judging (interrupted or killed)" in shown.out
    assert f"reproduce: {repro_line(record['token'])}" in shown.out
    judged = killpoint("show", min(runs_dir.glob("run-*")))
    assert judged.exit_code == 0 and "verdict: passed" in judged.out and "scenario: demo" in judged.out, judged.out


@needs_wiring
def test_show_of_what_is_not_a_run_directory_exits_2_naming_it(tmp_path, killpoint):
    (tmp_path / "run.json").write_text("{")
    result = killpoint("show", tmp_path)
    assert result.exit_code == 2 and f"{tmp_path / 'run.json'}: not JSON" in result.err
    assert "Traceback" not in result.err
