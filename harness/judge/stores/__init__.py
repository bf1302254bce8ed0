"""Store readers: a runtime's own durable record, copied at a kill, read as per-call durable states.

A scenario's ``[journal]`` table names the format and where the store lives
(docs/journal-mapping.md). The harness copies ``reader.files(plan)`` at every
kill and at the end of the run; ``reader.read(copy_folder, plan)`` says, per
planned call, what the store durably holds (SUCCEEDED / FAILED / RUNNING, or no
record), each with the row quoted. Readers only read plain columns and never
deserialize a pickle or msgpack blob: the store was written by the process
under test.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import PurePosixPath
from typing import Any

from killpoint.harness.judge.stores._agent_seams import FORMAT as AGENT_SEAMS
from killpoint.harness.judge.stores._agent_seams import AgentSeams
from killpoint.harness.judge.stores._agent_store import AgentStore
from killpoint.harness.judge.stores._dbos import DbosPostgres, DbosSqlite
from killpoint.harness.judge.stores._json_store import JsonDocument, JsonLinesJournal
from killpoint.harness.judge.stores._killpoint import KillpointJournal
from killpoint.harness.judge.stores._langgraph import LangGraphPostgres, LangGraphSqlite
from killpoint.harness.judge.stores._mapping import FieldMapping
from killpoint.harness.judge.stores._sqlite_query import SqliteQuery
from killpoint.harness.judge.stores._table import DATABASE_FORMATS, DEFAULT_PATHS, journal_problems
from killpoint.harness.model import DurableState, StepRecord, StoreReader, StoreTable

__all__ = ["AGENT_SEAMS", "DATABASE_FORMATS", "AgentSeams", "AgentStore", "DurableState", "StepRecord", "StoreReader",
           "StoreTable", "framework_versions", "journal_problems", "reader_for", "store_table"]

# The distributions whose versions a report prints for each framework format.
FRAMEWORK_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "langgraph-sqlite": ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite"),
    "dbos-sqlite": ("dbos",),
    "langgraph-postgres": ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-postgres", "psycopg"),
    "dbos-postgres": ("dbos", "psycopg"),
    # An agent judged at its seams: the SDKs and frameworks an agent is built on (which one, the report cannot say).
    AGENT_SEAMS: ("openai", "anthropic", "openai-agents", "langchain-openai", "langgraph-prebuilt", "pydantic-ai-slim",
                  "fastmcp-slim", "dbos"),
}


def store_table(table: dict[str, Any]) -> StoreTable:
    """A ``[journal]`` table that ``journal_problems`` passed, read once: its format and its store's reader."""
    return StoreTable(table["format"], reader_for(table), table)


def reader_for(table: dict[str, Any]) -> StoreReader:
    """The reader of a ``[journal]`` table that ``journal_problems`` passed."""
    form = table["format"]
    if form == AGENT_SEAMS:  # an [agent] scenario's (never a user's [journal]: journal_problems refuses the name)
        return AgentSeams(own=AgentStore(tuple(table["store"])) if table.get("store") else None)
    if form == "langgraph-postgres":
        return LangGraphPostgres(table.get("steps", "name"), table.get("thread"), table.get("schema", "public"))
    if form == "dbos-postgres":
        return DbosPostgres(table.get("workflow"), table.get("schema", "dbos"))
    # One spelling per file ("./journal.jsonl" is "journal.jsonl"): the harness matches a store's files by name.
    path = str(PurePosixPath(table["path"] if "path" in table else DEFAULT_PATHS[form]))
    if form == "killpoint":
        return KillpointJournal(path)
    if form == "json":
        return JsonDocument(path, FieldMapping.from_table(table), table.get("records"))
    if form == "jsonl":
        return JsonLinesJournal(path, FieldMapping.from_table(table))
    if form == "langgraph-sqlite":
        return LangGraphSqlite(path, table.get("steps", "name"), table.get("thread"))
    if form == "dbos-sqlite":
        return DbosSqlite(path, table.get("workflow"))
    if form == "sqlite":
        return SqliteQuery(path, FieldMapping.from_table(table), table["query"])
    raise ValueError(f"no reader for journal format {form!r}; journal_problems refuses it")  # a caller's bug


def framework_versions(form: str) -> dict[str, str]:
    """The installed versions of the format's framework, for reports (empty for killpoint's and mapped formats)."""
    versions = {}
    for distribution in FRAMEWORK_DISTRIBUTIONS.get(form, ()):
        try:
            versions[distribution] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            versions[distribution] = "not installed"
    return versions
