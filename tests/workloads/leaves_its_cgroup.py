"""The reference runtime, after leaving behind a process that escaped every containment and holds the run's files.

Arguments: MODE, a marker the escapee carries in its argv, so a test can find it, and optionally
the names of the runs' folders to escape in, separated by commas (by default every run's but the
crash-free run's, named golden). There each incarnation forks a child that writes its
pid into the root cgroup's ``cgroup.procs`` (as root it may: it leaves the incarnation's cgroup,
whose kill then misses it), calls setsid and forks the escapee, which execve()s with an EMPTY
environment: neither the cgroup, the process tree, the process group nor the KILLPOINT_*
environment leads to it. What ties it to the run is MODE:

- ``fd``: it holds a file of $KILLPOINT_RUN_DIR open;
- ``cwd``: its working directory is $KILLPOINT_RUN_DIR;
- ``mmap``: it maps a file of $KILLPOINT_RUN_DIR and closes the descriptor;
- ``writer``: it keeps writing files into $KILLPOINT_RUN_DIR/writer (from /, opening each file
  for a moment), so a removal of the run's folder finds it growing (500 files, over and over).

Before the runtime starts its task it waits until the escapee holds what its mode says, and
appends ``escapee PID CGROUP`` to escapees.txt in $KILLPOINT_RUN_DIR: proof, for the test, that
there was something to kill, and that it had left the incarnation's cgroup.
"""

import os
import sys
import time

from killpoint.scenarios.reference_runtime import main

START_DEADLINE_S = 10.0
READY = "escapee-ready"  # in $KILLPOINT_RUN_DIR: made by the escapee (_escapee.py) once it holds what its mode says

ESCAPEE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_escapee.py")


def root_cgroup_procs() -> str:
    """``cgroup.procs`` of the root of the cgroup v2 hierarchy (its mount point, from mountinfo)."""
    with open("/proc/self/mountinfo") as mounts:
        for mount in mounts:
            fields, _, filesystem = mount.partition(" - ")
            if filesystem.split()[:1] == ["cgroup2"] and fields.split()[3] == "/":
                return os.path.join(fields.split()[4], "cgroup.procs")
    sys.exit("no cgroup v2 hierarchy is mounted")


def leave_escapee(mode: str, marker: str, run_dir: str) -> int:
    """Fork a child that leaves the cgroup, setsids and forks the escapee with an empty environment; its pid."""
    read_end, write_end = os.pipe()
    procs = root_cgroup_procs()
    middle = os.fork()
    if middle == 0:
        with open(procs, "w") as root:
            root.write("0")
        os.setsid()
        escapee = os.fork()
        if escapee == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for stream in (0, 1, 2):  # the incarnation's output logs, also the run's files, would give it away
                os.dup2(null, stream)
            os.chdir(run_dir if mode == "cwd" else "/")
            os.execve(sys.executable, [sys.executable, ESCAPEE, marker, mode, run_dir], {})
        os.write(write_end, str(escapee).encode())
        os._exit(0)
    os.close(write_end)
    os.waitpid(middle, 0)
    with os.fdopen(read_end, "rb") as pipe:
        return int(pipe.read())


def wait_until_ready(pid: int, run_dir: str) -> str:
    """Wait until the escapee holds what its mode says; its cgroup."""
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline:
        if os.path.exists(os.path.join(run_dir, READY)):
            os.unlink(os.path.join(run_dir, READY))
            with open(f"/proc/{pid}/cgroup") as cgroups:
                return next(line.strip() for line in cgroups if line.startswith("0::"))
        time.sleep(0.005)
    sys.exit(f"the escapee pid {pid} was not ready within {START_DEADLINE_S}s")


mode, marker = sys.argv[1], sys.argv[2]
run_dir = os.environ["KILLPOINT_RUN_DIR"]
run_name = os.path.basename(os.path.dirname(run_dir))
if run_name in sys.argv[3].split(",") if len(sys.argv) > 3 else run_name != "golden":
    escapee = leave_escapee(mode, marker, run_dir)
    cgroup = wait_until_ready(escapee, run_dir)
    with open(os.path.join(run_dir, "escapees.txt"), "a") as record:
        record.write(f"escapee {escapee} {cgroup}\n")
sys.exit(main())
