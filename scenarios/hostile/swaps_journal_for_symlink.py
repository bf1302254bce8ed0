"""Attack: at its first kill point the runtime swaps its journal for a symlink to a file outside the run.

The path of that file is the first argument. The harness copies the journal
at every kill and tears its last record when asked: as root, following the
link would copy the outside file into the evidence (which the next
incarnation and any reader of the run see) and truncate it. It must refuse
both, and the run, whose journal is gone, cannot be judged.
"""

from __future__ import annotations

import sys

from killpoint import protocol
from killpoint.scenarios.hostile._attack import run_swapping_for_symlink

if __name__ == "__main__":
    sys.exit(run_swapping_for_symlink(lambda env: str(env.run_dir / protocol.JOURNAL_NAME), restore=True))
