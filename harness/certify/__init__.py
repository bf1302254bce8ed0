"""Certify a tool's idempotency class by running it: replays, and real SIGKILLs part-way through a call.

``killpoint certify`` is the command (``killpoint.harness.certify.cli``); these are the
values and functions to use it from Python. ``docs/certify.md`` explains the
checks, the adapters for tools outside the project, and the certificates.
The names load on first use, so ``killpoint`` (and the fork server that runs
kill trials) does not import Hypothesis just by importing this package.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "ExternalSpec": "adapters", "external_target": "adapters", "fake_target": "adapters",
    "CONFIRMED": "certificate", "INCONCLUSIVE": "certificate", "REFUTED": "certificate",
    "Certificate": "certificate", "Judgement": "certificate", "judge": "certificate",
    "Claim": "run", "certify": "run", "check_folder": "run", "claims_from_catalogue": "run",
    "Observation": "trials", "SearchResult": "trials", "search": "trials",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'killpoint.harness.certify' has no attribute {name!r}")
    return getattr(importlib.import_module(f"killpoint.harness.certify.{_HOMES[name]}"), name)
