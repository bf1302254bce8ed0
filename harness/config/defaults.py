"""Every default of a killpoint session and hunt, in one place; the CLI's and the plugin's help quote them.

``spec.build_spec`` is the one function that applies them. Kept free of the
harness's imports (like ``_ci``) so the pytest plugin can word its help without loading it.
"""

from __future__ import annotations

import os

DEPTH = 1  # kills per schedule of an exhaustive session
TIMED_RUNS = 20  # runs of a timed session
MIXED_FAULT_RATE = 0.25  # share of a random session's kills made timed (--timed) or torn (--torn-tail)
# Runs in parallel: one per core this process may run on; -j 1 runs them one after another.
JOBS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

# What the help says of defaults that are decided from the scenario or the environment.
BACKEND_HELP = "the scenario file's, else forkserver for a {python} workload, else subprocess"
SEED_HELP = "drawn and printed; 0 when CI is set"
RUNS_DIR_HELP = "./killpoint-runs/TIME-SCENARIO-PID"
JOBS_HELP = f"{JOBS}, this machine's cores; -j 1 runs one schedule at a time"
SCRATCH_HELP = ("carry each run with no power loss out in a scratch folder made in DIR, ideally a tmpfs, and keep "
                "its evidence in --runs-dir (a passing run's verdict, a failing one's whole evidence); default: "
                "/dev/shm when it is a tmpfs with room, except with --backend docker")
NO_SCRATCH_HELP = ("carry every run out in --runs-dir itself, as killpoint did before scratch folders (slower on "
                   "a disk: each journal fsync waits for it)")
NO_PAUSE_HELP = ("make every crash-point kill /now: the workload, armed with its self-kill points, SIGKILLs itself "
                 "at the point with no round trip, so no thread of it runs on past the point (a paused point lets "
                 "background writers finish)")

POWER_LOSS_HELP = ("make every kill a power loss (/power): the runtime's storage is a lazy file system, and "
                   "after the kill every write it never fsynced (file data, or a directory's entries) is lost; "
                   "with --torn-tail, torn power losses (part of the last unsynced write, or some of them)")

HUNT_EXAMPLES = 200
HUNT_MAX_CALLS = 6
HUNT_SEED = 0
