"""Hostile SQLite stores: a real hot journal whose trailer names a host file or a FIFO, a reader blocked or
stopped, a view of huge rows. The harness never lets SQLite act on a name the workload wrote, never waits on
SQLite itself, and leaves no reader process nor private folder behind."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from killpoint.harness.judge.stores import _sqlite_copy, reader_for
from tests.helpers import ROOT
from tests.integration.test_docker_backend import docker_engine  # noqa: F401
from tests.integration.test_hostile_world import run_harness
from tests.integration.test_store_readers_framework_databases import CHECKPOINTS_TABLE, WRITES_TABLE
from tests.test_store_readers import PLAN

pytestmark = pytest.mark.hostile

MAPPED = {"format": "sqlite", "path": "journal.db", "query": "SELECT op_id, call_id, state FROM ops ORDER BY seq",
          "fields": {"op": "op_id", "call": "call_id", "status": "state"},
          "status": {"RUNNING": ["running"], "SUCCEEDED": ["done"]}}
TABLES = {"sqlite": (MAPPED, "journal.db"), "langgraph-sqlite": ({"format": "langgraph-sqlite"}, "checkpoints.sqlite"),
          "dbos-sqlite": ({"format": "dbos-sqlite"}, "dbos.sqlite")}
MAGIC = bytes.fromhex("d9d505f920a163d7")
# A writer holding a transaction its cache could not keep: pages are in the database file, the originals in its
# -journal, when the test kills it.
WRITER = """
import sqlite3, sys, time
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("PRAGMA journal_mode = DELETE")
connection.execute("PRAGMA cache_size = 1")
connection.execute("BEGIN")
connection.executemany("INSERT INTO ops VALUES (?, 'x', 'c2', 'done')", [(n,) for n in range(3000)])
connection.execute("UPDATE ops SET state = 'x' || state")
print("in the middle", flush=True)
time.sleep(600)
"""
# A harness reading a store copy as a session does (SIGTERM raises, as in `killpoint run`; no module imported
# that `killpoint run` does not import); optionally with the super-journal check taken away, to stand for anything
# that keeps SQLite blocked.
READER = """
import json, sys
from pathlib import Path
from killpoint.harness.judge.stores import _sqlite_copy, reader_for
from killpoint.harness.model import Plan, PlannedCall
from killpoint.harness.execute.stop_signals import stop_signals
PLAN = Plan("task-1", tuple(PlannedCall(call, "read_config") for call in ("c1", "c2", "c3")))
folder, table, bypass, seconds = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3] == "bypass", sys.argv[4]
if bypass:
    _sqlite_copy.super_journal_name = lambda journal: None
if seconds:
    from killpoint.harness.judge.stores import _sandbox
    _sandbox.READ_SECONDS = float(seconds)
with stop_signals():
    state = reader_for(table).read(folder, PLAN)
print(json.dumps({"records": sorted(state.records), "problems": state.problems, "notes": state.notes}))
"""


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A folder anybody may pass through (as /etc and /tmp are): the victims, FIFOs and the readers' TMPDIR."""
    folder = Path(tempfile.mkdtemp(prefix="kp-hostile-stores-"))
    folder.chmod(0o755)
    (folder / "tmp").mkdir(mode=0o1777)
    (folder / "tmp").chmod(0o1777)
    (folder / "etc").mkdir(mode=0o755)
    try:
        yield folder
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=True)


def hot_journal(store: Path, name: str) -> Path:
    """A real hot rollback journal beside ``store/name``: its writer SIGKILLed in the middle of a transaction."""
    connection = sqlite3.connect(store / name, isolation_level=None)
    connection.execute("CREATE TABLE ops (seq INTEGER, op_id TEXT, call_id TEXT, state TEXT)")
    connection.execute("INSERT INTO ops VALUES (1, 'o1', 'c1', 'done')")
    connection.close()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store / name)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "in the middle\n"
    finally:
        writer.kill()
        writer.wait(timeout=30)
    journal = store / f"{name}-journal"
    assert journal.read_bytes().startswith(MAGIC) and os.path.getsize(store / name) > 8192
    return journal


def point_at(journal: Path, target: Path) -> None:
    """Append a super-journal record naming ``target`` (sqlite's pager.c, writeSuperJournal)."""
    name = str(target).encode()
    checksum = sum(byte - 256 if byte > 127 else byte for byte in name) & 0xFFFFFFFF
    with journal.open("ab") as appended:
        appended.write(name + len(name).to_bytes(4, "big") + checksum.to_bytes(4, "big") + MAGIC)


