"""Non-pausing kills for real: the workload told ``kill`` at a crash point SIGKILLs its own group at once.

The harness's own strike follows as at every kill, so the verdicts, the evidence and the kill
markers are those of a pausing kill; only ``killed_at`` says ``/now``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from killpoint import protocol
from killpoint.harness.backends import Backend, Launched, make_backend
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.execute.rendezvous import RendezvousServer
from killpoint.harness.execute.runner import prepare_run_dir
from killpoint.harness.layout import RunPaths
from killpoint.harness.model import AtPoint
from tests.helpers import DEMO, ROOT, WORKLOADS, mutant_workload
from tests.helpers import workload_command as workload
from tests.integration.test_blackbox_runs import SHORT_PLAN

STANDALONE = f"{{python}} {ROOT / 'scenarios' / 'standalone' / 'runtime.py'}"
DEADLINE_S = 10.0


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_until_gone(pid: int) -> bool:
    """Poll until ``pid`` is dead (gone or a zombie), at most DEADLINE_S; whether it died."""
    deadline = time.monotonic() + DEADLINE_S
    while not gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def run_report(killpoint, tmp_path: Path, *args: str | Path) -> tuple[int, dict, str]:
    report = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
    result = killpoint("run", DEMO, *args, "--json", report)
    return result.exit_code, json.loads(report.read_text()) if report.exists() else {}, result.out + result.err


@dataclass(frozen=True)
class OnePoint:
    """What ``announces_one_point.py`` did when its one crash point was answered as ``kill`` chose."""

    launched: Launched
    pid: int  # its own pid, as it sees it (1 in a container)
    child: int
    group: int
    ran_on: Path  # exists once the point returned


@contextlib.contextmanager
def killed_at_its_point(backend: Backend, tmp_path: Path, *, now: bool) -> Iterator[OnePoint]:
    """Launch ``announces_one_point.py`` through ``backend`` with the protocol's environment and serve its point.

    The control socket stays open until the block ends: a pausing kill's workload waits on it.
    """
    run_dir = tmp_path / "run"
    prepare_run_dir(load_scenario(DEMO), run_dir, None)
    paths = RunPaths(run_dir)
    server = RendezvousServer(tmp_path / "control.sock")
    env = {protocol.ENV_RUN_DIR: str(paths.workload), protocol.ENV_PLAN: str(paths.plan),
           protocol.ENV_CATALOGUE: str(paths.catalogue), protocol.ENV_WORLD: str(paths.world),
           protocol.ENV_LEDGER: str(paths.ledger), protocol.ENV_CONTROL: str(server.path),
           protocol.ENV_INCARNATION: "0"}
    report = paths.workload / "pids"
    try:
        launched = backend.launch((sys.executable, str(WORKLOADS / "announces_one_point.py"), str(report)),
                                  cwd=tmp_path, env=env, stdout=tmp_path / "out", stderr=tmp_path / "err")
        try:
            started = time.monotonic()
            served = server.serve(launched.pid, AtPoint(protocol.AFTER_EFFECT, "c1", now=now), started=started,
                                  deadline=started + DEADLINE_S)
            assert served.hit is not None and served.points == ["c1:after_effect"], (tmp_path / "err").read_text()
            pid, child, group = map(int, report.read_text().split())
            yield OnePoint(launched, pid, child, group, report.with_name("pids.ran-on"))
        finally:
            launched.kill()  # the strike: on a tree already dead it simply confirms it
            launched.confirm_dead()
    finally:
        server.close()


@pytest.mark.parametrize("backend_name", ["subprocess", "forkserver"])
@pytest.mark.parametrize("now", [True, False], ids=["now", "pausing"])
def test_a_kill_reply_kills_the_workload_and_its_group_with_no_help_from_the_harness(tmp_path, backend_name, now):
    """Its process group is its own: the harness (this process) and the fork server outlive the self-kill."""
    backend = make_backend(backend_name)
    try:
        with killed_at_its_point(backend, tmp_path, now=now) as workload:
            assert workload.launched.pid == workload.pid == workload.group != os.getpgrp()  # a group apart from ours
            if now:
                assert wait_until_gone(workload.pid) and wait_until_gone(workload.child), "the reply left it running"
                assert workload.launched.wait() in (-9, 128 + 9)  # killed by SIGKILL, before the harness struck
            else:
                time.sleep(0.3)
                assert not gone(workload.pid) and not gone(workload.child), "a paused workload waits for the strike"
        assert not workload.ran_on.exists(), "the workload ran on past its kill point"
        if backend_name == "forkserver":
            assert backend.server._server is not None and backend.server._server.process.poll() is None
            assert backend.server.restarts == []
    finally:
        backend.close()


def test_the_reference_passes_every_non_pausing_kill_of_the_demo(killpoint, tmp_path):
    exit_code, report, output = run_report(killpoint, tmp_path, "--exhaustive", "--no-pause", "-j", "2")
    assert exit_code == 0, output
    assert "exhaustive to depth 1, no pause" in output and "30 runs: 30 passed, 0 failed" in output
    assert "30 of 30 crash points of the crash-free run killed" in output
    for run in report["runs"]:
        first, *rest = run["incarnations"]
        assert run["schedule"][0].endswith("/now")
        assert first["killed_at"] == run["schedule"][0] and first["exit_code"] is None
        assert rest and rest[-1]["exit_code"] == 0


@pytest.fixture
def short_scenario(tmp_path: Path) -> Path:
    """Three calls (READ_ONLY, NON_IDEMPOTENT, UNKNOWN): 150 schedules of up to two kills, the demo's 533."""
    path = tmp_path / "short.toml"
    path.write_text(SHORT_PLAN)
    return path


