"""A scenario's ``[database]`` table, the settings written for its server, and the readers of a store dumped from it.

Each problem of ``[database]`` stops the scenario before anything runs (a
ConfigError, exit 2) naming ``database.KEY`` and the fix: a server the harness
could not start, or a workload handed the wrong database, would otherwise show
up only mid-session. Settings go into ``postgresql.conf`` quoted, so a value
cannot end its line and add a setting of its own. The readers of
``dbos-postgres`` and ``langgraph-postgres`` read the dump the harness took
(``database-dump.json``), never the live database: hand-written dumps here say
what each row shape means, and that a missing dump is unreadable, never empty.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from killpoint import protocol as p
from killpoint.errors import ConfigError
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.databases.postgres import Setting, _conf_line
from killpoint.harness.frontends.spec import resolve_backend
from killpoint.harness.judge.stores import DurableState
from killpoint.harness.judge.stores._database_dump import DUMP_NAME
from killpoint.harness.judge.stores._dbos import DbosPostgres
from killpoint.harness.judge.stores._langgraph import LangGraphPostgres
from killpoint.harness.model import DatabaseSpec
from tests.helpers import ROOT
from tests.test_store_readers import PLAN, states

# A shipped scenario whose store is in PostgreSQL, its plan inline; its own [database] is replaced by each case's.
SHIPPED = (ROOT / "scenarios" / "frameworks" / "dbos_workflow_guarded_postgres.toml").read_text()
OWN_TABLE = "[database]\npostgres = true\n"
JOURNAL = '[journal]\nformat = "dbos-postgres"\n'
assert OWN_TABLE in SHIPPED and JOURNAL in SHIPPED  # the cases below replace exactly these tables
WITHOUT_DATABASE = SHIPPED.replace(OWN_TABLE, "")


def scenario_with(tmp_path: Path, database: str, *, journal: str = JOURNAL) -> Path:
    """The shipped scenario in ``tmp_path`` with ``database`` (TOML text, "" for none) where its [database] table
    was, after its top-level keys (so ``database = 5`` is one too), and ``journal`` as its [journal] table."""
    path = tmp_path / "s.toml"
    path.write_text(WITHOUT_DATABASE.replace(JOURNAL, f"{database}\n{journal}", 1))
    return path


def problems_of(path: Path) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as raised:
        load_scenario(path)
    return raised.value.problems


@pytest.mark.parametrize(("database", "fragments"), [
    pytest.param("database = 5\n", ("database: 5 is not a table; write [database] postgres = true",),
                 id="not-a-table"),
    pytest.param("[database]\npostgres = true\nport = 5432\n",
                 ("database.port: unknown key; [database] takes postgres, url, settings",), id="unknown-key"),
    pytest.param('[database]\npostgres = "yes"\n', ("database.postgres: 'yes' is not true or false",),
                 id="postgres-not-a-bool"),
    pytest.param('[database]\npostgres = true\nurl = "postgresql://me@db.example/app"\n',
                 ("database: give one of postgres = true", 'and url = "postgresql://..." (yours)'), id="both"),
    pytest.param("[database]\n", ("database: give one of postgres = true",), id="neither"),
    pytest.param("[database]\npostgres = false\n", ("database: give one of postgres = true",), id="postgres-false"),
    pytest.param('[database]\nurl = "mysql://me@db.example/app"\n',
                 ("database.url: 'mysql://me@db.example/app' is not a PostgreSQL URL naming a database",
                  "(postgresql://USER@HOST/DATABASE)"), id="url-not-postgresql"),
    pytest.param('[database]\nurl = "postgresql://me@db.example/"\n',
                 ("database.url: 'postgresql://me@db.example/' is not a PostgreSQL URL naming a database",),
                 id="url-without-a-database"),
    pytest.param("[database]\nurl = 5\n", ("database.url: 5 is not a PostgreSQL URL naming a database",),
                 id="url-not-a-string"),
    pytest.param('[database]\nurl = "postgresql://me@db.example/app"\nsettings = { fsync = "off" }\n',
                 ("database.settings: only a server of killpoint's own (postgres = true) takes settings",),
                 id="settings-with-a-url"),
    pytest.param('[database]\npostgres = true\nsettings = { "fsync; drop" = "off" }\n',
                 ("database.settings: 'fsync; drop' is not a PostgreSQL setting's name",), id="bad-setting-name"),
    *(pytest.param(f'[database]\npostgres = true\nsettings = {{ {name} = "x" }}\n',
                   (f"database.settings: {name}: the harness sets it",), id=f"harness-setting-{name}")
      for name in ("listen_addresses", "unix_socket_directories", "port", "hba_file", "include",
                   "shared_preload_libraries", "archive_command", "ssl_cert_file")),
    pytest.param('[database]\npostgres = true\nsettings = { Fsync = "off" }\n',
                 ("database.settings: 'Fsync' is not a PostgreSQL setting's name",), id="upper-case-setting-name"),
    pytest.param('[database]\npostgres = true\nsettings = { fsync = ["off"] }\n',
                 ("database.settings: fsync: ['off'] is not a setting's value (a string on one line",),
                  id="list-value"),
    pytest.param('[database]\npostgres = true\nsettings = { fsync = "off\\nshared_preload_libraries = \'x\'" }\n',
                 ("database.settings: fsync: ", "is not a setting's value (a string on one line"),
                 id="value-with-a-newline"),
    pytest.param('[database]\npostgres = true\nsettings = "fsync = off"\n',
                 ("database.settings: 'fsync = off' is not a table (settings = { synchronous_commit = \"off\" })",),
                 id="settings-not-a-table"),
])
def test_each_problem_of_the_database_table_is_named_with_its_fix(tmp_path: Path, database: str,
                                                                  fragments: tuple[str, ...]) -> None:
    """A bad [database] is refused as the scenario loads, each problem naming the file and ``database.KEY``."""
    problems = problems_of(scenario_with(tmp_path, database))
    shown = "\n".join(problems)
    for fragment in fragments:
        assert fragment in shown, shown
    assert all(problem.startswith(f"{tmp_path / 's.toml'}: ") for problem in problems), problems


def test_every_problem_of_the_database_table_comes_at_once(tmp_path: Path) -> None:
    """A user fixes a table in one pass: its unknown key, its URL and its settings are all named together."""
    problems = problems_of(scenario_with(tmp_path, '[database]\nurl = "http://x/y"\ncolour = "blue"\n'
                                                   'settings = { "a b" = 1 }\n'))
    assert {problem.split(": ")[1] for problem in problems} == {"database.colour", "database.url",
                                                                "database.settings"}, problems


@pytest.mark.parametrize("form", ["dbos-postgres", "langgraph-postgres"])
def test_a_journal_read_from_a_database_without_one_names_the_fix(tmp_path: Path, form: str) -> None:
    """The store of a ``*-postgres`` format is in a database server, so the scenario must ask for one."""
    problems = problems_of(scenario_with(tmp_path, "", journal=f'[journal]\nformat = "{form}"\n'))
    assert problems == (f"{tmp_path / 's.toml'}: journal.format: {form!r} reads the store from a database server, "
                        "and the scenario has no [database]; add [database] postgres = true (a server of killpoint's "
                        "own for each run) or url = \"postgresql://...\" (yours)",)


@pytest.mark.parametrize(("database", "spec"), [
    pytest.param('[database]\npostgres = true\nsettings = { synchronous_commit = "off", fsync = false, '
                 "work_mem = 64, \"auto_explain.log_min_duration\" = 1.5 }\n",
                 DatabaseSpec(postgres=True, settings={"synchronous_commit": "off", "fsync": False, "work_mem": 64,
                                                       "auto_explain.log_min_duration": 1.5}), id="own-server"),
    pytest.param('[database]\nurl = "postgres://me@db.example:5433/app?sslmode=require"\n',
                 DatabaseSpec(url="postgres://me@db.example:5433/app?sslmode=require"), id="users-server"),
])
def test_a_valid_database_table_loads_as_the_scenarios_database(tmp_path: Path, database: str,
                                                                spec: DatabaseSpec) -> None:
    scenario = load_scenario(scenario_with(tmp_path, database))
    assert scenario.database == spec
    assert scenario.journal is not None and scenario.journal.reader == DbosPostgres()


def test_a_scenario_without_a_database_has_none(tmp_path: Path) -> None:
    """[database] is only for stores in a server: a scenario with a file store loads as before."""
    path = scenario_with(tmp_path, "", journal='[journal]\nformat = "dbos-sqlite"\n')
    assert load_scenario(path).database is None


def test_the_docker_backend_refuses_a_database_scenario(tmp_path: Path) -> None:
    """The server listens on a Unix socket of the host, which a container cannot reach: said before the session."""
    path = scenario_with(tmp_path, OWN_TABLE)
    scenario = load_scenario(path)
    with pytest.raises(ConfigError, match=r"\[database\]: a container cannot reach") as raised:
        resolve_backend(scenario, "docker")
    assert str(path) in raised.value.message and "--backend forkserver or subprocess" in raised.value.message
    assert resolve_backend(scenario, "subprocess")[0] == "subprocess"


@pytest.mark.parametrize(("name", "value", "line"), [
    pytest.param("fsync", True, "fsync = 'on'\n", id="true-is-on"),
    pytest.param("fsync", False, "fsync = 'off'\n", id="false-is-off"),
    pytest.param("work_mem", 64, "work_mem = '64'\n", id="number"),
    pytest.param("synchronous_commit", "off", "synchronous_commit = 'off'\n", id="string"),
    pytest.param("application_name", "it's", "application_name = 'it''s'\n", id="quote-doubled"),
    pytest.param("application_name", "x' shared_preload_libraries = 'evil",
                 "application_name = 'x'' shared_preload_libraries = ''evil'\n", id="quote-cannot-end-the-value"),
    pytest.param("application_name", "C:\\new", "application_name = 'C:\\\\new'\n", id="backslash-doubled"),
    pytest.param("application_name", "C:\\dir\\", "application_name = 'C:\\\\dir\\\\'\n",
                 id="backslash-cannot-escape-the-closing-quote"),
    pytest.param("application_name", "x\\' shared_preload_libraries = 'evil",
                 "application_name = 'x\\\\'' shared_preload_libraries = ''evil'\n",
                 id="backslash-cannot-free-a-quote"),
])
def test_a_setting_is_written_into_postgresql_conf_quoted(name: str, value: Setting, line: str) -> None:
    """A value is one quoted string on its own line, its quotes and backslashes (postgresql.conf's escape) doubled:
    it cannot end early and add a setting, and it reads back as written (tests/integration/test_database_dump.py
    starts a server with such values)."""
    assert _conf_line(name, value) == line


# --- the readers of a dump -----------------------------------------------------------------------------------

def write_dump(folder: Path, tables: dict[str, dict[str, list] | None]) -> None:
    """A ``database-dump.json`` as harness/databases/dump.py writes it; each table's rows under ``"rows"``."""
    (folder / DUMP_NAME).write_text(json.dumps({"tables": {
        name: None if rows is None else {"columns": rows["columns"], "rows": rows["rows"]}
        for name, rows in tables.items()}}))


OUTPUTS_COLUMNS = ["workflow_uuid", "function_id", "function_name", "succeeded"]
STATUS_COLUMNS = ["workflow_uuid", "status"]


def dbos_dump(folder: Path, steps: list[list[object]] | None, workflows: list[list[object]] | None) -> None:
    write_dump(folder, {
        "operation_outputs": None if steps is None else {"columns": OUTPUTS_COLUMNS, "rows": steps},
        "workflow_status": None if workflows is None else {"columns": STATUS_COLUMNS, "rows": workflows}})


def test_dbos_postgres_reads_returned_steps_from_the_dump_and_quotes_their_rows(tmp_path: Path) -> None:
    """A row per returned step: SUCCEEDED when its error is NULL, FAILED when not; a name the plan does not make
    (DBOS's own steps, the workflow's) is no planned call."""
    dbos_dump(tmp_path, [["task-1", 1, "c1", True], ["task-1", 2, "c2", False], ["task-1", 3, "DBOS.sleep", True]],
              [["task-1", "PENDING"]])
    state = DbosPostgres().read(tmp_path, PLAN)
    assert states(state) == {"c1": p.SUCCEEDED, "c2": p.FAILED}
    assert not state.problems and state.records_start is False and state.completed is False
    assert state.records["c1"].quote == ("postgres dbos.operation_outputs(workflow_uuid='task-1', function_id=1, "
                                         "function_name='c1', error IS NULL)")
    assert state.records["c2"].quote == ("postgres dbos.operation_outputs(workflow_uuid='task-1', function_id=2, "
                                         "function_name='c2', error IS NOT NULL)")
    assert DbosPostgres(schema="system").read(tmp_path, PLAN).records["c1"].quote.startswith(
        "postgres system.operation_outputs(")
    assert DbosPostgres().files(PLAN) == ()  # nothing in the workload folder: the store is the database's


@pytest.mark.parametrize(("workflows", "completed"), [
    pytest.param([["task-1", "SUCCESS"]], True, id="succeeded"),
    pytest.param([["task-1", "ERROR"], ["other", "SUCCESS"]], True, id="every-one-ended"),
    pytest.param([["task-1", "SUCCESS"], ["other", "PENDING"]], False, id="one-still-pending"),
    pytest.param([], False, id="no-workflow-yet"),
])
def test_dbos_postgres_is_completed_when_every_workflow_read_ended(tmp_path: Path, workflows: list[list[object]],
                                                                  completed: bool) -> None:
    dbos_dump(tmp_path, [], workflows)
    assert DbosPostgres().read(tmp_path, PLAN).completed is completed


@pytest.mark.parametrize(("steps", "workflows"), [
    pytest.param(None, None, id="no-tables"),
    pytest.param(None, [["task-1", "SUCCESS"]], id="no-operation-outputs"),
    pytest.param([["task-1", 1, "c1", True]], None, id="no-workflow-status"),
])
def test_dbos_postgres_tables_the_dump_holds_as_null_are_nothing_durable(
        tmp_path: Path, steps: list[list[object]] | None, workflows: list[list[object]] | None) -> None:
    """Null: DBOS had not made its tables yet when the dump was taken; that is an empty store, not an unreadable
    one."""
    dbos_dump(tmp_path, steps, workflows)
    assert DbosPostgres().read(tmp_path, PLAN) == DurableState({}, False, False)


WRITES_COLUMNS = ["row", "thread_id", "task_path", "idx", "channel"]
CHECKPOINT_COLUMNS = ["row", "thread_id", "checkpoint_id", "versions_seen", "ended"]


def langgraph_dump(folder: Path, writes: list[list[object]] | None, checkpoints: list[list[object]] | None) -> None:
    write_dump(folder, {
        "checkpoint_writes": None if writes is None else {"columns": WRITES_COLUMNS, "rows": writes},
        "checkpoints": None if checkpoints is None else {"columns": CHECKPOINT_COLUMNS, "rows": checkpoints}})


def test_langgraph_postgres_reads_node_writes_and_the_nodes_a_checkpoint_has_seen(tmp_path: Path) -> None:
    """A node's write (idx >= 0) is a step that returned, its ``__error__`` one that raised, and a node a saved
    checkpoint's versions_seen names returned though its writes were not saved."""
    langgraph_dump(tmp_path, [[1, "task-1", "~__pregel_pull, c1", 0, "config"],
                              [2, "task-1", "~__pregel_pull, c2", -1, "__error__"],
                              [3, "task-1", "~__pregel_pull, router", 0, "x"]],
                   [[1, "task-1", "cp1", ["__start__", "c1", "c3", 7], False]])
    state = LangGraphPostgres(steps="name").read(tmp_path, PLAN)
    assert states(state) == {"c1": p.SUCCEEDED, "c2": p.FAILED, "c3": p.SUCCEEDED}
    assert not state.problems and state.records_start is False and state.completed is None
    assert state.records["c1"].quote == ("postgres public.checkpoint_writes(row=1, thread_id='task-1', "
                                         "task_path='~__pregel_pull, c1', idx=0, channel='config')")
    assert state.records["c3"].quote == ("postgres public.checkpoints(row=1, thread_id='task-1', "
                                         "checkpoint_id='cp1') versions_seen names c3")
    assert LangGraphPostgres().files(PLAN) == ()


def test_langgraph_postgres_functional_tasks_go_by_order_and_the_end_completes(tmp_path: Path) -> None:
    """``steps = "order"``: the n-th task call is the n-th planned call; a checkpoint holding ``__end__`` means the
    entrypoint returned, so every planned call is done."""
    langgraph_dump(tmp_path, [[1, "task-1", "~__pregel_push, ~__pregel_pull, workflow, 0000000000, 0000000001", 0,
                               "__return__"]], [[1, "task-1", "cp1", [], False]])
    state = LangGraphPostgres(steps="order").read(tmp_path, PLAN)
    assert states(state) == {"c1": p.SUCCEEDED} and state.completed is None
    langgraph_dump(tmp_path, [], [[1, "task-1", "cp1", [], False], [2, "task-1", "cp2", [], True]])
    state = LangGraphPostgres(steps="order").read(tmp_path, PLAN)
    assert states(state) == {call: p.SUCCEEDED for call in PLAN.call_ids} and state.completed is True
    assert state.records["c2"].quote == ("postgres public.checkpoints(row=2, thread_id='task-1', "
                                         "checkpoint_id='cp2') holds the entrypoint's return (__end__)")


@pytest.mark.parametrize(("writes", "checkpoints"), [
    pytest.param(None, None, id="no-tables"),
    pytest.param([[1, "task-1", "~__pregel_pull, c1", 0, "config"]], None, id="no-checkpoints"),
])
def test_langgraph_postgres_tables_the_dump_holds_as_null_are_nothing_durable(
        tmp_path: Path, writes: list[list[object]] | None, checkpoints: list[list[object]] | None) -> None:
    langgraph_dump(tmp_path, writes, checkpoints)
    assert LangGraphPostgres().read(tmp_path, PLAN) == DurableState({}, False, None)


READERS = [pytest.param(DbosPostgres(), "operation_outputs", id="dbos"),
           pytest.param(LangGraphPostgres(), "checkpoint_writes", id="langgraph")]


@pytest.mark.parametrize(("reader", "first"), READERS)
def test_a_copy_without_a_dump_is_unreadable_never_empty(tmp_path: Path, reader: DbosPostgres | LangGraphPostgres,
                                                         first: str) -> None:
    """No dump means the harness could not read the database at the kill: the state is unknown, not "nothing
    durable", so no rule is judged on it."""
    state = reader.read(tmp_path, PLAN)
    assert state.records == {} and state.completed is None
    assert len(state.problems) == 1 and state.problems[0].startswith(f"{DUMP_NAME}: holds no dump of {first} ("), \
        state.problems


@pytest.mark.parametrize(("reader", "first"), READERS)
@pytest.mark.parametrize(("dump", "problem"), [
    pytest.param("not json", "holds no dump of {first}", id="not-json"),
    pytest.param('{"tables": {}}', "holds no dump of {first}", id="table-missing"),
    pytest.param('{"tables": []}', "holds no dump of {first}", id="tables-not-an-object"),
    pytest.param('{"tables": {"{first}": {"columns": [], "rows": {}}}}', "{first} is not a dump of rows",
                 id="rows-not-a-list"),
    pytest.param('{"tables": {"{first}": {"columns": [], "rows": [1, 2]}}}', "{first} is not a dump of rows",
                 id="a-row-not-a-list"),
    # A row of another width would have been unpacked into the wrong columns, or raised.
    pytest.param('{"tables": {"{first}": {"columns": [], "rows": [["w", 1]]}}}', "{first} is not a dump of rows",
                 id="a-row-of-another-width"),
])
def test_a_dump_that_is_not_one_is_unreadable(tmp_path: Path, reader: DbosPostgres | LangGraphPostgres, first: str,
                                              dump: str, problem: str) -> None:
    (tmp_path / DUMP_NAME).write_text(dump.replace("{first}", first))
    state = reader.read(tmp_path, PLAN)
    assert state.records == {} and state.completed is None
    assert len(state.problems) == 1 and f"{DUMP_NAME}: {problem.format(first=first)}" in state.problems[0], \
        state.problems
