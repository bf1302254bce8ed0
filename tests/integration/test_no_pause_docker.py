"""Non-pausing kills in containers, where the workload is PID 1 and SIGKILL from inside its namespace spares it.

The kill reply then makes it exit at once (``client.die_now``), which ends its namespace; the
harness's container kill follows as at every kill. Like every container test these fail under
the CI profile when no engine is usable, and skip (saying why) elsewhere.
"""

from __future__ import annotations

import pytest

from killpoint.harness.backends.docker import DockerBackend
from tests.helpers import mutant_workload
from tests.integration.test_docker_backend import docker_engine, leftover_sweeps_serialised  # noqa: F401 (fixtures)
from tests.integration.test_no_pause import killed_at_its_point, run_report, wait_until_gone

pytestmark = pytest.mark.usefixtures("docker_engine", "leftover_sweeps_serialised")


def test_a_kill_reply_ends_a_container_whose_pid_1_the_signal_spares(tmp_path):
    backend = DockerBackend()
    try:
        with killed_at_its_point(backend, tmp_path, now=True) as workload:
            assert workload.pid == 1, "the workload should be its container's init, which ignores its own SIGKILL"
            assert wait_until_gone(workload.launched.pid), "the container's init outlived the kill reply"
            assert workload.launched.wait() == 128 + 9
        assert not workload.ran_on.exists(), "the workload ran on past its kill point"
    finally:
        backend.close()


def test_the_docker_backend_judges_non_pausing_kills_as_pausing_ones(killpoint, tmp_path):
    exit_code, report, output = run_report(killpoint, tmp_path, "--backend", "docker", "--no-pause",
                                           "--kill-at", "c3:after_effect", "--kill-at", "after_decisions")
    assert exit_code == 0, output
    (run,) = report["runs"]
    killed = [(incarnation["killed_at"], incarnation["exit_code"]) for incarnation in run["incarnations"]]
    assert killed == [("c3:after_effect/now", None), ("after_decisions/now", None), (None, 0)]


def test_a_mutant_in_a_container_is_caught_by_a_non_pausing_kill_and_its_token_reproduces(killpoint, tmp_path):
    exit_code, report, output = run_report(killpoint, tmp_path, "--backend", "docker", "--kill-at",
                                           "c4:after_effect/now", "--workload", mutant_workload("retry_non_idempotent"))
    assert exit_code == 1, output
    (run,) = report["runs"]
    assert "interrupted-action" in {finding["property"] for finding in run["findings"]}
    repro = killpoint("repro", run["token"])
    assert repro.exit_code == 1 and "[interrupted-action]" in repro.out, repro.out + repro.err
    assert "backend docker" in repro.out and "c4:after_effect/now" in repro.out