def test_the_reference_passes_every_non_pausing_schedule_of_two_kills(killpoint, short_scenario):
    result = killpoint("run", short_scenario, "--exhaustive", "--depth", "2", "--no-pause", "-j", "2", "-q")
    assert result.exit_code == 0, result.out + result.err
    assert "150 runs: 150 passed, 0 failed" in result.out, result.out


@pytest.mark.parametrize("args", [("--exhaustive",), ("--exhaustive", "--depth", "2", "--shard", "1/8")],
                         ids=["depth-1", "depth-2-shard"])
def test_the_standalone_runtime_kills_itself_at_its_own_points_and_passes(killpoint, short_scenario, args):
    # The standalone runtime starts a process per tool call (seconds a run): a short plan, one shard at depth 2.
    result = killpoint("run", short_scenario, *args, "--no-pause", "--workload", STANDALONE, "-j", "2", "-q")
    assert result.exit_code == 0, result.out + result.err
    assert " 0 failed" in result.out and "passed" in result.out


def test_a_non_pausing_kill_leaves_the_evidence_and_marker_of_a_pausing_one(killpoint, tmp_path):
    runs = {}
    for kill in ("c3:after_started", "c3:after_started/now"):
        runs[kill] = tmp_path / kill.replace("/", "-")
        result = killpoint("run", DEMO, "--kill-at", f"{kill}/torn:500", "--kill-at", "after_decisions",
                           "--keep-all", "--runs-dir", runs[kill])
        assert result.exit_code == 0, result.out + result.err
    evidence = {kill: sorted(path.name for path in (folder / "run-00000").iterdir()) for kill, folder in runs.items()}
    assert evidence["c3:after_started"] == evidence["c3:after_started/now"]
    paused, now = (folder / "run-00000" for folder in runs.values())
    for copy in (RunPaths(paused).journal_at_kill(0), RunPaths(paused).torn_journal(0)):
        assert copy.read_bytes() == (now / copy.name).read_bytes()  # the journal as the kill left it, then torn
    for kill, folder in runs.items():
        run = folder / "run-00000"
        markers = [line for line in (run / "ledger.jsonl").read_text().splitlines() if '"killed"' in line]
        assert markers == ['{"killed":0,"point":"c3:after_started","torn":500}',
                           '{"killed":1,"point":"after_decisions"}']
        (first, *_) = json.loads((run / "incarnations.json").read_text())
        assert first["killed_at"] == f"{kill}/torn:500"


def test_a_mutant_is_still_caught_and_its_token_reproduces_the_non_pausing_kill(killpoint, tmp_path):
    exit_code, report, output = run_report(killpoint, tmp_path, "--kill-at", "c4:after_effect", "--no-pause",
                                           "--workload", mutant_workload("retry_non_idempotent"))
    assert exit_code == 1, output
    failed = [run for run in report["runs"] if run["findings"]]
    assert failed and all(run["schedule"][0].endswith("/now") for run in failed)
    assert {"interrupted-action", "verify-before-replay"} <= {f["property"] for run in failed for f in run["findings"]}
    repro = killpoint("repro", failed[0]["token"])
    assert repro.exit_code == 1, repro.out + repro.err
    assert f"kill at {failed[0]['schedule'][0]}" in repro.out and "[interrupted-action]" in repro.out


def test_a_v1_workload_that_ignores_the_kill_reply_is_struck_by_the_harness_and_judged(killpoint, tmp_path):
    exit_code, report, output = run_report(killpoint, tmp_path, "--kill-at", "c3:after_effect/now",
                                           "--kill-at", "after_decisions/now",
                                           "--workload", workload("ignores_kill_reply.py"))
    assert exit_code == 0, output
    (run,) = report["runs"]
    killed = [(incarnation["killed_at"], incarnation["exit_code"]) for incarnation in run["incarnations"]]
    assert killed == [("c3:after_effect/now", None), ("after_decisions/now", None), (None, 0)]


def test_a_v1_workload_that_ignores_the_kill_reply_is_caught_when_it_recovers_wrongly(killpoint, tmp_path):
    # The same v1 client inside the retry mutant: the harness's strike alone must give the kill that exposes it.
    result = killpoint("run", DEMO, "--kill-at", "c4:after_effect/now", "--workload",
                       f"{workload('ignores_kill_reply.py')} --retry-non-idempotent")
    assert result.exit_code == 1, result.out + result.err
    assert "[interrupted-action]" in result.out
