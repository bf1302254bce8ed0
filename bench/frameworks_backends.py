"""Benchmark and table: DBOS and LangGraph on SQLite beside the same workflows on PostgreSQL, in one run.

Each pair is one workflow whose store is SQLite in the workload folder or a PostgreSQL server of the harness's
own per run (``[database] postgres = true``), judged ``--exhaustive`` with pausing kills and with ``--no-pause``,
and under ``--power-loss`` where the scenario's last column asks for it. Sessions alternate backend by backend, so
drift in the machine's load falls on both alike. Prints the markdown table docs/frameworks.md and
docs/power-loss.md quote: runs, passed, failed with the rules named, unknown, wall seconds, and the ratio of the
PostgreSQL session's wall time to SQLite's.

    .venv/bin/python bench/frameworks_backends.py [--jobs 2] [--power-loss-sessions 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.frontends.spec import build_spec, run_spec

FRAMEWORKS = Path(__file__).resolve().parent.parent / "scenarios" / "frameworks"
# (what the workflow is, its SQLite scenario, its PostgreSQL scenario)
PAIRS = (
    ("DBOS, guarded", "dbos_workflow_guarded", "dbos_workflow_guarded_postgres"),
    ("DBOS, plain", "dbos_workflow", "dbos_workflow_postgres"),
    ("LangGraph StateGraph sync, guarded", "langgraph_graph_guarded", "langgraph_graph_guarded_postgres"),
    ("LangGraph StateGraph sync, plain", "langgraph_graph_sync", "langgraph_graph_sync_postgres"),
)
KILLS = (("pausing", {}), ("--no-pause", {"no_pause": True}))
# Power losses: PostgreSQL's defaults (several sessions: a finding there is killpoint's or the lazy file system's
# bug), and the two settings that acknowledge a commit before it is durable, beside SQLite's defaults.
POWER_LOSS = (
    ("DBOS, guarded", "dbos_workflow_guarded", True),
    ("DBOS, guarded", "dbos_workflow_guarded_postgres", True),
    ("LangGraph StateGraph sync, guarded", "langgraph_graph_guarded_postgres", True),
    ("DBOS, guarded, synchronous_commit = off", "dbos_workflow_guarded_postgres_async_commit", False),
    ("DBOS, guarded, fsync = off", "dbos_workflow_guarded_postgres_fsync_off", False),
)


@dataclass(frozen=True)
class Tally:
    """One session: its outcomes, the rules its failures name, its wall seconds."""

    outcomes: Counter[str]
    rules: Counter[str]
    seconds: float

    def cells(self) -> str:
        failed = self.outcomes["failed"]
        rules = ", ".join(f"{rule} {count}" for rule, count in sorted(self.rules.items()))
        unknown = f" · {self.outcomes['unknown']} unknown" if self.outcomes["unknown"] else ""
        return (f"{sum(self.outcomes.values())} | {self.outcomes['passed']} | {failed}"
                f"{f' ({rules})' if failed else ''}{unknown} | {self.seconds:.1f} s")


def session(name: str, jobs: int, **options: Any) -> Tally:
    with tempfile.TemporaryDirectory() as runs_dir:
        spec = build_spec(load_scenario(FRAMEWORKS / f"{name}.toml"), exhaustive=True, jobs=jobs,
                          runs_dir=Path(runs_dir), **options)
        started = time.monotonic()
        _, outcomes = run_spec(spec)
        seconds = time.monotonic() - started
    tally: Counter[str] = Counter()
    rules: Counter[str] = Counter()
    for outcome in outcomes:
        tally[{True: "passed", False: "failed", None: "unknown"}[outcome.verdict.valid]] += 1
        rules.update({finding.property for finding in outcome.verdict.findings})
    return Tally(tally, rules, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--power-loss-sessions", type=int, default=3,
                        help="sessions of each workflow that must pass under --power-loss (default 3)")
    args = parser.parse_args()
    print("| workflow | kills | backend | runs | passed | failed (rules) | wall | PostgreSQL / SQLite |")
    print("|---|---|---|---|---|---|---|---|")
    for label, on_sqlite, on_postgres in PAIRS:
        for kills, options in KILLS:
            sqlite, postgres = session(on_sqlite, args.jobs, **options), session(on_postgres, args.jobs, **options)
            print(f"| {label} | {kills} | SQLite | {sqlite.cells()} | |", flush=True)
            print(f"| {label} | {kills} | PostgreSQL | {postgres.cells()} | {postgres.seconds / sqlite.seconds:.2f} |",
                  flush=True)
    print()
    print("| workflow | scenario | sessions | runs | passed | failed (rules) | wall, each |")
    print("|---|---|---|---|---|---|---|")
    for label, name, repeated in POWER_LOSS:
        tallies = [session(name, args.jobs, power_loss=True)
                   for _ in range(args.power_loss_sessions if repeated else 1)]
        outcomes = sum((tally.outcomes for tally in tallies), Counter())
        rules = sum((tally.rules for tally in tallies), Counter())
        total = Tally(outcomes, rules, 0.0).cells().rsplit(" | ", 1)[0]
        print(f"| {label} | `{name}` | {len(tallies)} | {total} | "
              f"{', '.join(f'{tally.seconds:.1f} s' for tally in tallies)} |", flush=True)


if __name__ == "__main__":
    main()
