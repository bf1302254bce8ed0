"""The process leaves_its_cgroup.py leaves behind: ``_escapee.py MARKER MODE RUN_DIR``, run with an empty environment.

It holds what MODE says (leaves_its_cgroup.py lists them), makes ``escapee-ready`` in RUN_DIR
to say so, and then sleeps, or (``writer``) keeps writing files into RUN_DIR/writer.
"""

import mmap
import os
import sys
import time

mode, run_dir = sys.argv[2], sys.argv[3]
held: object = None
if mode == "fd":
    held = open(os.path.join(run_dir, "escapee.log"), "a")
elif mode == "mmap":
    with open(os.path.join(run_dir, "escapee.map"), "w+b") as file:
        file.write(b"x" * 4096)
        file.flush()
        held = mmap.mmap(file.fileno(), 4096)  # the mapping outlives the descriptor
os.close(os.open(os.path.join(run_dir, "escapee-ready"), os.O_WRONLY | os.O_CREAT))
if mode != "writer":
    time.sleep(600)
folder = os.path.join(run_dir, "writer")
number = 0
while True:
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"out-{number % 500}"), "w") as out:
            out.write("still here\n")
    except OSError:
        pass
    number += 1
    time.sleep(0.001)
