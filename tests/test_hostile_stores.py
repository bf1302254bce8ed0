"""Hostile ``[journal]`` tables and store trailers, refused before anything runs (no process starts here):
a ``journal.query`` that is not one SELECT, and a rollback journal's super-journal record.
tests/integration/test_hostile_stores.py reads hostile stores for real."""

from __future__ import annotations

from dataclasses import replace

import pytest

from killpoint.harness.judge.checker import check
from killpoint.harness.judge.stores import journal_problems
from killpoint.harness.judge.stores._sqlite_copy import JOURNAL_MAGIC, super_journal_name
from tests.test_blackbox_rules import BLACK_BOX, evidence
from tests.test_checker import GOLDEN

pytestmark = pytest.mark.hostile

TABLE = {"format": "sqlite", "path": "j.db", "fields": {"call": "c", "status": "s"}, "status": {"SUCCEEDED": ["ok"]}}
ONE_SELECT = "the store is only ever read: give one SELECT statement"


@pytest.mark.parametrize("query, problem", [
    ("SELECT 1; DROP TABLE ops", f"'SELECT 1; DROP TABLE ops' holds 2 statements; {ONE_SELECT} (nothing after its ';')"),
    ("WITH a AS (SELECT 1) INSERT INTO ops SELECT * FROM a",
     f"'WITH a AS (SELECT 1) INSERT INTO ops SELECT * FROM a' is a WITH ... INSERT; {ONE_SELECT}"),
    ("SELECT * FROM ops; ATTACH '/etc/passwd' AS host",
     f"\"SELECT * FROM ops; ATTACH '/etc/passwd' AS host\" holds 2 statements; {ONE_SELECT} (nothing after its ';')"),
    ("with recursive n(x) as (select 1), m as materialized (select 2) delete from ops",
     f"'with recursive n(x) as (select 1), m as materialized (select 2) delete from ops' is a WITH ... DELETE; "
     f"{ONE_SELECT}"),
    ("/* SELECT */ UPDATE ops SET state = 'done'", f"\"/* SELECT */ UPDATE ops SET state = 'done'\" is not a SELECT; "
                                                   f"{ONE_SELECT}"),
    ("SELECT 'unended", f"\"SELECT 'unended\" has an unterminated quote; give one SELECT statement"),
    ("WITH a AS (SELECT 1)", f"'WITH a AS (SELECT 1)' is not a SELECT; {ONE_SELECT}"),
    (";", "';' holds no statement; give one SELECT statement"),
])
def test_a_query_that_is_not_one_select_is_refused_at_load_naming_the_field(query, problem):
    assert journal_problems(dict(TABLE, query=query), "s.toml") == [f"s.toml: journal.query: {problem}"]


@pytest.mark.parametrize("query", [
    "SELECT op_id, call_id, state, tool_class FROM calls ORDER BY seq",  # the shipped scenarios' and docs' query
    "  with x as (select 1) select * from x;",
    "WITH RECURSIVE n(x) AS (VALUES (1) UNION ALL SELECT x + 1 FROM n LIMIT 3), m(y) AS NOT MATERIALIZED "
    "(SELECT 2) SELECT x AS call_id, y AS state FROM n, m -- the last statement; DROP in a comment",
    "SELECT 'a; DROP TABLE ops' AS call_id, \"de;lete\" AS state, [x;y], `z;` FROM ops /* ; */",
    "VALUES ('c1', 'ok')",
])
def test_every_honest_select_is_accepted(query):
    assert journal_problems(dict(TABLE, query=query), "s.toml") == []


def test_a_super_journal_record_is_found_at_the_end_of_a_journal_whatever_its_length_says():
    pages = JOURNAL_MAGIC + bytes(1000)
    name = b"/etc/passwd"
    record = name + len(name).to_bytes(4, "big") + bytes(4) + JOURNAL_MAGIC
    assert super_journal_name(pages) is None and super_journal_name(pages + record) == name
    assert super_journal_name(pages + bytes(4) + (10 ** 6).to_bytes(4, "big") + bytes(4) + JOURNAL_MAGIC) == b""


def test_a_store_copys_notes_are_the_verdicts_notes():
    noted = replace(evidence(), store_notes=("store-at-kill-0: agent.db-journal was a hot rollback journal",))
    assert check(BLACK_BOX, noted, GOLDEN).notes[-1] == "store-at-kill-0: agent.db-journal was a hot rollback journal"
