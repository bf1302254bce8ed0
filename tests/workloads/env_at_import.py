"""The reference runtime, after checking that its own module saw this incarnation's environment at import.

Run as ``python -m tests.workloads.env_at_import``: the fork server imports the module
before any incarnation exists, so a module it imports must not stay imported from then.
"""

import os
import sys

from killpoint.scenarios.reference_runtime import main
from tests.workloads import _reads_env_at_import as imported

if __name__ == "__main__":
    if imported.RUN_DIR != os.environ["KILLPOINT_RUN_DIR"]:
        sys.exit(f"imported with KILLPOINT_RUN_DIR={imported.RUN_DIR!r}, not this incarnation's")
    sys.exit(main())
