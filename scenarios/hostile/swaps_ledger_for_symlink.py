"""Attack: at its first kill point the runtime swaps its ledger for a symlink to a file outside the run.

The path of that file is the first argument. The harness appends its kill
marker to the ledger after every kill: as root, following the link would write
into the outside file. It must refuse, say so, and judge the run unknown (the
marker that splits the ledger at the kill is missing), never crash or pass.
What the workload's own tools then write through the link is the workload's
doing; the harness's marker must never reach the outside file.
"""

from __future__ import annotations

import sys

from killpoint.scenarios.hostile._attack import run_swapping_for_symlink

if __name__ == "__main__":
    sys.exit(run_swapping_for_symlink(lambda env: str(env.ledger_path), restore=False))
