"""Starts a child in its process group, announces one crash point, and leaves a file if it ever runs on.

argv[1] is a file it writes ``PID CHILD_PID PGID`` into first; ``argv[1].ran-on`` appears only if
the point returned (the harness replied ok). A non-pausing kill must leave the file absent and
both processes dead, with no help from the harness.
"""

import os
import subprocess
import sys
from pathlib import Path

from killpoint import protocol
from killpoint.client import Rendezvous

report = Path(sys.argv[1])
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
report.write_text(f"{os.getpid()} {child.pid} {os.getpgrp()}")
Rendezvous(os.environ[protocol.ENV_CONTROL], 0).point(protocol.AFTER_EFFECT, call="c1", op="t-op1")
report.with_name(report.name + ".ran-on").write_text("the point returned")
child.kill()
