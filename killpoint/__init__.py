"""killpoint: SIGKILL an agent runtime between its journal's records and judge its recovery.

This package is the one import name killpoint installs. The project's folders
are mapped beneath it (``killpoint.harness``, ``killpoint.scenarios``,
``killpoint.fake_tools``), so a user's own ``harness`` or ``scenarios`` never
collides with them. Beside them live the pieces both sides of the workload
protocol share: :mod:`killpoint.protocol` (names), :mod:`killpoint.client`
(what a workload links against) and :mod:`killpoint.errors` (the error root).

The names below are the public API; everything else may change. They load on
first use, so ``import killpoint`` costs a workload nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

_HOMES = {
    "load_scenario": "killpoint.harness.scenario",
    "Scenario": "killpoint.harness.scenario",
    "Plan": "killpoint.harness.scenario",
    "check": "killpoint.harness.checker",
    "Verdict": "killpoint.harness.model",
    "Finding": "killpoint.harness.model",
    "HarnessError": "killpoint.errors",
    "ConfigError": "killpoint.errors",
    "WorkloadError": "killpoint.errors",
    "InfrastructureError": "killpoint.errors",
}

__all__ = [
    "ConfigError", "Finding", "HarnessError", "InfrastructureError", "Plan", "Scenario", "Verdict",
    "WorkloadError", "__version__", "check", "load_scenario",
]

if TYPE_CHECKING:
    from killpoint.errors import (
        ConfigError,
        HarnessError,
        InfrastructureError,
        WorkloadError,
    )
    from killpoint.harness.checker import check
    from killpoint.harness.model import Finding, Plan, Scenario, Verdict
    from killpoint.harness.scenario import load_scenario


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'killpoint' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
