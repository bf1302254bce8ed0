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
process that started it.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

from killpoint.harness._process_tree import kill_tree
from killpoint.harness.backends._cgroup import IncarnationCgroup
from killpoint.harness.backends._forkserver_main import die_with_parent, fork_into
from killpoint.harness.certify.points import Child, PipePoints

STDERR_NAME = "child-stderr.txt"
_MESSAGE_BYTES = 1 << 20


def serve(control: socket.socket) -> None:
    """The server loop: one job at a time, until the parent closes the control socket."""
    from killpoint.harness.certify.adapters import target_from_spec

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
            from killpoint.harness.certify.adapters import target_from_spec

            target = target_from_spec(job["spec"])  # raises again, with its traceback, into the file
        target.call_with_points(Path(job["world"]), job["args"], scratch, PipePoints(points_fd, points_fd))
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stderr.flush()
        os._exit(code)  # no atexit handlers, no flushing of state inherited from the server


class ForkServer:
    """The parent's handle on one fork server process; ``close`` ends and reaps it.

    Each child it forks is killed by ``points.drive`` (tree, reap, confirmation)
    like a command; the server's ``exit CODE`` report is that child's reap, after
    which the child's cgroup is killed, confirmed empty and removed.
    """

    def __init__(self) -> None:
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(entry or os.getcwd() for entry in sys.path)}
        self.process = subprocess.Popen([sys.executable, "-m", "killpoint.harness.certify._child", str(theirs.fileno()),
                                         str(os.getpid())], pass_fds=(theirs.fileno(),), env=env,
                                        stdin=subprocess.DEVNULL)
        theirs.close()

    def __repr__(self) -> str:
        state = "running" if self.process.poll() is None else f"exited {self.process.returncode}"
        return f"<ForkServer pid {self.process.pid}, {state}>"

    def start(self, job: dict[str, Any]) -> Child:
        mine, theirs = socket.socketpair()
        cgroup = IncarnationCgroup.create()
        job = {**job, "cgroup": str(cgroup.path) if cgroup is not None else None}
        try:
            try:
                socket.send_fds(self.control, [json.dumps(job).encode()], [theirs.fileno()])
            finally:
                theirs.close()
            pid = int(self._answer("pid", 60.0) or -1)
            if pid < 0:
                raise OSError("the fork server did not start the child")
        except BaseException:
            mine.close()
            if cgroup is not None:
                cgroup.discard()
            raise
        return Child(pid, mine.fileno(), mine.fileno(), {"exit": self.control.fileno()},
                     lambda seconds: self._reap(seconds, cgroup), mine.close)

    def _reap(self, seconds: float, cgroup: IncarnationCgroup | None) -> int | None:
        """The child's exit code once the server reaped it, and then its cgroup emptied; None if not within ``seconds``."""
        answer = self._answer("exit", seconds)
        if answer is None:
            return None
        if cgroup is not None:
            cgroup.discard()  # what the child left there, out of its tree and group: killed, confirmed gone
        return int(answer)

    def _answer(self, kind: str, seconds: float) -> str | None:
        self.control.settimeout(seconds)
        try:
            message = self.control.recv(256).decode()
        except TimeoutError:
            return None
        if not message.startswith(kind + " "):
            raise OSError(f"the fork server said {message!r}, expected {kind}")
        return message.split(" ", 1)[1]

    def close(self) -> None:
        """Close the control socket, which tells the server to exit; SIGKILL its tree if it lingers."""
        self.control.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kill_tree(self.process.pid, self.process.wait)  # and confirms any child it was running dead too


_SERVER: list[ForkServer] = []


def start_python(job: dict[str, Any]) -> Child:
    """Fork a child running ``job`` from the (lazily started) fork server."""
    if _SERVER and _SERVER[0].process.poll() is not None:
        _SERVER.pop().close()
    if not _SERVER:
        _SERVER.append(ForkServer())
    return _SERVER[0].start(job)


@atexit.register
def close_fork_server() -> None:
    """End the fork server, if one runs (certification calls this when it is done)."""
    while _SERVER:
        _SERVER.pop().close()


def child_stderr(scratch: Path) -> str:
    """What the last child wrote to stderr (a traceback if the harness broke)."""
    try:
        return (scratch / STDERR_NAME).read_text(errors="replace")
    except OSError:
        return ""


if __name__ == "__main__":
    die_with_parent(int(sys.argv[2]))
    import killpoint.fake_tools.tools  # noqa: F401  (imported once here, so no child pays for it)

    serve(socket.socket(fileno=int(sys.argv[1])))
