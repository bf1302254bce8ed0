"""An agent's own store, read for the scripted model's tool-call ids in every shape a framework keeps them.

The reader is evidence beside the seams' verdict, so what matters is that it says truly what a copy holds
(a call's result, a result or note saying its outcome is unknown, the model's choice of it, nothing) for the
stores real frameworks write, and that a store an agent made hostile is a note, never a crash or a hang.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import ormsgpack
import pytest

from killpoint import protocol
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.judge.stores import _agent_store, reader_for
from killpoint.harness.judge.stores._agent_store import AgentStore
from killpoint.harness.judge.stores._sqlite_copy import JOURNAL_MAGIC
from killpoint.harness.model import Plan, PlannedCall
from tests.agents.test_agent_scenarios import CALLS, HEADER
from tests.test_config_errors import write

SQLITE = pytest.mark.integration  # a SQLite store is read in a forked, confined child
PLAN = Plan("t", (PlannedCall("c1", "read_file", {"path": "a"}), PlannedCall("c2", "append", {"path": "b", "text": "x"})))


def read(folder: Path, *paths: str) -> dict[str, tuple[str, str]]:
    """Each call's status and quote as the reader gives them."""
    state = AgentStore(paths).read(folder, PLAN)
    assert not state.problems, state.problems
    return {call: (record.status, record.quote) for call, record in state.records.items()}


def sqlite_store(path: Path, table: str, rows: list[object]) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, data)")
        connection.executemany(f"INSERT INTO {table} (data) VALUES (?)", [(row,) for row in rows])
    connection.close()


@SQLITE
def test_an_agents_sdk_session_shows_which_calls_it_kept_a_result_of(tmp_path):
    """SQLiteSession keeps each item as JSON text: c1's call and output, c2's call only (a kill before the save)."""
    sqlite_store(tmp_path / "session.sqlite", "agent_messages", [json.dumps(item) for item in (
        {"type": "function_call", "call_id": "call_kp_c1", "name": "read_file", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_kp_c1", "output": "hello"},
        {"type": "function_call", "call_id": "call_kp_c2", "name": "append", "arguments": "{}"})])
    found = read(tmp_path, "session.sqlite")
    assert found["c1"][0] == protocol.SUCCEEDED
    assert found["c1"][1].startswith("session.sqlite: agent_messages(rowid=2).data holds the result of call_kp_c1: ")
    assert found["c2"] == (protocol.RUNNING, 'session.sqlite: agent_messages(rowid=3).data names call_kp_c2, with '
                           'no result of it: {"type": "function_call", "call_id": "call_kp_c2", "name": "append", '
                           '"arguments": "{}"}')


@SQLITE
def test_a_langgraph_checkpoint_is_read_through_its_msgpack_extensions_as_plain_data(tmp_path):
    """LangGraph packs a LangChain message as an extension holding (module, class, fields, method)."""
    def message(kind: str, fields: dict[str, object]) -> ormsgpack.Ext:
        return ormsgpack.Ext(5, ormsgpack.packb(["langchain_core.messages", kind, fields, "model_validate_json"]))
    blob = ormsgpack.packb({"channel_values": {"messages": [
        message("AIMessage", {"type": "ai", "tool_calls": [{"id": "call_kp_c1", "name": "read_file", "args": {}}]}),
        message("ToolMessage", {"type": "tool", "tool_call_id": "call_kp_c1", "content": "hello"})]}})
    sqlite_store(tmp_path / "checkpoints.sqlite", "checkpoints", [blob])
    assert read(tmp_path, "checkpoints.sqlite")["c1"][0] == protocol.SUCCEEDED


def test_a_pydantic_ai_history_in_json_and_a_chat_journal_in_json_lines_are_read(tmp_path):
    (tmp_path / "history.json").write_text(json.dumps([{"parts": [
        {"part_kind": "tool-call", "tool_call_id": "call_kp_c1", "tool_name": "read_file"},
        {"part_kind": "tool-return", "tool_call_id": "call_kp_c1", "content": "hello"}]}]))
    (tmp_path / "journal.jsonl").write_text("\n".join(json.dumps(line) for line in (
        {"message": {"role": "assistant", "tool_calls": [{"id": "call_kp_c2"}]}},
        {"message": {"role": "tool", "tool_call_id": "call_kp_c2", "content": "interrupted: outcome unknown"}},
    )) + "\nnot json\n")
    found = read(tmp_path, "history.json", "journal.jsonl")
    assert found["c1"][0] == protocol.SUCCEEDED and "history.json: the document holds the result" in found["c1"][1]
    assert found["c2"][0] == protocol.RUNNING  # its one result says its outcome is unknown
    assert "journal.jsonl: line 2 holds a result of call_kp_c2 that says its outcome is unknown" in found["c2"][1]


def test_a_note_a_redo_and_a_probe_are_each_quoted_and_only_an_attempts_result_counts(tmp_path):
    """An Anthropic-shaped conversation: c2's first attempt noted unknown, its probe answered, its redo chosen."""
    (tmp_path / "c.json").write_text(json.dumps([
        {"role": "user", "content": "call_kp_c2 may already have run before the interruption"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_kp_c2_verify",
                                      "content": '{"effect_found": false}'}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "call_kp_c2_2", "name": "append"}]}]))
    status, quote = read(tmp_path, "c.json")["c2"]
    assert status == protocol.RUNNING  # a probe's result is no result of the call
    assert [line.split(": ", 2)[1] for line in quote.split("\n")] == [  # by id: call_kp_c2, _2, _verify
        "the document holds a text saying call_kp_c2's outcome is unknown",
        "the document names call_kp_c2_2, with no result of it",
        "the document holds the result of call_kp_c2_verify"]


