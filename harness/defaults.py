"""Every default of a killpoint session and hunt, in one place; the CLI's and the plugin's help quote them.

``spec.build_spec`` is the one function that applies them. Kept free of imports
(like ``_ci``) so the pytest plugin can word its help without loading the harness.
"""

from __future__ import annotations

DEPTH = 1  # kills per schedule of an exhaustive session
TIMED_RUNS = 20  # runs of a timed session
MIXED_FAULT_RATE = 0.25  # share of a random session's kills made timed (--timed) or torn (--torn-tail)
JOBS = 1  # runs in parallel

# What the help says of defaults that are decided from the scenario or the environment.
BACKEND_HELP = "the scenario file's, else forkserver for a {python} workload, else subprocess"
SEED_HELP = "drawn and printed; 0 when CI is set"
RUNS_DIR_HELP = "./killpoint-runs/TIME-SCENARIO-PID"
NO_PAUSE_HELP = ("make every crash-point kill /now: the point is answered 'kill' and the workload SIGKILLs itself "
                 "at once, so no thread of it runs on (a paused point lets background writers finish)")

POWER_LOSS_HELP = ("make every kill a power loss (/power): the runtime's storage is a lazy file system, and "
                   "after the kill every write it never fsynced (file data, or a directory's entries) is lost; "
                   "with --torn-tail, torn power losses (part of the last unsynced write, or some of them)")

HUNT_EXAMPLES = 200
HUNT_MAX_CALLS = 6
HUNT_SEED = 0
