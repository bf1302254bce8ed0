"""The children that run one Python tool call with kill points, to be SIGKILLed part-way.

Why a fork server: a fresh interpreter per kill trial costs a few hundred
milliseconds (most of it importing), and a certification makes hundreds of
kill trials. ``python -m killpoint.harness.certify._child FD`` imports the tools once,
then for each job forks a child from that pristine, single-threaded process
(never from the certifying process, whose state and threads a fork would
inherit). Each child is a real process in its own session, born in a cgroup of
its own as a run's incarnation is (the backends' ``_cgroup`` and the fork
server's ``fork_into``): the parent SIGKILLs its group and tree while it is
blocked at a kill point, and once the server reports it reaped, killed or not,
whatever it left in its cgroup (a helper that double-forked out of its tree and
session) is killed and confirmed gone. Without cgroups, the tree walk is all.

The control socket (SOCK_SEQPACKET, one message per datagram) carries a job
with the child's end of its point socket attached; the server answers
``pid N`` when it forked (``error WHY`` when it could not), and ``exit CODE``
when the child is reaped. Like the backends' fork server, it dies with the
process that started it. The certifier's end of it is ``_fork_server``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from killpoint.harness.backends._forkserver_main import die_with_parent, fork_into
from killpoint.harness.certify._fork_server import STDERR_NAME
from killpoint.harness.certify.adapters import target_from_spec
from killpoint.harness.certify.points import PipePoints

_MESSAGE_BYTES = 1 << 20


def serve(control: socket.socket) -> None:
    """The server loop: one job at a time, until the parent closes the control socket."""
    targets: dict[str, Any] = {}
    while True:
        message, fds, _, _ = socket.recv_fds(control, _MESSAGE_BYTES, 1)
        if not message:
            return
        job = json.loads(message)
        key = json.dumps(job["spec"], sort_keys=True)
        try:
            targets.setdefault(key, target_from_spec(job["spec"]))
        except Exception:
            targets.pop(key, None)
        try:
            pid = fork_into(job.get("cgroup"))
        except OSError as error:
            os.close(fds[0])
            control.send(f"error {error}".encode())
            continue
        if pid == 0:
            control.close()
            _run_job(job, targets.get(key), fds[0])
        os.close(fds[0])
        control.send(f"pid {pid}".encode())
        _, status = os.waitpid(pid, 0)
        control.send(f"exit {os.waitstatus_to_exitcode(status)}".encode())


def _run_job(job: dict[str, Any], target: Any, points_fd: int) -> None:
    """In the forked child: a session of its own, stderr to the scratch folder, the call with points; never returns."""
    os.setsid()
    scratch = Path(job["scratch"])
    code = 0
    try:
        with open(scratch / STDERR_NAME, "w") as stderr:
            os.dup2(stderr.fileno(), 1)
            os.dup2(stderr.fileno(), 2)
        if target is None:
            target = target_from_spec(job["spec"])  # raises again, with its traceback, into the file
        target.call_with_points(Path(job["world"]), job["args"], scratch, PipePoints(points_fd, points_fd))
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stderr.flush()
        os._exit(code)  # no atexit handlers, no flushing of state inherited from the server


if __name__ == "__main__":
    die_with_parent(int(sys.argv[2]))
    import killpoint.fake_tools.tools  # noqa: F401  (imported once here, so no child pays for it)

    serve(socket.socket(fileno=int(sys.argv[1])))
