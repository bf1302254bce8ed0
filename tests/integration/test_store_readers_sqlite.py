"""The ``sqlite`` format over hand-built databases: a well-formed journal, one left by a kill (WAL only, a hot
rollback journal), corrupt ones, and hostile queries and schemas that must be stopped, not obeyed."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

from killpoint import protocol as p
from killpoint.harness.judge.stores import _sqlite_copy, _store_file, reader_for
from killpoint.harness.judge.stores._sandbox import read_in_child
from tests.test_store_readers import PLAN, states

TABLE = {"format": "sqlite", "path": "journal.db",
         "query": "SELECT op_id, call_id, state, tool_class FROM ops ORDER BY seq",
         "fields": {"op": "op_id", "call": "call_id", "status": "state", "class": "tool_class"},
         "status": {"RUNNING": ["running"], "SUCCEEDED": ["done"], "FAILED": ["error"]}}
ROWS = [(1, "o1", "c1", "done", "READ_ONLY"), (2, "o2", "c2", "running", "NON_IDEMPOTENT"),
        (3, "o2", "c2", "error", "NON_IDEMPOTENT"), (4, "o3", "c3", "running", "UNKNOWN")]


def make_journal(path: Path, rows=ROWS, wal: bool = False) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None)
    if wal:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA wal_autocheckpoint = 0")
    connection.execute("CREATE TABLE ops (seq INTEGER, op_id TEXT, call_id TEXT, state TEXT, tool_class TEXT)")
    connection.executemany("INSERT INTO ops VALUES (?, ?, ?, ?, ?)", rows)
    return connection


def read(folder: Path, **table_overrides):
    return reader_for(dict(TABLE, **table_overrides)).read(folder, PLAN)


def test_rows_become_states_the_last_row_of_an_op_winning(tmp_path):
    make_journal(tmp_path / "journal.db").close()
    state = read(tmp_path)
    assert states(state) == {"c1": p.SUCCEEDED, "c2": p.FAILED, "c3": p.RUNNING} and not state.problems
    assert state.records_start and state.completed is None
    assert state.records["c2"].quote == ("journal.db: row 3 {op_id='o2', call_id='c2', state='error', "
                                         "tool_class='NON_IDEMPOTENT'}")
    assert reader_for(TABLE).files(PLAN) == ("journal.db", "journal.db-wal", "journal.db-shm", "journal.db-journal")


def test_a_copy_whose_rows_are_all_in_its_wal_is_read_and_never_changed(tmp_path):
    connection = make_journal(tmp_path / "journal.db", wal=True)  # kept open: the rows stay in the -wal
    try:
        before = {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)}
        assert len(before["journal.db-wal"]) > 0
        assert states(read(tmp_path)) == {"c1": p.SUCCEEDED, "c2": p.FAILED, "c3": p.RUNNING}
        assert {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)} == before
    finally:
        connection.close()


def test_a_hot_rollback_journal_as_a_kill_leaves_it_is_rolled_back_in_the_private_copy(tmp_path):
    live = tmp_path / "live"
    live.mkdir()
    writer = make_journal(live / "journal.db", rows=ROWS[:1])
    writer.execute("PRAGMA cache_size = 1")  # spill the open transaction into the main file
    writer.execute("BEGIN")
    writer.executemany("INSERT INTO ops VALUES (?, ?, ?, ?, ?)", [(n, "x", "c2", "done", "x" * 99) for n in range(3000)])
    for name in ("journal.db", "journal.db-journal"):  # the bytes a SIGKILL now would leave
        (tmp_path / name).write_bytes((live / name).read_bytes())
    writer.close()
    assert (tmp_path / "journal.db-journal").stat().st_size > 0
    state = read(tmp_path)
    assert states(state) == {"c1": p.SUCCEEDED} and not state.problems
    assert (tmp_path / "journal.db-journal").stat().st_size > 0  # the copy itself was not played back


def test_no_table_yet_is_nothing_durable_but_a_missing_table_beside_others_is_a_problem(tmp_path):
    sqlite3.connect(tmp_path / "journal.db").close()
    (tmp_path / "journal.db").write_bytes(b"")  # a writer that opened its file and was killed before setup
    assert read(tmp_path).records == {} and not read(tmp_path).problems
    connection = sqlite3.connect(tmp_path / "journal.db")
    connection.execute("CREATE TABLE other (x)")
    connection.close()
    assert read(tmp_path).problems == ("journal.db: journal.query failed: no such table: ops",)


@pytest.mark.parametrize("content", [b"not a database at all" * 300, b"SQLite format 3\0" + b"\xff" * 5000])
def test_a_corrupt_database_is_a_problem(tmp_path, content):
    (tmp_path / "journal.db").write_bytes(content)
    state = read(tmp_path)
    assert state.records == {} and len(state.problems) == 1 and state.problems[0].startswith("journal.db: ")


def test_a_column_the_fields_name_but_the_query_does_not_return(tmp_path):
    make_journal(tmp_path / "journal.db").close()
    assert read(tmp_path, query="SELECT call_id, state FROM ops").problems == (
        ("journal.db: journal.query returns no column 'op_id', 'tool_class' that journal.fields names (it returns "
        "call_id, state); name the columns with AS in the query, or fix journal.fields"),)


@pytest.mark.parametrize("query, why", [
    ("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT x, x, x, x FROM n WHERE x < 0",
     "the query ran past"),
    (("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT x AS op_id, x AS call_id, x AS state, "
     "x AS tool_class FROM n"), "over 1000 rows"),
    ("SELECT * FROM ops; DROP TABLE ops", "one statement"),
    ("ATTACH DATABASE '/tmp/killpoint-attached.db' AS evil", "not authorized"),
    ("WITH x AS (SELECT 1) DELETE FROM ops", "not authorized"),
    ("SELECT load_extension('/tmp/evil.so') AS op_id", "not authorized"),
    ("PRAGMA writable_schema = ON", "not authorized"),
    ("SELECT zeroblob(1000000) AS op_id", "too big"),
    (("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT zeroblob(10000) AS op_id, "
     "x AS call_id, x AS state, x AS tool_class FROM n"), "over 100000 bytes of text and blobs"),
])
def test_hostile_queries_are_stopped_and_change_nothing(tmp_path, monkeypatch, query, why):
    monkeypatch.setattr(_sqlite_copy, "QUERY_SECONDS", 1.0)
    # limits small enough to be reached long before the clock, on a loaded machine too
    monkeypatch.setattr(_sqlite_copy, "ROW_LIMIT", 1000)
    monkeypatch.setattr(_sqlite_copy, "VALUE_LIMIT_BYTES", 100_000)
    make_journal(tmp_path / "journal.db").close()
    before = (tmp_path / "journal.db").read_bytes()
    started = time.monotonic()
    state = read(tmp_path, query=query)
    assert time.monotonic() - started < 10
    assert state.records == {} and len(state.problems) == 1 and why in state.problems[0], state.problems
    assert (tmp_path / "journal.db").read_bytes() == before and not Path("/tmp/killpoint-attached.db").exists()


def test_a_hostile_schema_a_view_that_never_ends_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(_sqlite_copy, "QUERY_SECONDS", 1.0)
    connection = sqlite3.connect(tmp_path / "journal.db")
    connection.execute("CREATE VIEW ops AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) "
                       "SELECT x AS seq, 'o' AS op_id, 'c1' AS call_id, 'done' AS state, '' AS tool_class "
                       "FROM n WHERE x < 0")
    connection.close()
    assert "the query ran past 1 s" in read(tmp_path).problems[0]


def test_a_huge_database_is_not_copied(tmp_path, monkeypatch):
    make_journal(tmp_path / "journal.db").close()
    with open(tmp_path / "journal.db-wal", "wb") as huge:
        huge.truncate(1 << 40)
    assert "over the" in read(tmp_path).problems[0]
    monkeypatch.setattr(_store_file, "STORE_LIMIT_BYTES", 10_000)
    (tmp_path / "journal.db-wal").write_bytes(b"\0" * 9000)
    assert "side files hold over 10000 bytes" in read(tmp_path).problems[0]


def test_a_copy_read_before_is_not_forked_for_again_but_a_changed_copy_is(tmp_path, monkeypatch):
    children = []
    monkeypatch.setattr(_sqlite_copy, "_CLEAN_READS", {})  # what earlier tests read
    monkeypatch.setattr(_sqlite_copy, "read_in_child", lambda *args: children.append(args) or read_in_child(*args))
    make_journal(tmp_path / "journal.db").close()
    first, again = read(tmp_path), read(tmp_path)
    assert states(first) == states(again) == {"c1": p.SUCCEEDED, "c2": p.FAILED, "c3": p.RUNNING}
    assert len(children) == 1 and again.records is not first.records
    sqlite3.connect(tmp_path / "journal.db", isolation_level=None).execute("DELETE FROM ops WHERE seq > 1")
    assert states(read(tmp_path)) == {"c1": p.SUCCEEDED} and len(children) == 2
