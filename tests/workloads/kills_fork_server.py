"""A workload that SIGKILLs the fork server it was forked from (and nothing else: it checks first)."""

import os
import signal
import sys
import time
from pathlib import Path

parent = os.getppid()
if b"_forkserver_main" not in Path(f"/proc/{parent}/cmdline").read_bytes():
    sys.exit("not forked by a killpoint fork server; refusing to kill pid %d" % parent)
os.kill(parent, signal.SIGKILL)
time.sleep(60)
