"""The dump of a store kept in PostgreSQL (harness/databases/dump.py), against real servers and hostile workloads.

The workload wrote the database, so the dump trusts none of it: the workload's
role is no superuser and cannot become the harness's; a relation that is not a
plain table is refused before it is read (a view would run the workload's
code as the harness's superuser); so is a table with a column of a type the
workload defined (its implicit cast would run), and the harness reads as its
``reader``, which could not write a file or run a program were such a cast
run, and which no row policy of the workload's hides a row from; a store past
the row bound is unreadable, never judged on a part; a server the workload
stopped cannot hang the harness; a long value is cut. The killed workload's
statements are let end before the dump (a commit can land after the kill),
and those that do not are ended. The server's settings read back as written.
Each test starts a server of its own (LocalPostgres).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest
from langgraph.checkpoint.postgres.base import BasePostgresSaver

from killpoint import protocol as p
from killpoint.harness.databases import dump, postgres
from killpoint.harness.databases.postgres import LocalPostgres
from killpoint.harness.databases.run_database import LocalServerDatabase
from killpoint.harness.judge.stores import DurableState
from killpoint.harness.judge.stores._database_dump import DUMP_NAME
from killpoint.harness.judge.stores._database_dump import VALUE_CHARS
from killpoint.harness.judge.stores._dbos import DbosPostgres
from killpoint.harness.judge.stores._langgraph import LangGraphPostgres
from tests.test_store_readers import PLAN, states

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("postgres_installed")]

# DBOS 3.4.0's system tables, the columns the dump reads.
OPERATION_OUTPUTS = ("CREATE TABLE dbos.operation_outputs (workflow_uuid text NOT NULL, function_id int NOT NULL, "
                     "function_name text NOT NULL DEFAULT '', output text, error text)")
WORKFLOW_STATUS = ("CREATE TABLE dbos.workflow_status (workflow_uuid text PRIMARY KEY, status text, "
                   "parent_workflow_id text)")
# How long a test waits for a dump that should return on its own (ANSWER_S, patched to ANSWER_PATCHED_S, bounds it).
ANSWER_PATCHED_S = 2.0
RETURN_DEADLINE_S = 30.0



@pytest.fixture
def server() -> Iterator[LocalPostgres]:
    """A server of the test's own, stopped and removed whatever the test did."""
    started = LocalPostgres.start()
    try:
        yield started
    finally:
        started.stop()


Statement = str | tuple[str, tuple[object, ...]]  # SQL, or SQL and its %s parameters


def as_workload(server: LocalPostgres, *statements: Statement) -> None:
    """Run ``statements`` as the workload would: its own role, over the URL it is handed, each committed."""
    with psycopg.connect(server.workload_url, autocommit=True) as connection:
        for statement in statements:
            sql, params = (statement, None) if isinstance(statement, str) else statement
            connection.execute(sql, params)


def dbos_tables(server: LocalPostgres) -> None:
    as_workload(server, "CREATE SCHEMA dbos", OPERATION_OUTPUTS, WORKFLOW_STATUS)


def dumped(copy: Path) -> dict[str, Any]:
    """The tables of the dump written into ``copy``."""
    tables: dict[str, Any] = json.loads((copy / DUMP_NAME).read_text())["tables"]
    return tables


def test_the_workload_role_is_no_superuser_and_cannot_do_what_one_can(server: LocalPostgres) -> None:
    """Were the workload a superuser, it could run programs as the server's user and redefine what the harness's
    reads run."""
    with psycopg.connect(server.workload_url) as connection:
        assert connection.execute("SELECT current_user, rolsuper, rolcreaterole, rolcreatedb FROM pg_roles "
                                  "WHERE rolname = current_user").fetchone() == ("workload", False, False, False)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        as_workload(server, f"COPY (SELECT 1) TO PROGRAM 'touch {server.socket_dir / 'escaped'}'")
    assert not (server.socket_dir / "escaped").exists()


