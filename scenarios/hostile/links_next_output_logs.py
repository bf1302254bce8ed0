"""Attack: the next incarnation's output logs are planted as symlinks to a host file, before the harness makes them.

Each incarnation knows its run directory (the parent of ``KILLPOINT_RUN_DIR``)
and its number, so it plants ``incarnation-<next>.stdout`` and ``.stderr`` there
as symlinks to the file named by the first argument, then carries out the plan
as the reference runtime does. A harness that creates the logs by opening those
paths truncates the host file and hands its descriptor to the next incarnation.
"""

from __future__ import annotations

import os
import sys

from killpoint.client import WorkloadEnv
from killpoint.scenarios.reference_runtime import ReferenceRuntime


def main() -> int:
    env = WorkloadEnv.from_environ()
    run_dir = env.run_dir.parent
    for stream in ("stdout", "stderr"):
        planted = run_dir / f"incarnation-{env.incarnation + 1}.{stream}"
        if not os.path.lexists(planted):
            planted.symlink_to(sys.argv[1])
    return ReferenceRuntime(env).run()


if __name__ == "__main__":
    sys.exit(main())
