"""The harness's own PostgreSQL (harness/databases/postgres.py): a fresh cluster on a socket, as an unprivileged
user, stopped and removed at the end, and swept when its harness was SIGKILLed. Real servers, real signals."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from killpoint.errors import ConfigError
from killpoint.harness.databases import postgres
from killpoint.harness.databases.postgres import LocalPostgres

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("postgres_installed")]



def query(server: LocalPostgres, sql: str) -> str:
    return subprocess.run([str(server.bin / "psql"), server.url, "-Atc", sql], capture_output=True, text=True,
                          check=True, timeout=30).stdout.strip()


def postmaster(folder: Path) -> int:
    return int((folder / "data" / "postmaster.pid").read_text().split()[0])


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return not Path(f"/proc/{pid}").exists()


def test_a_cluster_answers_as_an_unprivileged_user_on_its_socket_and_is_gone_once_stopped():
    server = LocalPostgres.start()
    try:
        assert query(server, "select 1 + 1") == "2"
        assert query(server, "select current_user") == "killpoint"
        assert query(server, "show listen_addresses") == ""  # no TCP port: nothing to collide on
        pid = postmaster(server.folder)
        assert os.stat(f"/proc/{pid}").st_uid == server.user.pw_uid != 0
    finally:
        server.stop()
    assert gone_within(pid, 10) and not server.folder.exists()


# A power loss's run: the data folder on the lazy file system, whose daemon takes it away (and the pid file in it)
# when the harness dies; the server is still found, by the pid kept outside it.
MOUNTED = ("from killpoint.harness.faults.lazyfs import LazyMount; from pathlib import Path; import tempfile;"
           "mount = lambda data: LazyMount.start(data, Path(tempfile.mkdtemp()) / 'lazy');")


@pytest.mark.parametrize("mount", ["", MOUNTED], ids=["plain", "on-the-lazy-file-system"])
def test_killpoint_clean_stops_and_removes_what_a_sigkilled_harness_left_and_never_a_live_ones(killpoint,
                                                                                              monkeypatch, mount):
    # A temporary folder of this test's own (one the server's user can reach), so no other test's clean sweeps it.
    private = Path(tempfile.mkdtemp(prefix="kp-postgres-test-", dir="/tmp"))
    private.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    live = LocalPostgres.start()
    # The harness keeps its server (and the server its lazy mount, whose daemon would take the data folder away
    # the moment its last reference went) until it is killed.
    start = "LocalPostgres.start(mount=mount)" if mount else "LocalPostgres.start()"
    harness = subprocess.Popen([sys.executable, "-c", f"{mount}from killpoint.harness.databases.postgres import "
                                f"LocalPostgres; server = {start}; print(server.folder, flush=True); import time; "
                                "time.sleep(60)"],
                               stdout=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(private)})
    try:
        assert harness.stdout is not None
        left = Path(harness.stdout.readline().strip())
        assert left.parent == private and live.folder.parent == private
        pid = postmaster(left)
        harness.send_signal(signal.SIGKILL)
        harness.wait(timeout=30)
        assert left.exists() and Path(f"/proc/{pid}").exists()  # a SIGKILLed harness removes nothing
        cleaned = killpoint("clean")
        assert f"stopped and removed {left}, a PostgreSQL cluster" in cleaned.out, cleaned.out + cleaned.err
        assert gone_within(pid, 10) and not left.exists()
        assert live.folder.exists() and query(live, "select 1") == "1"  # its harness (this one) lives
    finally:
        harness.kill()
        live.stop()
        shutil.rmtree(private, ignore_errors=True)


def test_a_missing_package_is_a_config_error_naming_the_fix(monkeypatch):
    monkeypatch.setattr(postgres.shutil, "which", lambda name: None)
    monkeypatch.setattr(postgres.glob, "glob", lambda pattern: [])
    with pytest.raises(ConfigError, match="apt-get install postgresql"):
        LocalPostgres.start()


def test_a_setting_the_server_refuses_is_a_config_error_naming_it_and_leaves_no_cluster():
    parent = Path(tempfile.mkdtemp(prefix="kp-postgres-test-", dir="/tmp"))
    parent.chmod(0o755)
    try:
        with pytest.raises(ConfigError) as refused:
            LocalPostgres.start(parent, settings={"shared_buffers": "lots"})
        assert 'invalid value for parameter "shared_buffers": "lots"' in str(refused.value)
        assert "the scenario's [database] settings (shared_buffers)" in str(refused.value)
        # Its folder removed, nothing of the server left: only this process's template, stopped, is there.
        template = postgres._TEMPLATES[parent]
        assert list(parent.iterdir()) == [template.folder]
        assert not (template.data_dir / "postmaster.pid").exists()
    finally:
        postgres._TEMPLATES.pop(parent).stop()
        shutil.rmtree(parent, ignore_errors=True)
