"""Formats ``langgraph-sqlite`` and ``langgraph-postgres``: LangGraph's ``SqliteSaver``
(langgraph-checkpoint-sqlite 3.1.2) database, and ``PostgresSaver``'s (langgraph-checkpoint-postgres 3.2.0).

LangGraph records a step only once it has returned: its channel writes go to
the ``writes`` table (a node returning nothing writes ``__no_writes__``); a
step that raised writes channel ``__error__`` instead. So a ``writes`` row of
the step's task with ``idx >= 0`` means SUCCEEDED, an ``__error__`` row
FAILED (killpoint's instrumentation returns tool failures as values, so this
is a step that raised), and nothing is ever RUNNING: ``records_start`` is
False. Negative ``idx`` rows other than the error (scheduled, interrupt,
resume) are no return. Which task is which planned call:

- ``steps = "name"`` (StateGraph): task_path ``~__pregel_pull, <node>``, the
  node named by the call id;
- ``steps = "order"`` (functional API): the n-th ``@task`` call of the
  entrypoint, task_path ``~__pregel_push, ~__pregel_pull, <entrypoint>, <n>,
  0000000001`` (n counted from 0, ten digits) is the n-th planned call.

A write counts only when the checkpoint it is pending on is saved too: on
resume LangGraph loads the latest saved checkpoint and the writes pending on
it, so writes saved for a checkpoint that never was (``durability="async"``
saves both from background threads) are lost, and the step runs again. And a
StateGraph node counts as recorded when a saved checkpoint's
``versions_seen`` names it, though its writes were never saved: the
checkpoint made after its superstep already holds its result, and resume does
not run it again. That is read from the ``checkpoint`` blob, msgpack decoded
as plain data (no extension type is built, no code runs); the ``value`` blobs,
what the steps returned, are never decoded. Only the root graph
(``checkpoint_ns = ''``) counts. ``completed`` is True when the entrypoint's
own task wrote ``__end__`` (functional API); a StateGraph's end shows in no
plain column, so there it is None.

``PostgresSaver`` keeps the same facts in ``checkpoint_writes`` and
``checkpoints``, dumped at each kill (``harness/databases/dump.py``): the
checkpoint there is JSON, so ``versions_seen``'s node names and the
``__end__`` channel (inline, or a ``checkpoint_blobs`` row of the version the
checkpoint names) are asked of PostgreSQL itself; no blob is decoded.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

from killpoint import protocol
from killpoint.harness.judge.stores._database_dump import VALUE_CHARS, dumped_tables
from killpoint.harness.judge.stores._sqlite_copy import SIDE_FILES, has_table, read_database, run_query
from killpoint.harness.judge.stores._state import quote_columns
from killpoint.harness.judge.stores._store_file import StoreUnreadable, store_files
from killpoint.harness.judge.stores._table import with_task_id
from killpoint.harness.model import DumpQuery, DurableState, Plan, StepRecord

_PULL = "~__pregel_pull, "
_PUSH = re.compile(r"~__pregel_push, ~__pregel_pull, [^,]+, (\d{10})(, \d{10})?")
_END = "__end__"
_ERROR = "__error__"
_WRITES = ("SELECT rowid, thread_id, task_path, idx, channel FROM writes WHERE checkpoint_ns = '' "
           "AND (? IS NULL OR thread_id = ?) AND EXISTS (SELECT 1 FROM checkpoints AS saved WHERE "
           "saved.thread_id = writes.thread_id AND saved.checkpoint_ns = '' "
           "AND saved.checkpoint_id = writes.checkpoint_id) ORDER BY rowid")
_CHECKPOINTS = ("SELECT rowid, thread_id, checkpoint_id, type, checkpoint FROM checkpoints WHERE checkpoint_ns = '' "
                "AND (? IS NULL OR thread_id = ?) ORDER BY rowid")


@dataclass(frozen=True)
class LangGraphSqlite:
    path: str = "checkpoints.sqlite"
    steps: str = "name"
    thread: str | None = None  # the thread_id to read ({task_id} allowed); None: every thread
    name: str = "langgraph-sqlite"

    def files(self, plan: Plan) -> tuple[str, ...]:
        return store_files(self.path, plan, SIDE_FILES)

    def read(self, folder: Path, plan: Plan) -> DurableState:
        msgpack_module()  # imported here: the reading child, nobody, may not be allowed to read the installation
        return read_database(folder, self.path, plan, DurableState({}, False, None), self._read)

    def _read(self, connection: sqlite3.Connection, path: str, plan: Plan) -> DurableState:
        if not has_table(connection, "writes"):
            return DurableState({}, False, None)  # the saver had not set up its tables yet: nothing durable
        thread = with_task_id(self.thread, plan)
        checkpoints = [(rowid, saved_thread, checkpoint_id, *(_checkpoint_facts(blob) if kind == "msgpack" and
                                                               isinstance(blob, bytes) else ((), False)))
                       for rowid, saved_thread, checkpoint_id, kind, blob
                       in run_query(connection, _CHECKPOINTS, (thread, thread))[1]]
        return _steps_state(self.steps, run_query(connection, _WRITES, (thread, thread))[1], checkpoints,
                            (f"{path}: writes", f"{path}: checkpoints"), plan, row_key="rowid")


@dataclass(frozen=True)
class LangGraphPostgres:
    """``PostgresSaver``'s tables (in ``schema``, ``public`` by default), read from their dump at a kill."""

    steps: str = "name"
    thread: str | None = None
    schema: str = "public"
    name: str = "langgraph-postgres"

    def files(self, plan: Plan) -> tuple[str, ...]:
        return ()  # nothing in the workload folder: the store is the database's, dumped

    def dump_queries(self, plan: Plan) -> tuple[DumpQuery, ...]:
        writes, checkpoints, blobs = (f"{self.schema}.{table}" for table in
                                      ("checkpoint_writes", "checkpoints", "checkpoint_blobs"))
        thread = {"thread": with_task_id(self.thread, plan)}
        names = (f"left(w.thread_id, {VALUE_CHARS}) AS thread_id, left(w.task_path, {VALUE_CHARS}) AS task_path, "
                 f"w.idx, left(w.channel, {VALUE_CHARS}) AS channel")
        seen = (f"ARRAY(SELECT left(node, {VALUE_CHARS}) FROM jsonb_object_keys(CASE WHEN "
                "jsonb_typeof(c.checkpoint -> 'versions_seen') = 'object' THEN c.checkpoint -> 'versions_seen' "
                "ELSE '{}'::jsonb END) AS node ORDER BY node LIMIT 1000)")
        # A blob of type 'empty' stands for no value (PostgresSaver's own loader skips it).
        ended = (f"(c.checkpoint -> 'channel_values') ? '{_END}' OR EXISTS (SELECT 1 FROM {blobs} AS b WHERE "
                 f"b.thread_id = c.thread_id AND b.checkpoint_ns = '' AND b.channel = '{_END}' AND b.version = "
                 f"c.checkpoint -> 'channel_versions' ->> '{_END}' AND b.type <> 'empty')")
        return (
            DumpQuery("checkpoint_writes", (writes, checkpoints), (
                f"SELECT row_number() OVER (ORDER BY w.checkpoint_id, w.task_id, w.idx) AS row, {names} "
                f"FROM {writes} AS w "
                "WHERE w.checkpoint_ns = '' AND (%(thread)s::text IS NULL OR w.thread_id = %(thread)s) AND EXISTS "
                f"(SELECT 1 FROM {checkpoints} AS saved WHERE saved.thread_id = w.thread_id AND "
                "saved.checkpoint_ns = '' AND saved.checkpoint_id = w.checkpoint_id) "
                "ORDER BY w.checkpoint_id, w.task_id, w.idx"), thread),
            DumpQuery("checkpoints", (checkpoints, blobs), (
                f"SELECT row_number() OVER (ORDER BY c.checkpoint_id) AS row, left(c.thread_id, {VALUE_CHARS}) AS "
                f"thread_id, left(c.checkpoint_id, {VALUE_CHARS}) AS checkpoint_id, {seen} AS versions_seen, "
                f"({ended}) AS ended FROM {checkpoints} AS c "
                "WHERE c.checkpoint_ns = '' AND (%(thread)s::text IS NULL OR c.thread_id = %(thread)s) "
                "ORDER BY c.checkpoint_id"), thread))

    def read(self, folder: Path, plan: Plan) -> DurableState:
        try:
            dumped = dumped_tables(folder, {"checkpoint_writes": 5, "checkpoints": 5})
        except StoreUnreadable as problem:
            return DurableState.unreadable(False, *problem.args)
        if dumped is None:
            return DurableState({}, False, None)  # the saver had not set up its tables yet: nothing durable
        writes, checkpoints = dumped
        facts = [(row, thread, checkpoint_id, tuple(node for node in seen if isinstance(node, str))
                  if isinstance(seen, list) else (), ended is True)
                 for row, thread, checkpoint_id, seen, ended in checkpoints]
        where = f"postgres {self.schema}."
        return _steps_state(self.steps, writes, facts,
                            (f"{where}checkpoint_writes", f"{where}checkpoints"), plan, row_key="row")


