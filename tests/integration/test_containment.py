"""Containment: every process an incarnation started dies with it, however it hid.

The hostile workload (tests/workloads/escapes_with_empty_env.py) leaves a sleeper that is out
of its process tree and group (double fork, setsid) and carries no KILLPOINT_* environment
(execve with an empty one), so neither the tree walk nor the environment sweep can find it.
Killed at a crash point or exiting on its own, each incarnation's sleeper must be gone after
the run, on every backend: a cgroup per incarnation on the host backends, the container's own
PID namespace on docker.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from killpoint.harness.backends import _cgroup
from killpoint.harness.backends.subprocess import SubprocessBackend
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.execute import _process_tree
from killpoint.harness.execute.runner import carry_out_schedule
from killpoint.harness.schedules.schedule import parse_kill_point
from tests.helpers import DEMO, workload_command
from tests.integration.test_docker_backend import backend, docker_engine, leftover_sweeps_serialised  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.hostile]

GONE_DEADLINE_S = 5.0


def sleepers(marker: str) -> list[psutil.Process]:
    """Live processes with ``marker`` in their argv."""
    found = []
    for process in psutil.process_iter():
        try:
            if marker in process.cmdline() and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def sleepers_after_deadline(marker: str) -> list[psutil.Process]:
    """The sleepers still alive once they have had GONE_DEADLINE_S to die."""
    deadline = time.monotonic() + GONE_DEADLINE_S
    while (alive := sleepers(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def sleepers_started(run_dir: Path) -> list[int]:
    """The pids of the sleepers the run's incarnations left, in their order (as the workload recorded them)."""
    record = run_dir / "workload" / "escapees.txt"
    return [int(line.split()[1]) for line in record.read_text().splitlines()] if record.exists() else []


@pytest.fixture
def marker() -> Iterator[str]:
    """A unique argv marker for this test's sleepers; any that survive the test are killed after it."""
    value = f"killpoint-escapee-{uuid.uuid4().hex}"
    yield value
    for process in sleepers(value):
        process.kill()


def test_sleeper_outside_the_tree_with_no_protocol_env_dies_with_its_incarnation(backend, killpoint, tmp_path, marker):  # noqa: F811
    report = tmp_path / "report.json"
    result = killpoint("run", DEMO, "--backend", backend, "--kill-at", "c4:after_effect", "--keep-all",
                       "--workload", f"{workload_command('escapes_with_empty_env.py')} {marker}",
                       "--runs-dir", tmp_path / "runs", "--json", report)
    assert result.exit_code == 0, result.out + result.err
    (run,) = json.loads(report.read_text())["runs"]
    killed, recovered = run["incarnations"]
    assert killed["killed_at"] == "c4:after_effect" and recovered["exit_code"] == 0  # both ways an incarnation ends
    golden_sleepers, run_sleepers = (sleepers_started(tmp_path / "runs" / name) for name in ("golden", "run-00000"))
    assert len(golden_sleepers) == 1 and len(run_sleepers) == 2, (golden_sleepers, run_sleepers)
    survivors = sleepers_after_deadline(marker)
    assert survivors == [], f"{len(survivors)} of the 3 sleepers outlived their incarnation: {survivors}"
    if backend != "docker":  # a container's processes die with its PID namespace, unseen by the harness
        for incarnation, sleeper in zip(run["incarnations"], run_sleepers):
            assert any(leftover.startswith(f"pid {sleeper} (") for leftover in incarnation["leftovers"]), incarnation


def test_without_a_usable_cgroup_hierarchy_the_fallback_is_said_once(monkeypatch, capsys, tmp_path):
    subreaper_requests = []
    monkeypatch.setattr(_cgroup, "_own_cgroup_dir", lambda: _cgroup.Unavailable("no cgroup2 mount (test)"))
    monkeypatch.setattr(_process_tree, "become_subreaper", lambda: subreaper_requests.append(True))  # not for good
    _cgroup.usable_parent.cache_clear()
    try:
        backends = [SubprocessBackend(), SubprocessBackend()]
        scenario = load_scenario(DEMO)
        (incarnation,) = carry_out_schedule(scenario, (parse_kill_point("c2:after_effect", scenario.plan),), tmp_path / "run",
                                     backends[0], max_incarnations=1)
    finally:
        _cgroup.usable_parent.cache_clear()
    assert incarnation.killed_at == "c2:after_effect"
    assert subreaper_requests  # the environment sweep needs the orphans adopted
    err = capsys.readouterr().err
    assert err.count("killpoint: no cgroup per incarnation (no cgroup2 mount (test))") == 1, err
    assert "a process that leaves the tree and drops the KILLPOINT_* environment can outlive its run" in err


def test_what_a_gone_harness_left_in_its_cgroups_is_killed_by_the_next(capsys, marker):
    parent = _cgroup.IncarnationCgroup.create()  # a parent of this test's own, so no other harness reclaims in it
    assert parent is not None, "this machine has cgroups for incarnations: the host backends' tests rely on it"
    gone = subprocess.Popen(["true"])
    gone.wait()
    abandoned = _cgroup.IncarnationCgroup(parent.path / f"{_cgroup.NAME_PREFIX}{gone.pid}-0")
    abandoned.path.mkdir()
    with _cgroup.preexec_joiner(abandoned) as join:
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", marker], preexec_fn=join,
                                   start_new_session=True)
    try:
        assert abandoned.members() == [sleeper.pid]
        _cgroup._reclaim_abandoned(parent.path)
        assert sleeper.wait(timeout=GONE_DEADLINE_S) == -signal.SIGKILL
        assert not abandoned.path.exists()
        assert f"killpoint: killed what harness pid {gone.pid}, now gone, left in {abandoned.path}: pid {sleeper.pid} (" \
            in capsys.readouterr().err
    finally:
        parent.discard()


def test_a_cgroup_removed_while_it_is_read_reads_as_empty():
    """Two harnesses starting at once both reclaim a gone harness's cgroup: the second read files the first had
    just removed, got ENODEV, and the session failed with a traceback."""
    cgroup = _cgroup.IncarnationCgroup.create()
    assert cgroup is not None, "this machine has cgroups for incarnations: the host backends' tests rely on it"
    events = os.open(cgroup.path / "cgroup.events", os.O_RDONLY)
    try:
        cgroup.discard()  # removed by "the other harness" while this one holds its file open
        with pytest.raises(OSError) as removed:
            os.pread(events, 4096, 0)
        assert removed.value.errno == errno.ENODEV and _cgroup._removed(removed.value)
        assert _cgroup._read_events(events) == b""
    finally:
        os.close(events)
    assert cgroup.members() == [] and cgroup.kill(expected=lambda pid: False) == []
