"""DBOS and LangGraph on PostgreSQL, judged as on SQLite: real servers (one per run), real SIGKILLs, real power losses.

The guarded workflows pass every kill, pausing and not; the plain LangGraph graph fails at exactly the kills where
it fails on SQLite (the framework re-runs the step it had not saved, whatever saves it); under a power loss,
PostgreSQL's defaults lose no acknowledged commit, and ``synchronous_commit = off`` loses one, named by the rule it
breaks with the dumps before and after the drop as evidence.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from killpoint.harness.databases import postgres
from killpoint.harness.execute._process_tree import process_gone
from tests.helpers import ROOT

FRAMEWORKS = ROOT / "scenarios" / "frameworks"
pytestmark = pytest.mark.usefixtures("postgres_installed")



def scenario(name: str) -> Path:
    return FRAMEWORKS / f"{name}.toml"


def verdicts(runs: Path) -> dict[str, tuple[str, set[str]]]:
    """Each run's schedule (its kills, joined) -> its outcome and the rules its findings name."""
    found = {}
    for verdict_file in sorted(runs.glob("run-*/verdict.json")):
        verdict = json.loads(verdict_file.read_text())
        found[" ".join(verdict["schedule"])] = (verdict["outcome"],
                                                 {finding["property"] for finding in verdict["findings"]})
    return found


@pytest.mark.parametrize("name", ["dbos_workflow_guarded_postgres", "langgraph_graph_guarded_postgres"])
@pytest.mark.parametrize("pause", [[], ["--no-pause"]], ids=["pausing", "no-pause"])
def test_a_guarded_workflow_on_postgres_passes_every_kill(killpoint, name, pause):
    result = killpoint("run", scenario(name), "--exhaustive", *pause)
    assert result.exit_code == 0, result.out + result.err
    assert " 0 failed" in result.out and "unknown" not in result.out.splitlines()[-1], result.out


def test_the_plain_graph_fails_at_the_same_kills_on_postgres_as_on_sqlite(killpoint, tmp_path):
    """The backend changes where a step's record is kept, not when LangGraph keeps it: a kill inside a step
    (entered, its effect done, returned) gives the same verdict on both. A kill at a saver's point races LangGraph's
    background saver on either backend (docs/frameworks.md gives its frequencies), so it is not compared."""
    by_backend = {}
    for name in ("langgraph_graph_sync", "langgraph_graph_sync_postgres"):
        result = killpoint("run", scenario(name), "--exhaustive", "--runs-dir", tmp_path / name)
        assert result.exit_code == 1, result.out + result.err
        by_backend[name] = {kill: verdict for kill, verdict in verdicts(tmp_path / name).items()
                            if kill.split(":")[1] in ("step_entered", "after_effect", "step_returned")}
    sqlite, on_postgres = by_backend.values()
    assert len(on_postgres) == 12 and on_postgres == sqlite
    assert {kill for kill, (outcome, _) in on_postgres.items() if outcome == "failed"} == {
        f"{call}:{point}" for call in ("c3", "c4") for point in ("step_entered", "after_effect", "step_returned")}


@pytest.mark.parametrize("kill", ["c3:step_recorded/power", "c4:step_recorded/power", "c2:step_entered/power"])
def test_postgres_defaults_lose_no_acknowledged_commit_at_a_power_loss(killpoint, tmp_path, kill):
    result = killpoint("run", scenario("dbos_workflow_guarded_postgres"), "--kill-at", kill, "--keep-all",
                       "--runs-dir", tmp_path)
    assert result.exit_code == 0, result.out + result.err
    run = tmp_path / "run-00000"
    assert (run / "database-power-loss-0.json").is_file()  # the server's data folder was dropped from, for real
    # What the kill left acknowledged, the server found again after its crash recovery.
    assert dumped(run / "store-at-kill-0.found") == dumped(run / "store-at-kill-0")


@pytest.mark.parametrize("name", ["dbos_workflow_guarded_postgres_async_commit",
                                  "dbos_workflow_guarded_postgres_fsync_off"])
def test_a_server_that_acknowledges_before_durable_loses_a_step_at_a_power_loss_and_it_is_named(killpoint, tmp_path,
                                                                                                 name):
    """synchronous_commit = off (the commit returns before its WAL is flushed) and fsync = off (never flushed)."""
    result = killpoint("run", scenario(name), "--kill-at", "c3:step_recorded/power", "--runs-dir", tmp_path)
    assert result.exit_code == 1, result.out + result.err
    assert "[verify-before-replay] c3 (kill c3:step_recorded/power)" in result.out, result.out
    assert "yet the store as the kill left it (store-at-kill-0) held it SUCCEEDED" in result.out, result.out
    run = tmp_path / "run-00000"
    at_kill, found = dumped(run / "store-at-kill-0"), dumped(run / "store-at-kill-0.found")
    assert "c3" in at_kill and "c3" not in found, (at_kill, found)  # DBOS had c3's commit back; the drop lost it


