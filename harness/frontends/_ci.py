"""The ``ci`` profile: fixed seeds, no interactive output, every failure with its repro token.

It is the default wherever the ``CI`` environment variable is set (GitHub
Actions, GitLab CI and most others set ``CI=true``). Kept free of imports so
the pytest plugin can consult it without loading the harness.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# The seed of random and timed schedules when CI is set and no seed is given.
CI_SEED = 0


def ci_profile(environ: Mapping[str, str] = os.environ) -> bool:
    """True when ``CI`` is set to anything but empty, 0, false or no."""
    return environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
