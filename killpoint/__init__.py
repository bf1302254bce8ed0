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
    "load_scenario": "killpoint.harness.config.scenario",
    "Scenario": "killpoint.harness.model",
    "Plan": "killpoint.harness.model",
    "read_evidence": "killpoint.harness.judge.evidence",
    "Evidence": "killpoint.harness.judge.evidence",
    "GoldenRun": "killpoint.harness.model",
    "check": "killpoint.harness.judge.checker",
    "Verdict": "killpoint.harness.model",
    "Finding": "killpoint.harness.model",
    "RunOutcome": "killpoint.harness.model",
    "RunPaths": "killpoint.harness.layout",
    "HarnessError": "killpoint.errors",
    "ConfigError": "killpoint.errors",
    "WorkloadError": "killpoint.errors",
    "InfrastructureError": "killpoint.errors",
}

# Held by tests/test_public_api.py: a name added here is a promise, one removed a breaking change.
__all__ = [
    "ConfigError", "Evidence", "Finding", "GoldenRun", "HarnessError", "InfrastructureError", "Plan", "RunOutcome",
    "RunPaths", "Scenario", "Verdict", "WorkloadError", "__version__", "check", "load_scenario", "read_evidence",
]

if TYPE_CHECKING:
    from killpoint.errors import ConfigError, HarnessError, InfrastructureError, WorkloadError
    from killpoint.harness.config.scenario import load_scenario
    from killpoint.harness.judge.checker import check
    from killpoint.harness.judge.evidence import Evidence, read_evidence
    from killpoint.harness.layout import RunPaths
    from killpoint.harness.model import Finding, GoldenRun, Plan, RunOutcome, Scenario, Verdict


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'killpoint' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
