"""DBOS under killpoint: steps registered under their call id, and a workflow that starts or recovers.

DBOS commits a step's ``operation_outputs`` row on the workflow's thread
before the step call returns to the workflow body, so the call site is where
the step is recorded: ``step`` announces ``step_recorded`` there. A step with
a row is not run again on recovery (its saved result is returned), one with
none is: DBOS writes nothing when a step begins.

Recovery needs the same ``application_version`` in every incarnation (DBOS
recovers only the pending workflows of its own version, by default a hash of
the workflow source), so ``run_workflow`` sets one.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from dbos import DBOS, SetWorkflowID

from killpoint import frameworks, protocol
from killpoint.frameworks import _session

__all__ = ["DATABASE_NAME", "fake_step", "run_workflow", "step"]

DATABASE_NAME = "dbos.sqlite"
POLL_INTERVAL_S = 0.05  # DBOS's own default is 1 s; its docs: "lower values can speed up test execution"
R = TypeVar("R")


def step(call_id: str, fn: Callable[..., Any], *, probe: frameworks.Probe | None = None) -> Callable[..., Any]:
    """``fn`` as DBOS step ``call_id`` of the plan (``killpoint.frameworks.step`` registered with DBOS)."""
    return _registered(call_id, frameworks.step(call_id, fn, probe=probe))


def fake_step(call_id: str, probe: bool = False) -> Callable[..., Any]:
    """Killpoint's fake tool of planned call ``call_id`` as DBOS step ``call_id``."""
    return _registered(call_id, frameworks.fake_step(call_id, probe))


def _registered(call_id: str, instrumented: Callable[..., R]) -> Callable[..., R]:
    """Register the step under the call id and announce its record where the workflow gets its result."""
    dbos_step = DBOS.step(name=call_id)(instrumented)

    @functools.wraps(dbos_step)
    def call_step(*args: Any, **kwargs: Any) -> R:
        result = dbos_step(*args, **kwargs)
        session = _session.current()
        if session is not None:
            session.recorded(call_id)
        return result

    return call_step


def run_workflow(workflow: Callable[..., R], *args: Any, workflow_id: str = "killpoint",
                 app_name: str = "killpoint-workload", application_version: str = "killpoint") -> R:
    """Launch DBOS on ``$KILLPOINT_DATABASE_URL`` (a scenario's ``[database]``: PostgreSQL), else on
    ``$KILLPOINT_RUN_DIR/dbos.sqlite``; start workflow ``workflow_id``, or wait for its recovery.

    ``DBOS.launch`` recovers a pending workflow from a background thread; a
    workflow already finished returns its recorded result.
    """
    database = Path(os.environ.get(protocol.ENV_RUN_DIR, ".")).resolve() / DATABASE_NAME
    url = os.environ.get(protocol.ENV_DATABASE_URL) or f"sqlite:///{database}"
    dbos = DBOS(config={"name": app_name, "system_database_url": url, "log_level": "WARNING",
                        "application_version": application_version,
                        # DBOS polls its notifications this often, and ``destroy`` waits out one poll (a second
                        # of every incarnation by default).
                        "notification_listener_polling_interval_sec": POLL_INTERVAL_S})
    _poll_recovery_queue_often(dbos)
    DBOS.launch()
    try:
        if DBOS.get_workflow_status(workflow_id) is None:
            with SetWorkflowID(workflow_id):
                return workflow(*args)
        # A recovered workflow runs on DBOS's queue thread; its result is polled for (every second by default).
        return DBOS.retrieve_workflow(workflow_id).get_result(polling_interval_sec=POLL_INTERVAL_S)
    finally:
        DBOS.destroy()


def _poll_recovery_queue_often(dbos: DBOS) -> None:
    """Have DBOS's internal queue, which runs a recovered workflow, poll every ``POLL_INTERVAL_S``, not every second.

    ``DBOS.launch`` recovers a pending workflow by enqueueing it there, and the
    queue's worker waits one interval before its first dequeue: a second of
    every recovering incarnation. The dequeue is the same (the queue's atomic
    ENQUEUED to PENDING claim), only sooner. DBOS's configuration has no
    setting for this queue (only for the Kafka ones), so the interval is set
    on the queue object of the pinned DBOS, which its worker reads at every poll.
    A DBOS without that object (another version) keeps its own interval: the
    same recovery, a second later.
    """
    with contextlib.suppress(AttributeError):
        dbos._registry.get_internal_queue()._polling_interval_sec = POLL_INTERVAL_S