def test_an_absent_store_is_nothing_kept_and_ids_of_no_planned_call_are_passed_over(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"role": "tool", "tool_call_id": "call_kp_c9", "content": "x"}))
    assert read(tmp_path, "missing.sqlite", "c.json") == {}


@pytest.mark.parametrize("planted", ["deep-json", "many-values", "symlink", "fifo",
                                     pytest.param("super-journal", marks=SQLITE), pytest.param("not-sqlite", marks=SQLITE)])
def test_a_store_the_agent_made_hostile_is_a_note_beside_the_verdict_never_a_crash_or_a_hang(tmp_path, planted,
                                                                                             monkeypatch):
    monkeypatch.setattr(_agent_store, "VALUE_LIMIT", 1_000)  # the bound, reached in a test's time
    folder = tmp_path / "copy"
    folder.mkdir()
    store = folder / "s.db"
    if planted == "deep-json":
        store.write_text("[" * 200_000 + "]" * 200_000)
    elif planted == "many-values":
        store.write_text(json.dumps([[0]] * 501))
    elif planted == "symlink":
        (tmp_path / "host").write_text(json.dumps({"role": "tool", "tool_call_id": "call_kp_c1"}))
        store.symlink_to(tmp_path / "host")
    elif planted == "fifo":
        os.mkfifo(store)
    elif planted in ("super-journal", "not-sqlite"):
        sqlite_store(store, "t", ["call_kp_c1"])
        victim = tmp_path / "victim"
        victim.write_text("keep me")
        name = str(victim).encode()
        if planted == "super-journal":
            Path(f"{store}-journal").write_bytes(JOURNAL_MAGIC + bytes(504) + name + len(name).to_bytes(4, "big")
                                                 + bytes(4) + JOURNAL_MAGIC)
        else:
            store.write_bytes(store.read_bytes()[:16] + b"garbage" * 100)
    seams = reader_for({"format": "agent-seams", "store": ["s.db"]})
    state = seams.read(folder, PLAN)
    assert not state.problems  # the verdict rests on the seams: an unreadable own store takes nothing from it
    if planted == "deep-json":  # no JSON the reader can decode: nothing kept, said so per call
        assert state.kept["c1"] == ("s.db: holds nothing of c1 (no tool-call id of it)",)
    else:
        assert state.kept == {} and any(note.startswith("the agent's own store could not be read: ")
                                        for note in state.notes), state.notes
    if planted in ("super-journal", "not-sqlite"):
        assert (tmp_path / "victim").read_text() == "keep me"


def test_a_scenario_naming_its_agents_store_reads_it_beside_the_seams(tmp_path):
    path = write(tmp_path, "s.toml", HEADER + CALLS + '[agent]\nstore = ["a.sqlite", "{task_id}/log.jsonl"]\n')
    journal = load_scenario(path).journal
    assert journal is not None and journal.table == {"format": "agent-seams", "store": ["a.sqlite", "{task_id}/log.jsonl"]}
    assert journal.reader.files(PLAN) == ("a.sqlite", "a.sqlite-wal", "a.sqlite-shm", "a.sqlite-journal",
                                               "t/log.jsonl", "t/log.jsonl-wal", "t/log.jsonl-shm",
                                               "t/log.jsonl-journal")


def test_of_equal_sightings_the_last_is_quoted_whole(tmp_path):
    """A journal copies the model's choice, then writes the call's start: the start, nearer the kill, is quoted,
    as the object holding the id (the id alone says nothing)."""
    (tmp_path / "j.jsonl").write_text(json.dumps({"tool_calls": [{"id": "call_kp_c1", "name": "read_file"}]}) + "\n"
                                      + json.dumps({"started": "call_kp_c1", "tool": "read_file"}) + "\n")
    assert read(tmp_path, "j.jsonl")["c1"] == (
        protocol.RUNNING, 'j.jsonl: line 2 names call_kp_c1, with no result of it: '
                          '{"started": "call_kp_c1", "tool": "read_file"}')


def test_a_quote_renders_only_its_start_of_an_object_however_large():
    """A store may nest a megabyte under every object naming an id: rendering each whole to quote 200 characters
    would take time as the square of the store's size. Only the start is rendered, past it nothing is read."""
    class Trap(list):
        def __iter__(self):
            for index, item in enumerate(super().__iter__()):
                assert index < 1_000, "rendered far past the quote's length"
                yield item

    quote = _agent_store._excerpt({"id": "call_kp_c1", "log": Trap(range(10 ** 6)), "x": "y" * 10 ** 6})
    assert quote.startswith('{"id": "call_kp_c1", "log": [0, 1, 2') and quote.endswith("…")
    assert len(quote) == _agent_store.QUOTED_CHARS + 1


def test_objects_nested_deep_each_naming_an_id_are_each_quoted_short(tmp_path):
    nested: dict[str, object] = {"payload": "z" * 100_000}
    for _ in range(400):
        nested = {"id": "call_kp_c1", "inner": nested}
    (tmp_path / "deep.json").write_text(json.dumps(nested))
    status, quote = read(tmp_path, "deep.json")["c1"]
    assert status == protocol.RUNNING and len(quote) < 400, quote