def read_elsewhere(store: Path, table: dict, scratch: Path, *options: str) -> subprocess.Popen[str]:
    """A harness process reading ``store`` with its TMPDIR in ``scratch``."""
    arguments = [*options, "", ""][:2]
    return subprocess.Popen([sys.executable, "-c", READER, str(store), json.dumps(table), *arguments],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TMPDIR=str(scratch / "tmp")))


def answer(reader: subprocess.Popen[str], timeout: float = 60) -> dict:
    try:
        out, err = reader.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        reader.kill()
        reader.communicate()
        raise AssertionError(f"the store read was still running after {timeout:g} s") from None
    assert reader.returncode == 0, err
    return json.loads(out)


def wait_gone(pids: list[int], seconds: float = 10) -> list[int]:
    deadline = time.monotonic() + seconds
    while (alive := [pid for pid in pids if psutil.pid_exists(pid)
                     and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


@pytest.mark.parametrize("form", TABLES)
def test_a_hot_journals_super_journal_record_never_makes_sqlite_delete_the_file_it_names(tmp_path, scratch, form):
    table, name = TABLES[form]
    victim = scratch / "etc" / "passwd"
    victim.write_text("root:x:0:0\n")
    journal = hot_journal(tmp_path, name)
    point_at(journal, victim)
    copied = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    read = answer(read_elsewhere(tmp_path, table, scratch))
    assert victim.read_text() == "root:x:0:0\n"
    assert read["records"] == [] and len(read["problems"]) == 1
    assert f"{name}-journal ends with a super-journal record naming {str(victim).encode()!r}" in read["problems"][0]
    assert "was not played back" in read["problems"][0]
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == copied
    assert os.listdir(scratch / "tmp") == []


def test_a_super_journal_record_naming_a_fifo_neither_hangs_nor_leaves_anything(tmp_path, scratch):
    fifo = scratch / "etc" / "initctl"
    os.mkfifo(fifo, 0o666)
    point_at(hot_journal(tmp_path, "journal.db"), fifo)
    read = answer(read_elsewhere(tmp_path, MAPPED, scratch), timeout=30)
    assert "ends with a super-journal record" in read["problems"][0]
    assert os.listdir(scratch / "tmp") == []


def test_a_hot_journal_is_rolled_back_in_the_private_copy_and_the_report_says_so(tmp_path, scratch):
    hot_journal(tmp_path, "journal.db")
    read = answer(read_elsewhere(tmp_path, MAPPED, scratch))
    assert read["records"] == ["c1"] and read["problems"] == []
    assert read["notes"] == ["journal.db-journal was a hot rollback journal (a transaction the kill cut short): "
                             "SQLite rolled it back in a private copy, so the store was read as it was before "
                             "that transaction"]
    assert (tmp_path / "journal.db-journal").read_bytes().startswith(MAGIC)  # the copy itself: never played back


def test_a_reader_blocked_in_sqlite_is_killed_at_its_deadline_and_leaves_nothing(tmp_path, scratch):
    fifo = scratch / "etc" / "initctl"
    os.mkfifo(fifo, 0o666)
    point_at(hot_journal(tmp_path, "journal.db"), fifo)
    started = time.monotonic()
    read = answer(read_elsewhere(tmp_path, MAPPED, scratch, "bypass", "2"), timeout=30)
    assert time.monotonic() - started < 20
    assert read["problems"] == ["the store's reader ran past 2 s and was killed (SQLite was kept busy or blocked "
                                "by what the store holds)"]
    assert os.listdir(scratch / "tmp") == []


def test_a_harness_stopped_by_sigterm_while_sqlite_is_blocked_stops_and_its_reader_dies_with_it(tmp_path, scratch):
    fifo = scratch / "etc" / "initctl"
    os.mkfifo(fifo, 0o666)
    point_at(hot_journal(tmp_path, "journal.db"), fifo)
    reader = read_elsewhere(tmp_path, MAPPED, scratch, "bypass")
    try:
        deadline = time.monotonic() + 30
        while not (children := psutil.Process(reader.pid).children()) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # into SQLite's open of the FIFO
        reader.send_signal(signal.SIGTERM)
        reader.communicate(timeout=10)
    finally:
        reader.kill()
        reader.communicate()
    assert reader.returncode != 0 and children  # stopped, as `killpoint run` is, by the Terminated it raised
    assert wait_gone([child.pid for child in children]) == []
    assert os.listdir(scratch / "tmp") == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the reader drops to nobody only when the harness is root")
def test_even_a_super_journal_sqlite_follows_can_reach_only_the_private_copy(tmp_path, scratch, monkeypatch):
    victim = scratch / "etc" / "passwd"
    victim.write_text("root:x:0:0\n")
    point_at(hot_journal(tmp_path, "journal.db"), victim)
    monkeypatch.setattr(_sqlite_copy, "super_journal_name", lambda journal: None)
    monkeypatch.setattr(tempfile, "tempdir", str(scratch / "tmp"))
    reader_for(MAPPED).read(tmp_path, PLAN)
    assert victim.read_text() == "root:x:0:0\n"
    assert os.listdir(scratch / "tmp") == []


@pytest.mark.parametrize("query, problem", [
    ("SELECT op_id, call_id, state FROM ops", "the query returned over 16777216 bytes of text and blobs and was "
                                              "stopped; no honest plan records that much"),
    ("SELECT op_id, call_id, state FROM ops ORDER BY seq", "took over the 512 MiB of memory SQLite may use"),
])
def test_a_view_of_huge_rows_is_stopped_at_a_named_limit_as_the_rows_arrive(tmp_path, query, problem):
    connection = sqlite3.connect(tmp_path / "journal.db")
    connection.execute("CREATE VIEW ops AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) "
                       "SELECT x AS seq, zeroblob(15000000) AS op_id, 'c1' AS call_id, 'done' AS state FROM n "
                       "WHERE x <= 200")
    connection.close()
    before = psutil.Process().memory_info().rss
    started = time.monotonic()
    state = reader_for(dict(MAPPED, query=query)).read(tmp_path, PLAN)
    assert time.monotonic() - started < 10 and psutil.Process().memory_info().rss - before < 100 << 20
    assert state.records == {} and len(state.problems) == 1 and problem in state.problems[0], state.problems


def test_a_fresh_harness_reads_langgraph_checkpoints_though_its_reader_may_import_nothing(tmp_path, scratch):
    ormsgpack = pytest.importorskip("ormsgpack")
    connection = sqlite3.connect(tmp_path / "checkpoints.sqlite")
    connection.execute(WRITES_TABLE)
    connection.execute(CHECKPOINTS_TABLE)
    connection.execute("INSERT INTO checkpoints VALUES ('task-1', '', 'cp', NULL, 'msgpack', ?, '{}')",
                       (ormsgpack.packb({"versions_seen": {"c1": {}}, "channel_values": {}}),))
    connection.commit()
    connection.close()
    assert answer(read_elsewhere(tmp_path, {"format": "langgraph-sqlite"}, scratch)) == {
        "records": ["c1"], "problems": [], "notes": []}


SHORT = ROOT / "scenarios" / "sqlite_journal" / "short.toml"


@pytest.mark.integration
@pytest.mark.parametrize("backend", ["subprocess", "forkserver", "docker"])
def test_a_whole_session_whose_runtime_plants_a_super_journal_leaves_the_host_file_and_is_unknown(
        request, tmp_path, scratch, backend):
    """The audit's attack as a user meets it: `killpoint run` as root, the store read after a real kill."""
    if backend == "docker":
        request.getfixturevalue("docker_engine")
    victim = scratch / "etc" / "passwd"
    victim.write_text("root:x:0:0\n")
    report = tmp_path / "report.json"
    harness = run_harness(tmp_path / "harness.log", "run", SHORT, "--backend", backend, "--kill-at", "c2:after_effect",
                          "--workload", f"{{python}} -m killpoint.scenarios.hostile.plants_super_journal {victim}",
                          "--runs-dir", tmp_path / "runs", "--json", report)
    assert harness.exit_code is not None, f"the harness hung:\n{harness.output[-3000:]}"
    assert victim.read_text() == "root:x:0:0\n"
    assert harness.exit_code == 3 and "Traceback" not in harness.output, harness.output[-3000:]
    (run,) = json.loads(report.read_text())["runs"]
    assert run["outcome"] == "unknown"
    assert f"agent.db-journal ends with a super-journal record naming {str(victim).encode()!r}" in json.dumps(run)
