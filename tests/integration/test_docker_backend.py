"""The backends, for real: one contract suite run against every backend (subprocess, forkserver,
docker), then what only containers add — isolation that a breakout workload cannot get through,
``--restart same``, and no container left behind even when the harness itself is SIGKILLed.

Without an engine the docker tests skip, saying why; under the CI profile (``CI`` set, see
harness/frontends/_ci.py) they fail instead (CI starts dockerd in .ci/run, so a missing engine there is a
broken build, not a reason to skip).
"""

from __future__ import annotations

import fcntl
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from killpoint.errors import ConfigError
from killpoint.harness.backends import _engine
from killpoint.harness.backends.docker import PIDS_LIMIT, DockerBackend
from killpoint.harness.config.scenario import load_scenario, with_workload
from killpoint.harness.execute.runner import carry_out_schedule, run_golden
from killpoint.harness.frontends._ci import ci_profile
from killpoint.harness.judge.checker import check
from killpoint.harness.judge.evidence import read_evidence
from killpoint.harness.model import BACKENDS
from killpoint.harness.repro.token import ReproToken
from killpoint.harness.schedules.schedule import parse_kill_point
from tests.helpers import DEMO, ROOT, WORKLOADS, mutant_workload
from tests.helpers import workload_command as workload

# (mutant, schedule) -> the properties its findings name, on every backend. One schedule of
# each mutant is caught, one is not.
EXPECTED_FINDINGS = {
    ("replays_succeeded", "c4:after_finished"): {"journal-well-formed", "succeeded-not-replayed"},
    ("replays_succeeded", "c1:after_effect"): set(),
    ("retry_non_idempotent", "c4:after_effect"): {"interrupted-action", "verify-before-replay", "world-equals-golden"},
    ("retry_non_idempotent", "c3:after_effect"): set(),
    ("finished_before_tool", "c3:after_finished"): {"world-equals-golden", "write-ahead"},
    ("finished_before_tool", "c3:after_effect"): set(),
}


def _engine_problem() -> str | None:
    if os.geteuid() != 0:
        return "the docker backend watches each container's init through a host pidfd and chowns mounts: run as root"
    try:
        _engine.connect().close()
    except ConfigError as error:
        return str(error)
    return None


@pytest.fixture(scope="session")
def docker_engine() -> None:
    problem = _engine_problem()
    if problem is None:
        return
    if ci_profile():
        pytest.fail(f"CI={os.environ['CI']} but the container tests cannot run: {problem}")
    pytest.skip(f"no usable Docker engine: {problem}")


def containers_under(directory: Path) -> list[dict]:
    """killpoint's containers (any state) whose run directory lies below ``directory``."""
    client = _engine.connect()
    try:
        return [summary for summary in client.api.containers(all=True, filters={"label": _engine.LABEL_OWNER})
                if summary["Labels"].get(_engine.LABEL_RUN_DIR, "").startswith(f"{directory}/")]
    finally:
        client.close()


@pytest.fixture(scope="session", autouse=True)
def no_container_left_behind(tmp_path_factory: pytest.TempPathFactory):
    """After the whole session: no container of any run of this session remains."""
    yield
    if _engine_problem() is None:
        left = containers_under(tmp_path_factory.getbasetemp())
        assert left == [], f"containers left behind: {[(c['Id'][:12], c['Labels']) for c in left]}"


