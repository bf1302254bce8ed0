"""The fork-server backend: incarnations forked from a warm interpreter (after AFL's fork server).

Starting a Python interpreter and importing a runtime costs tens of
milliseconds; forking one that has already imported it costs a couple. The
server (``_forkserver_main``) is a child of the harness; each incarnation is a
child of the server, in its own session, watched by the runner through a pidfd
like any other, and born in its own cgroup (``_cgroup``). Kills, timeouts,
sweeps and evidence are exactly those of the subprocess backend; only the start
differs. Python workloads only:
``{python} -m MODULE ...`` or ``{python} SCRIPT.py ...`` with this interpreter.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from killpoint import protocol
from killpoint.errors import ConfigError, InfrastructureError
from killpoint.harness._safe_files import fresh_file
from killpoint.harness.backends._cgroup import IncarnationCgroup
from killpoint.harness.backends._host import HostIncarnation, prepare_containment
from killpoint.harness.execute._process_tree import CONFIRM_TIMEOUT_S, KillFailed


class ForkServerDied(InfrastructureError):
    """The fork server exited under the harness; the backend restarts it and says so."""


@functools.cache
def _resolved(path: str) -> Path:
    """``path`` with its links resolved, once per session: a launch is too frequent to walk it every time."""
    return Path(path).resolve()


def python_target(argv: tuple[str, ...]) -> dict[str, object]:
    """What the server should run for ``argv``, or a ConfigError saying why it cannot."""
    interpreter = _resolved(argv[0]) if argv else None
    if interpreter != _resolved(sys.executable) or len(argv) < 2:
        raise ConfigError(f"--backend forkserver runs Python workloads on this interpreter "
                          f"({sys.executable} -m MODULE or {sys.executable} SCRIPT); "
                          f"{' '.join(argv)!r} is not one: use --backend subprocess")
    if argv[1] == "-m" and len(argv) >= 3:
        return {"module": argv[2], "argv": [argv[2], *argv[3:]]}
    if argv[1].startswith("-"):
        raise ConfigError(f"--backend forkserver: interpreter option {argv[1]!r} is not supported; "
                          f"use --backend subprocess")
    return {"script": argv[1], "argv": list(argv[1:])}


# The server reports a reap at once; twice the kill-confirmation deadline allows for a loaded machine.
REAP_TIMEOUT_S = 2 * CONFIRM_TIMEOUT_S


@dataclass
class _Connection:
    """A running server: its process, and the control socket with a line reader on it."""

    process: subprocess.Popen[bytes]
    socket: socket.socket
    reader: IO[bytes]


@dataclass
class ForkServer:
    """The server process and its control socket; restarted if it dies."""

    restarts: list[str] = field(default_factory=list)
    _server: _Connection | None = None
    _exits: dict[int, int] = field(default_factory=dict)

    def start(self) -> _Connection:
        ours, theirs = socket.socketpair()
        # Hash randomisation is fixed when an interpreter starts, so a forked child keeps the server's:
        # the server must start with the PYTHONHASHSEED every incarnation is given.
        process = subprocess.Popen(
            [sys.executable, "-m", "killpoint.harness.backends._forkserver_main", str(theirs.fileno()), str(os.getpid())],
            stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),), close_fds=True,
            env={**os.environ, "PYTHONHASHSEED": protocol.WORKLOAD_HASH_SEED},
        )
        theirs.close()
        self._server = _Connection(process, ours, ours.makefile("rb"))
        return self._server

    def fork(self, request: dict[str, object]) -> int:
        server = self._server
        if server is None or server.process.poll() is not None:
            if server is not None:
                self.restarts.append(f"fork server pid {server.process.pid} exited with {server.process.returncode}; "
                                     f"restarted")
                print(f"killpoint: {self.restarts[-1]}", file=sys.stderr)
            server = self.start()
        server.socket.sendall(json.dumps(request).encode() + b"\n")
        while True:
            answer = self._answer(server)
            if "error" in answer:
                raise InfrastructureError(f"the fork server cannot start the incarnation ({answer['error']}); "
                                          f"use --backend subprocess")
            if "exit_code" in answer:
                self._exits[answer["pid"]] = answer["exit_code"]
            else:
                return int(answer["pid"])

    def reaped(self, pid: int) -> int:
        """Wait until the server reports ``pid`` reaped; return its exit code.

        Called once the child exited or was SIGKILLed, so its report is due at
        once: a server that stays silent past the kill-confirmation deadline
        means the child did not die, and the harness says so instead of hanging.
        """
        server = self._server
        if server is None:
            raise ForkServerDied(f"the fork server was closed before it reported pid {pid} reaped")
        server.socket.settimeout(REAP_TIMEOUT_S)
        try:
            while pid not in self._exits:
                answer = self._answer(server)
                if "exit_code" in answer:
                    self._exits[answer["pid"]] = answer["exit_code"]
        except TimeoutError:
            raise KillFailed(f"the fork server did not report pid {pid} reaped within {REAP_TIMEOUT_S:g}s of its "
                             f"exit or kill") from None
        finally:
            server.socket.settimeout(None)
        return self._exits.pop(pid)

    @staticmethod
    def _answer(server: _Connection) -> dict[str, Any]:
        try:
            line = server.reader.readline()
        except ConnectionError:
            line = b""
        if not line:
            raise ForkServerDied(f"the fork server (pid {server.process.pid}) died; the run cannot continue on it")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self._server is not None:
            self._server.socket.close()
            self._server.process.kill()
            self._server.process.wait()
            self._server = None


class ForkServerBackend:
    name = "forkserver"
    options: dict[str, str] = {}

    def __init__(self) -> None:
        prepare_containment()
        self.server = ForkServer()

    def launch(self, argv: tuple[str, ...], *, cwd: Path, env: dict[str, str], stdout: Path, stderr: Path) -> HostIncarnation:
        target = python_target(argv)
        if "script" in target:  # as python would, from the incarnation's working directory
            target["script"] = str(Path(cwd, str(target["script"])).absolute())
        for stream in (stdout, stderr):  # evidence even if a kill lands before the child opens them
            os.close(fresh_file(stream))
        cgroup = IncarnationCgroup.create()
        request = {**target, "env": {**os.environ, **env}, "cwd": str(_resolved(str(cwd))),
                   "stdout": os.path.abspath(stdout), "stderr": os.path.abspath(stderr),
                   "cgroup": str(cgroup.path) if cgroup is not None else None}
        try:
            pid = self.server.fork(request)
        except BaseException:
            if cgroup is not None:
                cgroup.discard()
            raise
        return HostIncarnation(pid, functools.partial(self.server.reaped, pid), env[protocol.ENV_RUN_DIR], cgroup)

    def close(self) -> None:
        self.server.close()
