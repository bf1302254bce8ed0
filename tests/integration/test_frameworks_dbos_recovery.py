"""``killpoint.frameworks.dbos.run_workflow`` recovers a killed workflow through DBOS's own recovery, sooner.

DBOS recovers a pending workflow by enqueueing it on its internal queue, whose
worker waited a whole second before its first dequeue, and the result of the
recovered workflow was polled for every second: two of every recovering
incarnation's seconds. ``run_workflow`` polls both at its short interval; the
recovery must still be DBOS's (the internal queue's claim), and each step run
as DBOS runs it: a recorded step not again, the killed one again.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dbos")

DEADLINE_S = 120.0
# Three steps, run outside killpoint (the wrappers just call the function); with argv[1] = "kill" the process
# SIGKILLs its own group as c2 ends, after its effect and before DBOS records it.
WORKFLOW = '''
import inspect, json, os, signal, sys

from dbos import DBOS, _queue
from dbos._dbos import _get_or_create_dbos_registry

from killpoint.frameworks.dbos import run_workflow, step


def body(call):
    with open("ran.log", "a") as log:
        log.write(call + "\\n")
    if sys.argv[1:] == ["kill"] and call == "c2":
        os.killpg(os.getpgrp(), signal.SIGKILL)
    return call


c1, c2, c3 = (step(call, lambda call=call: body(call)) for call in ("c1", "c2", "c3"))


@DBOS.workflow()
def flow():
    return [c1(), c2(), c3()]


if __name__ == "__main__":
    result = run_workflow(flow, workflow_id="w")
    print(json.dumps({"result": result,
                      "recovery_poll_s": _get_or_create_dbos_registry().get_internal_queue()._polling_interval_sec,
                      "worker_reads_it": "queue._polling_interval_sec" in inspect.getsource(_queue.queue_worker_thread)}))
'''


def incarnation(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "flow.py", *argv], cwd=folder, start_new_session=True,
                          capture_output=True, text=True, timeout=DEADLINE_S)


def test_a_killed_workflow_is_recovered_by_dbos_internal_queue_polled_at_the_short_interval(tmp_path):
    from killpoint.frameworks.dbos import POLL_INTERVAL_S

    (tmp_path / "flow.py").write_text(WORKFLOW)
    killed = incarnation(tmp_path, "kill")
    assert killed.returncode == -9, killed.stderr
    recovered = incarnation(tmp_path)
    assert recovered.returncode == 0, recovered.stderr
    assert json.loads(recovered.stdout.splitlines()[-1]) == {
        "result": ["c1", "c2", "c3"], "recovery_poll_s": POLL_INTERVAL_S, "worker_reads_it": True}
    assert (tmp_path / "ran.log").read_text().split() == ["c1", "c2", "c2", "c3"]  # c1 was recorded, c2 was not
    with sqlite3.connect(f"file:{tmp_path / 'dbos.sqlite'}?mode=ro", uri=True) as database:
        status = database.execute("SELECT status, queue_name, recovery_attempts FROM workflow_status").fetchall()
    assert status == [("SUCCESS", "_dbos_internal_queue", 2)]  # recovered through DBOS's own queue


def test_a_dbos_without_the_pinned_queue_object_keeps_its_own_interval():
    """Another DBOS version than the pinned one: its recovery a second later, never a workload that cannot start."""
    from types import SimpleNamespace

    from killpoint.frameworks.dbos import POLL_INTERVAL_S, _poll_recovery_queue_often

    for registry in (SimpleNamespace(), SimpleNamespace(get_internal_queue=lambda: None)):
        _poll_recovery_queue_often(SimpleNamespace(_registry=registry))  # type: ignore[arg-type]
    queue = SimpleNamespace(_polling_interval_sec=1.0)
    pinned = SimpleNamespace(_registry=SimpleNamespace(get_internal_queue=lambda: queue))
    _poll_recovery_queue_often(pinned)  # type: ignore[arg-type]
    assert queue._polling_interval_sec == POLL_INTERVAL_S
