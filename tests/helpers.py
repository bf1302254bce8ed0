"""Paths and small values shared by the tests."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "scenarios" / "demo.toml"
WORKLOADS = Path(__file__).resolve().parent / "workloads"
MUTANTS = ("replays_succeeded", "retry_non_idempotent", "finished_before_tool")


@dataclass
class CliResult:
    exit_code: int
    out: str
    err: str


def workload_command(name: str) -> str:
    """The command that runs tests/workloads/NAME with this interpreter."""
    return f"{sys.executable} {WORKLOADS / name}"


def mutant_workload(name: str) -> str:
    return f"{{python}} -m killpoint.scenarios.mutants.{name}"
