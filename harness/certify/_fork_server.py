"""The certifier's side of the Python fork server that runs each kill trial's child (``_child`` is the server).

``start_python`` hands a job to the (lazily started) server and returns the
forked ``Child`` for ``points.drive`` to kill; ``child_stderr`` reads what the
child wrote. The server runs as ``python -m killpoint.harness.certify._child``,
started by module name, so this module imports nothing of the server's (nor the
adapters, which import this one).
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from killpoint.harness.backends._cgroup import IncarnationCgroup
from killpoint.harness.certify.points import Child
from killpoint.harness.execute._process_tree import kill_tree

STDERR_NAME = "child-stderr.txt"  # in a job's scratch folder: where its child's stderr goes
SERVER_MODULE = "killpoint.harness.certify._child"


class ForkServer:
    """The parent's handle on one fork server process; ``close`` ends and reaps it.

    Each child it forks is killed by ``points.drive`` (tree, reap, confirmation)
    like a command; the server's ``exit CODE`` report is that child's reap, after
    which the child's cgroup is killed, confirmed empty and removed.
    """

    def __init__(self) -> None:
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(entry or os.getcwd() for entry in sys.path)}
        self.process = subprocess.Popen([sys.executable, "-m", SERVER_MODULE, str(theirs.fileno()),
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
