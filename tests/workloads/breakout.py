"""A workload that tries to break out of its container and prints, as one JSON object, how each attempt went.

Only ever run it in a container (tests/integration/test_docker_backend.py): on
the host as root several attempts would succeed for real. Each attempt maps to
``"ok"`` when it got through, else to the error that stopped it. Argument:
a TCP port the test listens on, on every host address.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys

FORK_LIMIT = 10_000
HOG_BYTES = 1 << 30


def attempt(action) -> str:
    try:
        action()
        return "ok"
    except OSError as error:
        return error.strerror or type(error).__name__


def connect(host: str, port: int) -> None:
    socket.create_connection((host, port), timeout=2).close()


def write_in(directory: str) -> None:
    path = os.path.join(directory, f".breakout-{os.getpid()}")
    with open(path, "w") as stream:
        stream.write("escaped\n")
    os.unlink(path)


def writable_mounts() -> list[str]:
    """Every mount point the workload could write in (character devices, e.g. masked /dev/null binds, aside)."""
    found = []
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            point = line.split()[1]
            try:
                if stat.S_ISCHR(os.stat(point).st_mode):
                    continue
                if os.path.isdir(point):
                    write_in(point)
                else:
                    open(point, "a").close()
            except OSError:
                continue
            found.append(point)
    return found


def fork_bomb() -> dict[str, object]:
    """Fork until the kernel refuses; the children wait on a pipe, then all exit."""
    read_end, write_end = os.pipe()
    children, stopped_by = 0, None
    while children < FORK_LIMIT:
        try:
            pid = os.fork()
        except OSError as error:
            stopped_by = error.strerror
            break
        if pid == 0:
            os.close(write_end)
            os.read(read_end, 1)
            os._exit(0)
        children += 1
    os.close(write_end)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            break
    return {"children": children, "stopped_by": stopped_by}


def memory_hog() -> dict[str, object]:
    """A child writes a gigabyte; report how it ended (SIGKILL from the OOM killer under a memory limit)."""
    pid = os.fork()
    if pid == 0:
        hog = b"x" * HOG_BYTES
        os._exit(0 if hog else 1)
    _, status = os.waitpid(pid, 0)
    return {"signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}


def status_fields(*names: str) -> dict[str, str]:
    with open("/proc/self/status") as status:
        fields = dict(line.rstrip("\n").split(":\t", 1) for line in status if ":\t" in line)
    return {name: fields.get(name, "").strip() for name in names}


def main() -> int:
    port = int(sys.argv[1])
    run_dir = os.environ["KILLPOINT_RUN_DIR"]
    mine = os.path.join(run_dir, "mine")
    open(mine, "w").close()
    other_uid = 12345 if os.getuid() == 0 else 0
    report = {
        "uid": os.getuid(),
        **status_fields("NoNewPrivs", "CapEff", "CapBnd"),
        "connect_loopback": attempt(lambda: connect("127.0.0.1", port)),
        "connect_docker_host": attempt(lambda: connect("172.17.0.1", port)),
        "connect_public": attempt(lambda: connect("1.1.1.1", 53)),
        "write_root": attempt(lambda: write_in("/")),
        "write_python": attempt(lambda: write_in(sys.prefix)),
        "write_plan": attempt(lambda: open(os.environ["KILLPOINT_PLAN"], "a").close()),
        "chown": attempt(lambda: os.chown(mine, other_uid, other_uid)),
        "mknod": attempt(lambda: os.mknod(os.path.join(run_dir, "null"), stat.S_IFCHR | 0o666, os.makedev(1, 3))),
        "setuid": attempt(lambda: os.setuid(other_uid)),
        "writable_mounts": writable_mounts(),
        "fork_bomb": fork_bomb(),
        "memory_hog": memory_hog(),
    }
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
