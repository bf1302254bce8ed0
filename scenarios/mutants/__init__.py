"""Mutant runtimes: each is the reference runtime with exactly one realistic bug.

Each module says, in its docstring, what the bug is and, in constants, how it is
caught: ``CAUGHT_BY`` the property the checker must name, ``CAUGHT_WITH`` the
cheapest ``killpoint run`` flags that catch it (default ``--exhaustive``), and
``SCENARIO`` the scenario it is run on (default ``demo``). Run one with
``python -m killpoint.scenarios.mutants.NAME`` under killpoint.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    bug: str
    caught_by: str
    caught_with: tuple[str, ...]
    scenario: str

    @property
    def workload(self) -> str:
        return f"{{python}} -m killpoint.scenarios.mutants.{self.name}"


def zoo() -> list[Mutant]:
    """Every mutant in this package, by name."""
    mutants = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        mutants.append(Mutant(info.name, " ".join((module.__doc__ or "").split()), module.CAUGHT_BY,
                              getattr(module, "CAUGHT_WITH", ("--exhaustive",)), getattr(module, "SCENARIO", "demo")))
    return mutants