@pytest.mark.parametrize("password", [pytest.param(None, id="no-password"), pytest.param("guess", id="a-guess")])
def test_the_workload_cannot_log_in_as_the_harness_without_its_password(
        server: LocalPostgres, monkeypatch: pytest.MonkeyPatch, password: str | None) -> None:
    """The socket is the workload's too: the harness's superuser is behind a password only the harness holds."""
    for variable in ("PGPASSWORD", "PGPASSFILE", "PGSERVICEFILE"):
        monkeypatch.delenv(variable, raising=False)
    credentials = postgres.ROLE if password is None else f"{postgres.ROLE}:{password}"
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(f"postgresql://{credentials}@/{postgres.WORKLOAD_DATABASE}?host={server.socket_dir}",
                        passfile="/dev/null", connect_timeout=10).close()


@pytest.mark.parametrize("replaced", ["operation_outputs", "workflow_status"])
def test_a_view_in_place_of_a_store_table_is_refused_before_it_is_read(server: LocalPostgres, tmp_path: Path,
                                                                      replaced: str) -> None:
    """A view's SELECT runs what the workload defined, as the harness's superuser (which may write files as the
    server's user, read-only transaction or not): the dump names it and reads nothing, and no dump is written,
    even after an earlier query of the store was read."""
    witness = server.socket_dir / "witness"  # the server's user can write there, the workload's role cannot
    dbos_tables(server)
    columns = {"operation_outputs": "dbos.evil() AS workflow_uuid, 1 AS function_id, 'c1'::text AS function_name, "
                                    "NULL::text AS error",
               "workflow_status": "dbos.evil() AS workflow_uuid, 'SUCCESS'::text AS status, "
                                  "NULL::text AS parent_workflow_id"}
    as_workload(server, f"DROP TABLE dbos.{replaced}",
                "CREATE FUNCTION dbos.evil() RETURNS text LANGUAGE plpgsql AS $$ BEGIN "
                f"EXECUTE 'COPY (SELECT current_user) TO ' || quote_literal('{witness}'); "
                "PERFORM pg_sleep(30); RETURN 'x'; END $$",
                f"CREATE VIEW dbos.{replaced} AS SELECT {columns[replaced]}")
    problems = dump.dump_store(server.admin_url, DbosPostgres().dump_queries(PLAN), tmp_path)
    assert problems == [f"dbos.{replaced} is not a plain table (pg_class.relkind 'v'); it was not read, as reading "
                        "it could run what the workload defined"]
    assert not (tmp_path / DUMP_NAME).exists()
    assert not witness.exists()
    # The witness is real: the view read as the harness's superuser, in a read-only transaction, does write it.
    with psycopg.connect(server.admin_url, options="-c statement_timeout=1000") as connection:
        connection.read_only = True
        with pytest.raises(psycopg.errors.QueryCanceled):
            connection.execute(f"SELECT * FROM dbos.{replaced}")
    assert witness.read_text() == f"{postgres.ROLE}\n"


@pytest.mark.parametrize(("rows", "bounded"), [pytest.param(5, False, id="at-the-bound"),
                                               pytest.param(6, True, id="past-the-bound")])
def test_a_store_past_the_row_bound_is_unreadable_never_judged_on_a_part(
        server: LocalPostgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int, bounded: bool) -> None:
    monkeypatch.setattr(dump, "ROW_LIMIT", 5)
    dbos_tables(server)
    as_workload(server, "INSERT INTO dbos.workflow_status VALUES ('task-1', 'PENDING', NULL)",
                f"INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name) "
                f"SELECT 'task-1', n, 'step' || n FROM generate_series(1, {rows}) AS n")
    problems = dump.dump_store(server.admin_url, DbosPostgres().dump_queries(PLAN), tmp_path)
    if bounded:
        assert problems == ["operation_outputs: over 5 rows; no honest run of a plan records that much, so the "
                            "store was not read"]
        assert not (tmp_path / DUMP_NAME).exists()
    else:
        assert problems == []
        assert len(dumped(tmp_path)["operation_outputs"]["rows"]) == rows


@pytest.mark.parametrize("made", [pytest.param((), id="no-schema"),
                                  pytest.param(("CREATE SCHEMA dbos",), id="empty-schema"),
                                  pytest.param(("CREATE SCHEMA dbos", WORKFLOW_STATUS), id="one-table-of-two")])