def _steps_state(steps: str, writes: list[tuple[object, ...]],
                 checkpoints: list[tuple[object, object, object, tuple[str, ...], bool]], tables: tuple[str, str],
                 plan: Plan, *, row_key: str) -> DurableState:
    """The durable state of the saved ``writes`` rows (row, thread, task_path, idx, channel) and ``checkpoints``
    (row, thread, checkpoint id, the nodes its versions_seen names, whether it holds the end); ``tables`` name the
    two tables in quotes, ``row_key`` their rows' number."""
    state = _fold(steps, writes, f"{tables[0]}({row_key}=", plan)
    for row, saved_thread, checkpoint_id, seen, ended in checkpoints:
        shown = quote_columns({"thread_id": saved_thread, "checkpoint_id": checkpoint_id})
        where = f"{tables[1]}({row_key}={row}, {shown})"
        if steps == "name":  # a node its superstep finished
            for node in (node for node in seen if plan.call(node) is not None):
                state.records.setdefault(node, StepRecord(node, protocol.SUCCEEDED,
                                                          f"{where} versions_seen names {node}"))
        elif ended:  # the entrypoint returned: every task call it made is done
            state = replace(state, completed=True)
            for call in plan.call_ids:
                state.records.setdefault(call, StepRecord(call, protocol.SUCCEEDED,
                                                          f"{where} holds the entrypoint's return (__end__)"))
    return state


