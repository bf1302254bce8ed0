"""The reference runtime, after leaving behind a sleeper that neither its process tree nor its environment leads to.

Argument: a marker the sleeper carries in its argv, so a test can find it. The runtime forks;
the child calls setsid and forks the sleeper, then exits, so the sleeper is out of the runtime's
process tree and group; the sleeper execve()s with an EMPTY environment, so no KILLPOINT_*
variable names its run. Before the runtime starts its task it waits until the sleeper runs
(its argv carries the marker) and appends ``sleeper PID running`` to escapees.txt in
$KILLPOINT_RUN_DIR: proof, for the test, that there was something to kill.
"""

import os
import sys
import time

from killpoint.scenarios.reference_runtime import main

SLEEPER_SECONDS = 600
START_DEADLINE_S = 10.0


def leave_sleeper(marker: str) -> int:
    """Double-fork a sleeper in a new session with an empty environment; return its pid."""
    read_end, write_end = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.setsid()
        sleeper = os.fork()
        if sleeper == 0:
            os.execve(sys.executable, [sys.executable, "-c", f"import time; time.sleep({SLEEPER_SECONDS})", marker], {})
        os.write(write_end, str(sleeper).encode())
        os._exit(0)
    os.close(write_end)
    os.waitpid(middle, 0)
    with os.fdopen(read_end, "rb") as pipe:
        return int(pipe.read())


def wait_until_running(pid: int, marker: str) -> None:
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if marker.encode() in cmdline.read().split(b"\0"):
                    return
        except FileNotFoundError:
            pass
        time.sleep(0.005)
    sys.exit(f"the sleeper pid {pid} did not start within {START_DEADLINE_S}s")


marker = sys.argv[1]
sleeper = leave_sleeper(marker)
wait_until_running(sleeper, marker)
with open(os.path.join(os.environ["KILLPOINT_RUN_DIR"], "escapees.txt"), "a") as record:
    record.write(f"sleeper {sleeper} running\n")
sys.exit(main())