def test_synchronous_commit_off_loses_nothing_to_a_sigkill_alone(killpoint):
    """The server outlives the agent's kill: an unflushed commit is still the server's, and nothing is lost."""
    result = killpoint("run", scenario("dbos_workflow_guarded_postgres_async_commit"), "--kill-at",
                       "c3:step_recorded")
    assert result.exit_code == 0, result.out + result.err


def dumped(copy: Path) -> set[str]:
    """The planned steps DBOS's operation_outputs held in a store copy's dump (none when the table was not there: with
    fsync = off a power loss can take the tables DBOS made)."""
    outputs = json.loads((copy / "database-dump.json").read_text())["tables"]["operation_outputs"]
    return {row[2] for row in outputs["rows"]} if outputs is not None else set()


def test_a_sigkilled_harness_leaves_its_runs_servers_to_killpoint_clean_which_leaves_nothing(killpoint, monkeypatch):
    """The harness dies mid-run by SIGKILL: the run's server outlives it (it is not in the harness's tree, as it is not
    in the agent's), and `killpoint clean` stops it and removes its cluster, socket and data folder, and the harness's
    template cluster too."""
    private = Path(tempfile.mkdtemp(prefix="kp-postgres-run-", dir="/tmp"))
    private.chmod(0o755)  # the server's user reaches the cluster's folder inside
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    harness = subprocess.Popen([sys.executable, "-m", "killpoint", "run",
                                str(scenario("dbos_workflow_guarded_postgres")),
                                "--kill-at", "c4:step_recorded", "-j", "1", "--backend", "subprocess",
                                "--runs-dir", str(private / "runs")],
                               env={**os.environ, "TMPDIR": str(private)}, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # A run's workflow is running: its server, started before it, runs until the run ends.
        deadline = time.monotonic() + 120
        while not workflow_running(private) and time.monotonic() < deadline:
            time.sleep(0.02)
        servers = running_servers(private)
        assert servers, "no run's workflow started within 120 s"
        harness.send_signal(signal.SIGKILL)
        (cluster, postmaster), = servers.items()
        harness.wait(timeout=30)
        assert Path(f"/proc/{postmaster}").exists()  # a SIGKILLed harness stops nothing
        cleaned = killpoint("clean")
        assert f"stopped and removed {cluster}, a PostgreSQL cluster" in cleaned.out, cleaned.out + cleaned.err
        deadline = time.monotonic() + 30
        while not process_gone(postmaster) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert process_gone(postmaster) and not list(private.glob(f"{postgres.PREFIX}*"))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(harness.pid, signal.SIGKILL)  # what the harness had started in its own session
        harness.wait(timeout=30)
        for folder in private.glob(f"{postgres.PREFIX}*"):
            postgres.kill_postmaster(folder)
        shutil.rmtree(private, ignore_errors=True)


def workflow_running(parent: Path) -> bool:
    """Whether a workflow incarnation runs that was handed a database of a cluster in ``parent`` (an exec'd one: a
    process the fork server forked keeps the environment it was started with in /proc)."""
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if str(parent) in process.environ().get("KILLPOINT_DATABASE_URL", ""):
                return True
    return False


def running_servers(parent: Path) -> dict[Path, int]:
    """The clusters in ``parent`` whose server runs, with its postmaster's pid (initdb's bootstrap backend writes a
    negative one, and is no server)."""
    servers = {}
    for folder in parent.glob(f"{postgres.PREFIX}*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((folder / "data" / "postmaster.pid").read_text().split()[0])
            if pid > 0 and not process_gone(pid):
                servers[folder] = pid
    return servers


def test_a_workflow_on_the_users_own_server_gets_a_database_per_run_dropped_after(killpoint, tmp_path):
    """``[database] url``: the user's server (here a cluster of the test's own, its superuser's URL standing for a
    role with CREATEDB), a database of each run's own on it, judged as on killpoint's own server, and dropped."""
    server = postgres.LocalPostgres.start()
    try:
        text = scenario("dbos_workflow_guarded_postgres").read_text().replace(
            "[database]\npostgres = true\n", f'[database]\nurl = "{server.url}"\n')
        assert f'url = "{server.url}"' in text
        (tmp_path / "mine.toml").write_text(text)
        result = killpoint("run", tmp_path / "mine.toml", "--kill-at", "c3:step_recorded", "--runs-dir",
                           tmp_path / "runs")
        assert result.exit_code == 0, result.out + result.err
        assert "1 runs: 1 passed, 0 failed" in result.out, result.out
        left = subprocess.run([str(server.bin / "psql"), "-XAtc", "SELECT datname FROM pg_database", "-d", server.url],
                              capture_output=True, text=True, check=True).stdout.split()
        assert not [name for name in left if name.startswith("killpoint_")], left  # each run's, dropped
    finally:
        server.stop()