def _call_of(steps: str, task_path: object, plan: Plan) -> str | None:
    if not isinstance(task_path, str):
        return None
    if steps == "name":
        node = task_path.removeprefix(_PULL) if task_path.startswith(_PULL) else None
        return node if node is not None and plan.call(node) is not None else None
    push = _PUSH.fullmatch(task_path)
    index = int(push.group(1)) if push else len(plan.calls)
    return plan.calls[index].call_id if index < len(plan.calls) else None


def _fold(steps: str, rows: list[tuple[object, ...]], opening: str, plan: Plan) -> DurableState:
    records: dict[str, StepRecord] = {}
    completed: bool | None = None
    for row, thread, task_path, idx, channel in rows:
        if channel == _END and isinstance(task_path, str) and task_path.startswith(_PULL) and steps == "order":
            completed = True
        call = _call_of(steps, task_path, plan)
        if call is None:
            continue
        shown = quote_columns({"thread_id": thread, "task_path": task_path, "idx": idx, "channel": channel})
        quote = f"{opening}{row}, {shown})" + (
            f" (task call {plan.call_ids.index(call)} from 0 = {call})" if steps == "order" else "")
        if isinstance(idx, int) and idx >= 0:  # the step returned; it outranks an earlier error of the step
            if call not in records or records[call].status != protocol.SUCCEEDED:
                records[call] = StepRecord(call, protocol.SUCCEEDED, quote)
        elif channel == _ERROR and call not in records:
            records[call] = StepRecord(call, protocol.FAILED, quote)
    return DurableState(records, False, completed)


def _checkpoint_facts(blob: bytes) -> tuple[tuple[str, ...], bool]:
    """A msgpack checkpoint's ``versions_seen`` node names, and whether it holds the graph's end (``__end__``),
    decoded as plain data (extension types are left undecoded); nothing from a blob that is no such checkpoint."""
    ormsgpack = msgpack_module()
    if ormsgpack is None:
        raise StoreUnreadable("LangGraph's checkpoints are msgpack, and reading them needs ormsgpack: "
                              "pip install 'killpoint[langgraph]'")
    try:
        checkpoint = ormsgpack.unpackb(blob, ext_hook=lambda code, data: None)
    except (ormsgpack.MsgpackDecodeError, ValueError, TypeError, RecursionError):
        return (), False
    if not isinstance(checkpoint, dict):
        return (), False
    seen, values = checkpoint.get("versions_seen"), checkpoint.get("channel_values")
    return (tuple(node for node in seen if isinstance(node, str)) if isinstance(seen, dict) else (),
            isinstance(values, dict) and _END in values)


@functools.cache
def msgpack_module() -> ModuleType | None:
    """LangGraph's own msgpack library, ormsgpack; None in a harness without killpoint[langgraph]."""
    try:
        import ormsgpack
    except ImportError:
        return None
    return ormsgpack
