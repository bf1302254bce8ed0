"""``starts_slowly.py MODULE [ARG...]``: half a second of start-up, then ``python -m MODULE ARG...``.

An interpreter under load, or a runtime with heavy imports, takes that long
before its first crash point or journal write: a timed kill must wait for the
work, not land in the start-up.
"""

import runpy
import sys
import time

time.sleep(0.5)
module = sys.argv.pop(1)
runpy.run_module(module, run_name="__main__", alter_sys=True)
