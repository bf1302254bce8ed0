"""LangGraph under killpoint: a checkpointer that announces each step's record, and a run that starts or resumes.

A node (StateGraph) or ``@task`` (functional API) is recorded when LangGraph's
``put_writes`` has saved its writes: a node whose writes are saved is not run
again on resume, one whose writes are not is. ``KillpointSaver`` is the
SqliteSaver on ``$KILLPOINT_RUN_DIR/checkpoints.sqlite`` (the file a scenario's
``[journal] format = "langgraph-sqlite"`` names), ``KillpointPostgresSaver`` the
PostgresSaver on ``$KILLPOINT_DATABASE_URL`` (``langgraph-postgres``, ``postgres_saver``); each announces
``step_saving`` when ``put_writes`` is called (the step has returned, its
writes are handed to the checkpointer, nothing of them is saved yet) and
``step_recorded`` once it has returned. LangGraph calls ``put_writes`` from
its background executor, which may still be saving when the next step runs
(under ``"sync"`` the next superstep waits for the checkpoint, not for
``put_writes``). Under ``"exit"`` it is not called for a step at all (the
checkpoint saved as the graph ends holds every step), so neither point is
reached: no step is ever recorded on its own.

The step named by ``put_writes`` is read off its ``task_path`` as the store
readers read it: ``~__pregel_pull, NODE`` is the node (named after its call id),
``~__pregel_push, ~__pregel_pull, ENTRYPOINT, I, ...`` is the I-th task call of
an entrypoint, the plan's I-th call.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel

from killpoint import protocol
from killpoint.frameworks import _session

__all__ = ["CHECKPOINTS_NAME", "KillpointSaver", "postgres_saver", "run"]

CHECKPOINTS_NAME = "checkpoints.sqlite"
Durability = Literal["sync", "async", "exit"]
_PULL = "~__pregel_pull"
_PUSH = "~__pregel_push"


class _Announcing(BaseCheckpointSaver[Any]):
    """A checkpointer announcing ``step_saving`` for a planned step whose writes it is handed, before it saves
    them, and ``step_recorded`` once it has."""

    def put_writes(self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        session = _session.current()
        call_id = step_of(task_path, tuple(session.calls)) if session is not None else None
        if session is not None and call_id is not None:
            session.saving(call_id)
        super().put_writes(config, writes, task_id, task_path)
        if session is not None and call_id is not None:
            session.recorded(call_id)


class KillpointSaver(_Announcing, SqliteSaver):
    """SqliteSaver announcing each planned step's save."""


@functools.cache
def postgres_saver() -> type[BaseCheckpointSaver[Any]]:
    """``KillpointPostgresSaver``: PostgresSaver (langgraph-checkpoint-postgres) announcing each planned step's save.
    Imported only when a scenario's ``[database]`` asks for it: its import (psycopg's) would cost every SQLite
    workload's incarnation about 0.1 s."""
    from langgraph.checkpoint.postgres import PostgresSaver

    class KillpointPostgresSaver(_Announcing, PostgresSaver):
        """PostgresSaver announcing each planned step's save."""

    return KillpointPostgresSaver


def step_of(task_path: str, plan_order: tuple[str, ...]) -> str | None:
    """The planned call a task path names (a node by its name, a task call by its ordinal), or None."""
    parts = [part.strip() for part in task_path.split(",")]
    if len(parts) == 2 and parts[0] == _PULL:
        return parts[1] if parts[1] in plan_order else None
    if len(parts) >= 4 and parts[:2] == [_PUSH, _PULL] and parts[3].isdigit():
        index = int(parts[3])
        return plan_order[index] if index < len(plan_order) else None
    return None


def checkpoints_path() -> Path:
    """Where the checkpoints live: the workload folder under killpoint, else the current folder."""
    return Path(os.environ.get(protocol.ENV_RUN_DIR, ".")) / CHECKPOINTS_NAME


def run(graph: StateGraph[Any] | Pregel[Any, Any], inputs: Any, *, thread_id: str = "killpoint",
        durability: Durability = "sync") -> Any:
    """Run ``graph`` (a StateGraph builder, or a compiled graph or entrypoint) to its end, or resume it.

    A thread with a checkpoint resumes (``invoke(None, ...)``): LangGraph applies
    the saved writes, re-runs the steps that have none and goes on; on a thread
    that finished it runs nothing and returns the final values. Whether the
    graph finished cannot be read off ``get_state().next``: it is empty too
    when the last step's writes are saved but the next step not yet scheduled
    (a kill at c1's step_recorded). A thread with no checkpoint starts from ``inputs``
    (LangGraph's own ``invoke(None)`` raises there): a crash before anything was saved
    starts the graph over, as a user's restart would.

    ``durability`` defaults to ``"sync"``, not LangGraph's own default ``"async"``: a
    step's writes are saved before the next step starts, so a kill lands on one
    defined store state. Pass ``durability="async"`` to test what LangGraph does by
    default (its saves race the kill: run it with ``--no-pause`` too).
    """
    with _saver() as saver:
        app = graph.compile(checkpointer=saver) if isinstance(graph, StateGraph) else graph.copy(
            {"checkpointer": saver})
        config: Any = {"configurable": {"thread_id": thread_id}}
        resuming = app.get_state(config).metadata is not None
        return app.invoke(None if resuming else inputs, config, durability=durability)


@contextlib.contextmanager
def _saver() -> Iterator[BaseCheckpointSaver[Any]]:
    """The checkpointer: PostgresSaver on ``$KILLPOINT_DATABASE_URL`` (a scenario's ``[database]``, its tables set
    up if they are not yet), else SqliteSaver on ``checkpoints_path()``."""
    url = os.environ.get(protocol.ENV_DATABASE_URL)
    if url:
        with postgres_saver().from_conn_string(url) as saver:  # type: ignore[attr-defined]
            saver.setup()
            yield saver
        return
    connection = sqlite3.connect(checkpoints_path(), check_same_thread=False)
    try:
        yield KillpointSaver(connection)
    finally:
        connection.close()