@pytest.fixture(autouse=True)
def leftover_sweeps_serialised(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Every docker backend removes containers whose harness is dead, so a test that leaves one on
    purpose runs alone (an exclusive lock, shared by every pytest-xdist worker); the others share."""
    exclusive = request.node.get_closest_marker("leaves_containers") is not None
    with open(tmp_path_factory.getbasetemp().parent / "docker-sweeps.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        request.getfixturevalue("docker_engine")
    return request.param


def run_report(killpoint, tmp_path: Path, *args: str) -> tuple[int, dict, str]:
    report = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
    result = killpoint("run", DEMO, *args, "--json", report)
    return result.exit_code, json.loads(report.read_text()) if report.exists() else {}, result.out + result.err


# Choosing the backend: mistakes are reported before anything runs.

def test_container_flags_need_the_docker_backend(killpoint):
    result = killpoint("run", DEMO, "--image", "my-agent:dev", "--kill-at", "c1:after_effect")
    assert result.exit_code == 2
    assert "--image" in result.err and "they go with --backend docker" in result.err


def test_scenario_file_names_a_known_backend(killpoint, tmp_path):
    scenario = tmp_path / "boxed.toml"
    scenario.write_text(DEMO.read_text().replace('catalogue = "reference"', 'catalogue = "reference"\nbackend = "vm"\nimage = 3'))
    result = killpoint("run", scenario, "--kill-at", "c1:after_effect")
    assert result.exit_code == 2
    assert "backend: 'vm' is not one of subprocess, forkserver, docker" in result.err
    assert 'image: 3 is not a non-empty string; write image = "killpoint-host:1" (a local Docker image)' in result.err
    assert "goes with backend" not in result.err  # the backend is wrong already: one problem, said once


# The contract: the same verdicts whatever runs the incarnations.

def test_reference_passes_every_single_kill(backend, killpoint, tmp_path):
    exit_code, report, output = run_report(killpoint, tmp_path, "--backend", backend, "--exhaustive", "-j", "2")
    assert exit_code == 0, output
    assert "30 runs: 30 passed, 0 failed" in output
    for run in report["runs"]:
        first, *rest = run["incarnations"]
        assert first["killed_at"] == run["schedule"][0] and first["exit_code"] is None
        assert rest and rest[-1]["exit_code"] == 0


def test_a_runtime_calling_the_tool_service_passes_every_single_kill(backend, killpoint, tmp_path):
    """The standalone runtime calls the fake tools at $KILLPOINT_TOOLS_URL, which the harness serves outside the
    container too (on the container's own loopback): every after_effect is the service's, held there."""
    exit_code, report, output = run_report(killpoint, tmp_path, "--backend", backend, "--exhaustive", "-j", "2",
                                           "--workload", "{python} standalone/runtime.py")
    assert exit_code == 0, output
    assert "30 runs: 30 passed, 0 failed" in output
    assert sum(run["schedule"][0].endswith(":after_effect") for run in report["runs"]) == 6


@pytest.mark.parametrize("mutant", sorted({mutant for mutant, _ in EXPECTED_FINDINGS}))
def test_mutant_is_caught_with_the_same_findings(backend, killpoint, tmp_path, mutant):
    caught_by = importlib.import_module(f"killpoint.scenarios.mutants.{mutant}").CAUGHT_BY
    for (name, schedule), expected in EXPECTED_FINDINGS.items():
        if name != mutant:
            continue
        exit_code, report, output = run_report(killpoint, tmp_path, "--backend", backend, "--kill-at", schedule,
                                               "--workload", mutant_workload(mutant))
        (run,) = report["runs"]
        assert {finding["property"] for finding in run["findings"]} == expected, output
        assert exit_code == (1 if expected else 0), output
        if expected:
            assert caught_by in expected
            repro = killpoint("repro", run["token"])
            assert repro.exit_code == 1 and f"[{caught_by}]" in repro.out, repro.out + repro.err
            assert f"backend {backend}" in repro.out


def test_workload_exiting_at_once_is_a_workload_error(backend, killpoint):
    result = killpoint("run", DEMO, "--backend", backend, "--workload", workload("exits_at_once.py"),
                       "--kill-at", "c1:after_effect")
    assert result.exit_code == 2
    assert "exited with code 3" in result.err
    assert "fatal: cannot load the agent configuration" in result.err


def test_workload_gone_before_its_pid_is_read_still_counts_as_exited(backend, killpoint, tmp_path):
    # A container can exit before the engine reports its pid; a reaped-on-wait host child stands in for it.
    # The fork server runs Python only (it refuses /usr/bin/true, see the next test): its stand-in is an empty
    # script, a child the server often reaps before the runner watches it.
    command = "/usr/bin/true"
    if backend == "forkserver":
        (tmp_path / "exits_0.py").write_text("")
        command = f"{sys.executable} {tmp_path / 'exits_0.py'}"
    result = killpoint("run", DEMO, "--backend", backend, "--workload", command, "--kill-at", "c1:after_effect")
    assert result.exit_code == 2
    assert "exited 0 without journaling task COMPLETED" in result.err


def test_missing_command_cannot_start(backend, killpoint):
    result = killpoint("run", DEMO, "--backend", backend, "--workload", "/nonexistent/agent", "--kill-at", "c1:after_effect")
    assert result.exit_code == 2
    if backend == "forkserver":  # it runs Python workloads only, and refuses any other command before starting it
        assert "'/nonexistent/agent' is not one: use --backend subprocess" in result.err
        assert "could not run the plan" not in result.err
    else:
        assert "workload '/nonexistent/agent' cannot start" in result.err
    assert "Traceback" not in result.err


def test_missing_python_script_fails_as_python_would(backend, killpoint):
    result = killpoint("run", DEMO, "--backend", backend, "--workload", "{python} /nonexistent/agent.py",
                       "--kill-at", "c1:after_effect")
    assert result.exit_code == 2
    assert "exited with code 2" in result.err, result.err
    assert "can't open file '/nonexistent/agent.py': [Errno 2] No such file or directory" in result.err


# What containers add.

@pytest.mark.parametrize("user", [None, "0:0"], ids=["default user", "root in the container"])
def test_breakout_attempts_all_fail(docker_engine, tmp_path, user):
    listener = socket.create_server(("0.0.0.0", 0))
    listener.setblocking(False)
    scenario = with_workload(load_scenario(DEMO),
                             f"{{python}} {WORKLOADS / 'breakout.py'} {listener.getsockname()[1]}")
    backend = DockerBackend(user=user)
    try:
        (incarnation,) = carry_out_schedule(scenario, (), tmp_path / "run", backend, max_incarnations=1)
    finally:
        backend.close()
    assert incarnation.exit_code == 0, incarnation.stderr_tail
    report = json.loads((tmp_path / "run" / "incarnation-0.stdout").read_text())
    with pytest.raises(BlockingIOError):
        listener.accept()  # nothing reached the host
    listener.close()

    assert report["uid"] == (0 if user else 65534)
    assert report["NoNewPrivs"] == "1"
    assert int(report["CapEff"], 16) == 0 and int(report["CapBnd"], 16) == 0
    assert report["connect_loopback"] == "Connection refused"  # its own loopback: the host's is out of reach
    assert report["connect_docker_host"] == report["connect_public"] == "Network is unreachable"
    assert report["write_root"] == report["write_python"] == "Read-only file system"
    assert report["write_plan"] in ("Read-only file system", "Permission denied")
    assert report["chown"] == report["mknod"] == report["setuid"] == "Operation not permitted"
    protocol_writes = [str(tmp_path / "run" / name) for name in ("workload", "world", "ledger.jsonl")]
    # As root, /dev (the container's own small tmpfs, made by the runtime) stays writable; nothing else does.
    assert sorted(report["writable_mounts"]) == sorted((["/dev"] if user else []) + protocol_writes)
    assert report["fork_bomb"] == {"children": PIDS_LIMIT - 1, "stopped_by": "Resource temporarily unavailable"}
    assert report["memory_hog"] == {"signal": signal.SIGKILL, "exit": None}


def test_token_keeps_the_image_and_restart_mode(docker_engine, killpoint, tmp_path):
    exit_code, report, output = run_report(killpoint, tmp_path, "--backend", "docker", "--restart", "same",
                                           "--kill-at", "c4:after_effect",
                                           "--workload", mutant_workload("retry_non_idempotent"))
    assert exit_code == 1, output
    (run,) = report["runs"]
    token = ReproToken.decode(run["token"])
    assert (token.backend, token.backend_options) == ("docker", {"image": _engine.DEFAULT_IMAGE, "restart": "same"})
    repro = killpoint("repro", run["token"])
    assert repro.exit_code == 1 and f"backend docker (image {_engine.DEFAULT_IMAGE}, restart same)" in repro.out


def test_restart_same_starts_the_killed_container_again(docker_engine, tmp_path):
    scenario = load_scenario(DEMO)
    schedule = tuple(parse_kill_point(text, scenario.plan) for text in ("c4:after_effect", "after_decisions"))
    backend = DockerBackend(restart="same")
    try:
        golden = run_golden(scenario, tmp_path / "golden", backend)
        incarnations = carry_out_schedule(scenario, schedule, tmp_path / "run", backend)
        (container,) = backend.same_mode_containers.values()
        assert backend.containers == {container}  # the golden run's container went when this run began
        verdict = check(scenario, read_evidence(tmp_path / "run"), golden)
    finally:
        backend.close()
    assert [incarnation.killed_at for incarnation in incarnations] == ["c4:after_effect", "after_decisions", None]
    assert verdict.valid, verdict.findings
    # Each start read its own incarnation number, though the container's environment is fixed at creation.
    journal = [json.loads(line) for line in (tmp_path / "run" / "workload" / "journal.jsonl").read_text().splitlines()]
    assert {record["incarnation"] for record in journal if record["kind"] == "decision"} == {1, 2}


@pytest.mark.leaves_containers
@pytest.mark.parametrize("cleanup", ["killpoint clean", "the next run"])
def test_containers_of_a_sigkilled_harness_are_removed(docker_engine, killpoint, tmp_path, cleanup):
    runs_dir = tmp_path / "killed"
    harness = subprocess.Popen(
        [sys.executable, "-m", "killpoint.harness.frontends.cli", "run", str(DEMO), "--backend", "docker", "--workload",
         workload("hangs.py"), "--timeout", "120", "--kill-at", "c1:after_effect", "--runs-dir", str(runs_dir)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while (not any(c["State"] == "running" for c in containers_under(runs_dir)) and harness.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.2)
    finally:
        harness.kill()
        harness.wait()
    old = containers_under(runs_dir)
    assert len(old) == 1 and old[0]["State"] == "running", "the killed harness should have left its container running"

    if cleanup == "killpoint clean":
        result = killpoint("clean")
        assert f"container {old[0]['Id'][:12]} (running; run {runs_dir}/golden" in result.out
        assert f"harness pid {harness.pid} gone" in result.out
    else:
        result = killpoint("run", DEMO, "--backend", "docker", "--kill-at", "c1:after_effect")
        assert result.exit_code == 0, result.out + result.err
        assert f"killpoint: removed leftover container {old[0]['Id'][:12]}" in result.err
    assert containers_under(runs_dir) == []
