"""The fork server: a warm interpreter that forks one child per workload incarnation.

Started by ``harness.backends.forkserver`` as ``_forkserver_main FD [MODULE...]``
with one end of a socketpair on descriptor FD. Requests and answers are JSON lines:

    -> {"module": "scenarios.reference_runtime", "argv": [...], "env": {...}, "cwd": ..., "stdout": ..., "stderr": ...}
    <- {"pid": 1234}                       once the child exists
    <- {"pid": 1234, "exit_code": 0}       once it has exited (or been killed) and is reaped

The server imports a module before its first fork (so every child starts warm)
and never runs workload code itself. A child gets a clean state: its own session
and process group, no descriptor but 0, 1 and 2 (stdin /dev/null, stdout and
stderr into the run directory), the protocol environment, a reseeded ``random``,
default signal handlers, and no threads (the server has none). The server asks
the kernel to SIGKILL it if the harness dies, so it never outlives it.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import random
import runpy
import selectors
import signal
import sys
import traceback
from typing import Any

PR_SET_PDEATHSIG = 1


def _child(request: dict[str, Any]) -> None:
    """Become the workload; never returns."""
    code = 1
    try:
        os.setsid()
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(signum, signal.SIG_DFL)
        stdin = os.open(os.devnull, os.O_RDONLY)
        stdout = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        stderr = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for source, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(source, target)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        random.seed()
        sys.argv = list(request["argv"])
        if request.get("module"):
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(request["script"], run_name="__main__")
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if exit_.code is not None and not isinstance(exit_.code, int):
            print(exit_.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - the workload's crash is its exit status, as in a real process
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def serve(control: Any) -> None:
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ, None)
    reader = control.makefile("rb")
    children: dict[int, int] = {}  # pidfd -> pid
    while True:
        for key, _ in selector.select():
            if key.data is None:
                line = reader.readline()
                if not line:
                    return
                request = json.loads(line)
                if request.get("module"):
                    importlib.import_module(request["module"])  # warm: the fork below inherits it
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _child(request)
                pidfd = os.pidfd_open(pid)
                children[pidfd] = pid
                selector.register(pidfd, selectors.EVENT_READ, pid)
                control.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            else:
                selector.unregister(key.fd)
                os.close(key.fd)
                pid = children.pop(key.fd)
                _, status = os.waitpid(pid, 0)
                control.sendall(json.dumps({"pid": pid, "exit_code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")


def main() -> None:
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the harness died before the death signal was armed
        sys.exit(0)
    import socket

    control = socket.socket(fileno=int(sys.argv[1]))
    for module in sys.argv[2:]:
        importlib.import_module(module)
    serve(control)


if __name__ == "__main__":
    main()