def test_tables_the_framework_had_not_made_are_dumped_as_null_and_read_as_nothing_durable(
        server: LocalPostgres, tmp_path: Path, made: tuple[str, ...]) -> None:
    """A kill before DBOS made its tables: nothing is durable, and the state says so rather than unreadable."""
    as_workload(server, *made)
    assert dump.dump_store(server.admin_url, DbosPostgres().dump_queries(PLAN), tmp_path) == []
    tables = dumped(tmp_path)
    assert tables["operation_outputs"] is None
    assert tables["workflow_status"] == (None if len(made) < 2 else {"columns": ["workflow_uuid", "status"],
                                                                     "rows": []})
    assert DbosPostgres().read(tmp_path, PLAN) == DurableState({}, False, False)


def signal_all(processes: list[psutil.Process], signum: signal.Signals) -> None:
    """Signal each of ``processes`` still there (a backend of a connection just closed may be gone already)."""
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(signum)


def test_a_server_that_stops_answering_cannot_hang_the_harness(server: LocalPostgres, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A workload may stop the server's processes it reaches, or starve them: the dump gives up after ANSWER_S."""
    monkeypatch.setattr(dump, "ANSWER_S", ANSWER_PATCHED_S)
    dbos_tables(server)
    pid = int((server.data_dir / "postmaster.pid").read_text().split()[0])
    postmaster = psutil.Process(pid)
    stopped = [postmaster, *postmaster.children(recursive=True)]
    answer: list[list[str]] = []
    try:
        signal_all(stopped, signal.SIGSTOP)
        asking = threading.Thread(target=lambda: answer.append(
            dump.dump_store(server.admin_url, DbosPostgres().dump_queries(PLAN), tmp_path)), daemon=True)
        asking.start()
        asking.join(RETURN_DEADLINE_S)
        assert answer == [[f"the database did not answer the store's dump within {ANSWER_PATCHED_S:.0f} s (a server "
                           "stopped or starved); the store was not read"]]
        assert not (tmp_path / DUMP_NAME).exists()
    finally:
        signal_all(stopped, signal.SIGCONT)
    assert dump.dump_store(server.admin_url, DbosPostgres().dump_queries(PLAN), tmp_path) == []  # answering again


def test_a_dbos_store_is_dumped_its_long_values_cut_and_read_as_it_was(server: LocalPostgres, tmp_path: Path) -> None:
    """What a step returned is never dumped (only ``error IS NULL``), and a text value is cut at VALUE_CHARS: the
    dump holds names and ids, not whatever the workload chose to store."""
    long_id = "w" * (VALUE_CHARS * 5)
    dbos_tables(server)
    as_workload(server,
                ("INSERT INTO dbos.operation_outputs VALUES (%s, 1, 'c1', 'a pickle of what it returned', NULL), "
                 "(%s, 2, 'c2', NULL, 'a pickle of its exception'), (%s, 3, %s, NULL, NULL)",
                 (long_id, long_id, long_id, "c3" + "x" * VALUE_CHARS)),
                ("INSERT INTO dbos.workflow_status VALUES (%s, 'SUCCESS', NULL), ('child', 'PENDING', %s)",
                 (long_id, long_id)))
    assert dump.dump_store(server.admin_url, DbosPostgres().dump_queries(PLAN), tmp_path) == []
    tables = dumped(tmp_path)
    short_id = long_id[:VALUE_CHARS]
    assert tables["operation_outputs"] == {
        "columns": ["workflow_uuid", "function_id", "function_name", "succeeded"],
        "rows": [[short_id, 1, "c1", True], [short_id, 2, "c2", False],
                 [short_id, 3, ("c3" + "x" * VALUE_CHARS)[:VALUE_CHARS], True]]}
    assert tables["workflow_status"] == {"columns": ["workflow_uuid", "status"], "rows": [[short_id, "SUCCESS"]]}
    assert "pickle" not in (tmp_path / DUMP_NAME).read_text()
    state = DbosPostgres().read(tmp_path, PLAN)
    assert states(state) == {"c1": p.SUCCEEDED, "c2": p.FAILED} and state.completed is True and not state.problems
    assert state.records["c1"].quote.startswith("postgres dbos.operation_outputs(workflow_uuid='www")


def test_a_langgraph_store_in_postgres_savers_own_tables_is_dumped_and_read(server: LocalPostgres,
                                                                           tmp_path: Path) -> None:
    """The dump's queries over the tables PostgresSaver's own migrations make: a write counts only when its
    checkpoint was saved, a node a checkpoint's versions_seen names returned, and ``__end__`` kept as a blob of
    the version the checkpoint names is the graph's end."""
    checkpoint = json.dumps({"versions_seen": {"__input__": {}, "c1": {"branch:to:c1": "1"}}, "channel_values": {},
                             "channel_versions": {"__end__": "00003"}})
    as_workload(server, *BasePostgresSaver.MIGRATIONS,
                ("INSERT INTO checkpoints (thread_id, checkpoint_id, checkpoint) VALUES ('task-1', 'cp1', %s)",
                 (checkpoint,)),
                "INSERT INTO checkpoint_blobs VALUES ('task-1', '', '__end__', '00003', 'msgpack', '\\x00')",
                "INSERT INTO checkpoint_writes VALUES ('task-1', '', 'cp1', 't2', 0, 'config', 'msgpack', '\\x00', "
                "'~__pregel_pull, c2'), ('task-1', '', 'never-saved', 't3', 0, 'x', 'msgpack', '\\x00', "
                "'~__pregel_pull, c3')")
    assert dump.dump_store(server.admin_url, LangGraphPostgres().dump_queries(PLAN), tmp_path) == []
    tables = dumped(tmp_path)
    assert tables["checkpoint_writes"]["rows"] == [[1, "task-1", "~__pregel_pull, c2", 0, "config"]]
    assert tables["checkpoints"]["rows"] == [[1, "task-1", "cp1", ["__input__", "c1"], True]]
    state = LangGraphPostgres().read(tmp_path, PLAN)
    assert states(state) == {"c1": p.SUCCEEDED, "c2": p.SUCCEEDED} and not state.problems


# --- what else the workload leaves for the dump: a cast of its own, killed sessions, a row policy ------------------

@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A fresh folder in the temporary directory the server's user may write in, removed after the test: a witness
    file there is proof that the workload's code ran as the server's user."""
    folder = Path(tempfile.mkdtemp(prefix="witness-"))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# What the workload's cast of its own type to text does when it runs, and the role a reader would need to let it.
ESCAPES = [pytest.param("COPY (SELECT 1) TO PROGRAM 'touch {witness}'", "pg_execute_server_program",
                        id="copy-to-program"),
           pytest.param("COPY (SELECT current_user) TO '{witness}'", "pg_write_server_files", id="copy-to-file")]
REFUSED_TYPE = ("dbos.operation_outputs: column workflow_uuid is of a type the workload defined (dbos.sneaky); the "
                "table was not read, as reading it could run a cast of the workload's")


def sneaky_store(server: LocalPostgres, escape: str, witness: Path) -> None:
    """DBOS's tables as the workload's role makes them, one row each, but workflow_uuid of a type of the workload's,
    dbos.sneaky, with an implicit cast to text that runs ``escape``: the dump's left(workflow_uuid, ...) picks it.
    (PL/pgSQL checks the COPY's privilege only when it runs, so the workload's role can define it.)"""
    as_workload(server, "CREATE SCHEMA dbos",
                "CREATE TYPE dbos.sneaky AS (id text)",
                "CREATE FUNCTION dbos.sneaky_text(dbos.sneaky) RETURNS text LANGUAGE plpgsql AS $$ BEGIN "
                f"{escape.format(witness=witness)}; RETURN 'task-1'; END $$",
                "CREATE CAST (dbos.sneaky AS text) WITH FUNCTION dbos.sneaky_text(dbos.sneaky) AS IMPLICIT",
                OPERATION_OUTPUTS.replace("workflow_uuid text", "workflow_uuid dbos.sneaky"),
                WORKFLOW_STATUS,
                "INSERT INTO dbos.operation_outputs VALUES (ROW('task-1'), 1, 'c1', NULL, NULL)",
                "INSERT INTO dbos.workflow_status VALUES ('task-1', 'PENDING', NULL)")


@pytest.mark.parametrize(("escape", "privilege"), ESCAPES)
def test_a_column_of_a_type_the_workload_defined_is_refused_and_its_implicit_cast_never_runs(
        server: LocalPostgres, tmp_path: Path, open_folder: Path, escape: str, privilege: str) -> None:
    """The run's database dumps the store (LocalServerDatabase.dump), and dump_store reads as the reader: either
    way the table is refused before it is read, the problem naming the column's type, no dump is written and the
    cast never ran."""
    witness = open_folder / "witness"
    sneaky_store(server, escape, witness)
    queries = DbosPostgres().dump_queries(PLAN)
    assert LocalServerDatabase(server).dump(queries, tmp_path) == [REFUSED_TYPE]
    assert dump.dump_store(server.reader_url, queries, tmp_path) == [REFUSED_TYPE]
    assert not (tmp_path / DUMP_NAME).exists()
    assert not witness.exists()
    # The witness is real: the dump's own query, read as the harness's superuser (in a read-only transaction, with
    # search_path pg_catalog, as the dump once read), runs the cast, and the cast runs the COPY.
    with psycopg.connect(server.admin_url, options="-c search_path=pg_catalog") as connection:
        connection.read_only = True
        assert connection.execute(queries[0].sql, dict(queries[0].params)).fetchall() == [("task-1", 1, "c1", True)]
    assert witness.exists()


@pytest.mark.parametrize(("escape", "privilege"), ESCAPES)
def test_a_cast_of_the_workloads_run_by_the_reader_can_neither_run_a_program_nor_write_a_file(
        server: LocalPostgres, tmp_path: Path, open_folder: Path, monkeypatch: pytest.MonkeyPatch, escape: str,
        privilege: str) -> None:
    """Were the type check missed, the cast would run as the dump's reader: no superuser, with none of the roles
    COPY to a program or a file needs, so the COPY is refused, the dump fails (none written) and no witness is."""
    monkeypatch.setattr(dump, "_refusals", lambda connection, table, kind: [])
    witness = open_folder / "witness"
    sneaky_store(server, escape, witness)
    problems = dump.dump_store(server.reader_url, DbosPostgres().dump_queries(PLAN), tmp_path)
    assert len(problems) == 1 and problems[0].startswith("the database could not be read: "), problems
    assert privilege in problems[0], problems  # the cast did run, and its COPY was refused
    assert not (tmp_path / DUMP_NAME).exists()
    assert not witness.exists()
    with psycopg.connect(server.reader_url) as connection:
        assert connection.execute("SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user"
                                  ).fetchone() == (postgres.READER_ROLE, False)


@pytest.mark.parametrize("value", [pytest.param("C:\\new", id="a-backslash-before-n"),
                                   pytest.param("C:\\dir\\", id="ending-in-a-backslash"),
                                   pytest.param("\\\\server\\share\\'s", id="backslashes-and-a-quote")])
def test_a_setting_with_backslashes_reads_back_from_the_server_exactly_as_given(
        monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """postgresql.conf reads a backslash as an escape (``\\n`` a newline; one before the closing quote escapes
    it, and the file does not parse): the server starts, its file has no error, and it holds the value given."""
    monkeypatch.delenv("PGAPPNAME", raising=False)  # else libpq sends an application_name of the client's
    started = LocalPostgres.start(settings={"application_name": value})
    try:
        with psycopg.connect(started.url) as connection:
            assert connection.execute("SHOW application_name").fetchone() == (value,)
            assert connection.execute("SELECT source FROM pg_settings WHERE name = 'application_name'"
                                      ).fetchone() == ("configuration file",)
            assert connection.execute("SELECT name, error FROM pg_file_settings WHERE error IS NOT NULL"
                                      ).fetchall() == []
    finally:
        started.stop()


# DBOS's tables, the columns the killed workload writes; the workload itself: its role over the URL it is handed,
# each statement (argv after the URL) committed on its own.
KILLED_OUTPUTS = ("CREATE TABLE dbos.operation_outputs (workflow_uuid text, function_id int, function_name text, "
                  "error text)")
WORKLOAD = ("import sys, psycopg\n"
            "with psycopg.connect(sys.argv[1], autocommit=True) as connection:\n"
            "    for statement in sys.argv[2:]:\n"
            "        connection.execute(statement)\n")
SESSION_DEADLINE_S = 30.0


@contextlib.contextmanager
def workload_running(server: LocalPostgres, *statements: str) -> Iterator[subprocess.Popen[bytes]]:
    """A workload process making DBOS's tables then running ``statements``; SIGKILLed and reaped at the latest when
    the block ends."""
    process = subprocess.Popen([sys.executable, "-c", WORKLOAD, server.workload_url, "CREATE SCHEMA dbos",
                                KILLED_OUTPUTS, WORKFLOW_STATUS, *statements])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def wait_for_do_statement(server: LocalPostgres, workload: subprocess.Popen[bytes]) -> None:
    """Return once the workload's session is running its DO statement, as the harness's superuser sees it."""
    deadline = time.monotonic() + SESSION_DEADLINE_S
    with psycopg.connect(server.url, autocommit=True) as connection:
        while not connection.execute("SELECT 1 FROM pg_stat_activity WHERE usename = 'workload' AND "
                                     "state = 'active' AND query LIKE 'DO %'").fetchone():
            assert workload.poll() is None, "the workload ended before its DO statement ran"
            assert time.monotonic() < deadline, "the workload's DO statement never ran"
            time.sleep(0.01)


def test_a_statement_the_killed_workload_left_running_commits_before_the_dump_reads(
        server: LocalPostgres, tmp_path: Path) -> None:
    """A backend finishes the statement it was running when its client was SIGKILLed: c1's insert, after the
    sleep, commits well after the kill. The dump waits for the workload's sessions to end, so it holds c1, as the
    next incarnation will find the store."""
    with workload_running(server, "DO $$ BEGIN PERFORM pg_sleep(2); INSERT INTO dbos.operation_outputs VALUES "
                                  "('w', 1, 'c1', NULL); END $$") as workload:
        wait_for_do_statement(server, workload)
        time.sleep(0.3)
        workload.kill()
        workload.wait()
    with psycopg.connect(server.admin_url) as connection:  # just after the kill, c1 is not in the store yet
        assert connection.execute("SELECT count(*) FROM dbos.operation_outputs").fetchone() == (0,)
    assert LocalServerDatabase(server).dump(DbosPostgres().dump_queries(PLAN), tmp_path) == []
    assert dumped(tmp_path)["operation_outputs"]["rows"] == [["w", 1, "c1", True]]


def test_a_session_the_killed_workload_left_stuck_is_ended_after_sessions_s(
        server: LocalPostgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A statement that would sleep ten minutes after its client was SIGKILLed, holding a lock the dump needs and
    an insert not committed: the dump waits SESSIONS_S for it, then ends it (its insert rolled back), reads
    without a problem, and no session of the workload's is left."""
    monkeypatch.setattr(dump, "SESSIONS_S", 1.0)
    with workload_running(server, "INSERT INTO dbos.operation_outputs VALUES ('w', 1, 'c1', NULL)",
                          "DO $$ BEGIN INSERT INTO dbos.operation_outputs VALUES ('w', 2, 'c2', NULL); "
                          "LOCK TABLE dbos.workflow_status IN ACCESS EXCLUSIVE MODE; PERFORM pg_sleep(600); "
                          "END $$") as workload:
        wait_for_do_statement(server, workload)
        workload.kill()
        workload.wait()
    started = time.monotonic()
    assert LocalServerDatabase(server).dump(DbosPostgres().dump_queries(PLAN), tmp_path) == []
    assert 1.0 <= time.monotonic() - started < RETURN_DEADLINE_S
    tables = dumped(tmp_path)
    assert tables["operation_outputs"]["rows"] == [["w", 1, "c1", True]]
    assert tables["workflow_status"] == {"columns": ["workflow_uuid", "status"], "rows": []}
    with psycopg.connect(server.url) as connection:
        assert connection.execute("SELECT pid, state, query FROM pg_stat_activity WHERE usename = 'workload'"
                                  ).fetchall() == []


def test_a_row_policy_the_workload_put_on_its_tables_hides_no_row_from_the_dump(server: LocalPostgres,
                                                                               tmp_path: Path) -> None:
    """A policy USING (false), forced on the tables' owner too, hides every row from a role that does not bypass
    row security: the harness's reader, no superuser, has BYPASSRLS, so the dump holds every row."""
    dbos_tables(server)
    as_workload(server, "INSERT INTO dbos.operation_outputs VALUES ('task-1', 1, 'c1', NULL, NULL)",
                "INSERT INTO dbos.workflow_status VALUES ('task-1', 'SUCCESS', NULL)",
                *(statement for table in ("operation_outputs", "workflow_status") for statement in (
                    f"ALTER TABLE dbos.{table} ENABLE ROW LEVEL SECURITY",
                    f"ALTER TABLE dbos.{table} FORCE ROW LEVEL SECURITY",
                    f"CREATE POLICY hidden ON dbos.{table} USING (false)")))
    # The policy is real: the workload (the owner) and a role reading all data but not past policies see nothing.
    with psycopg.connect(server.workload_url) as connection:
        assert connection.execute("SELECT count(*) FROM dbos.operation_outputs").fetchone() == (0,)
    with psycopg.connect(server.admin_url, autocommit=True) as connection:
        connection.execute("CREATE ROLE blind NOLOGIN IN ROLE pg_read_all_data")
        connection.execute("SET ROLE blind")
        assert connection.execute("SELECT count(*) FROM dbos.operation_outputs").fetchone() == (0,)
    with psycopg.connect(server.reader_url) as connection:
        assert connection.execute("SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE "
                                  "rolname = current_user").fetchone() == (postgres.READER_ROLE, False, True)
    assert LocalServerDatabase(server).dump(DbosPostgres().dump_queries(PLAN), tmp_path) == []
    tables = dumped(tmp_path)
    assert tables["operation_outputs"]["rows"] == [["task-1", 1, "c1", True]]
    assert tables["workflow_status"]["rows"] == [["task-1", "SUCCESS"]]
    state = DbosPostgres().read(tmp_path, PLAN)
    assert states(state) == {"c1": p.SUCCEEDED} and state.completed is True and not state.problems


@pytest.mark.parametrize("lockout", [
    "REVOKE CONNECT ON DATABASE workload FROM PUBLIC",
    "ALTER DATABASE workload CONNECTION LIMIT 0",
    "ALTER DATABASE workload SET role = 'workload'",
    "ALTER DATABASE workload SET idle_session_timeout = 1",
    "ALTER ROLE workload SET idle_session_timeout = 1",
])
def test_the_workload_cannot_lock_the_harness_out_of_its_database(server: LocalPostgres, tmp_path: Path,
                                                                  lockout: str) -> None:
    """The database is the harness's, not the workload's: what only its owner may do is refused, and what the
    workload may set for itself does not reach the harness's logins; the dump (which first ends the workload's
    sessions as the superuser) reads the store as it is."""
    dbos_tables(server)
    as_workload(server, "INSERT INTO dbos.operation_outputs VALUES ('w', 1, 'c1', NULL, NULL)")
    with contextlib.suppress(psycopg.errors.InsufficientPrivilege):  # an owner's statement: refused
        as_workload(server, lockout)
    assert LocalServerDatabase(server).dump(DbosPostgres().dump_queries(PLAN), tmp_path) == []
    assert dumped(tmp_path)["operation_outputs"]["rows"] == [["w", 1, "c1", True]]


def test_a_store_past_the_byte_bound_is_unreadable_as_its_rows_arrive(server: LocalPostgres, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows are counted in bytes too, as a server-side cursor hands them over: a store of few rows but large values
    (each cut at VALUE_CHARS, so many of them) is refused without being held whole."""
    monkeypatch.setattr(dump, "BYTE_LIMIT", 2_000)
    monkeypatch.setattr(dump, "FETCH_ROWS", 5)
    dbos_tables(server)
    as_workload(server, "INSERT INTO dbos.workflow_status VALUES ('task-1', 'PENDING', NULL)",
                "INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name) "
                "SELECT repeat('w', 500), n, 'step' || n FROM generate_series(1, 40) AS n")
    problems = dump.dump_store(server.reader_url, DbosPostgres().dump_queries(PLAN), tmp_path)
    assert problems == ["operation_outputs: over 2000 bytes; no honest run of a plan records that much, so the "
                        "store was not read"]
    assert not (tmp_path / DUMP_NAME).exists()
