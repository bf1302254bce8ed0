"""Benchmark and check: every sweep judged alike with shared prefixes and held points (the default) and without.

Each case is one ``killpoint run ... --exhaustive`` session run twice, as is and
with ``--no-share-prefixes``; every run of the two must reach the same points, be
killed at the same points and get the same verdict (outcome, rules, findings,
unreached calls). Prints, per case, the runs, how many were judged differently,
the incarnations each session started, and both wall times.

    .venv/bin/python bench/sharing_verdicts.py [--jobs 2] [--only SUBSTRING] [--quick]

``--quick`` runs the depth-1 cases only. Exit 1 if any case was judged differently.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KILLPOINT = ROOT / ".venv" / "bin" / "killpoint"
DEMO = "scenarios/demo.toml"
MUTANTS = sorted(path.stem for path in (ROOT / "scenarios" / "mutants").glob("*.py") if path.stem != "__init__")


def cases(quick: bool) -> list[tuple[str, tuple[str, ...]]]:
    """(name, the session's arguments) of every case compared."""
    found: list[tuple[str, tuple[str, ...]]] = [
        ("demo, reference runtime", (DEMO,)),
        ("demo, reference runtime, torn tails", (DEMO, "--torn-tail")),
        ("restock, reference runtime", ("scenarios/restock.toml",)),
        ("order task, Node.js runtime", ("scenarios/foreign/order.toml",)),
        ("SQLite-journal runtime", ("scenarios/sqlite_journal/short.toml",)),
        ("DBOS workflow, guarded", ("scenarios/frameworks/dbos_workflow_guarded.toml",)),
        ("DBOS workflow, plain", ("scenarios/frameworks/dbos_workflow.toml",)),
    ]
    found += [(f"demo, mutant {name}", (DEMO, "--workload", f"{{python}} -m killpoint.scenarios.mutants.{name}"))
              for name in MUTANTS]
    if not quick:
        found += [("demo, reference runtime, depth 2", (DEMO, "--depth", "2")),
                  ("demo, reference runtime, depth 2, torn tails", (DEMO, "--depth", "2", "--torn-tail"))]
    return found


def session(arguments: tuple[str, ...], jobs: int, folder: Path, *flags: str) -> tuple[dict, float, int]:
    """{schedule: run} of one session, its wall seconds, and the incarnations its runs started."""
    report = folder / "report.json"
    started = time.perf_counter()
    subprocess.run([str(KILLPOINT), "run", *arguments, "--exhaustive", "-j", str(jobs), "-q", *flags,
                    "--runs-dir", str(folder / "runs"), "--json", str(report)], cwd=ROOT, capture_output=True)
    seconds = time.perf_counter() - started
    runs = json.loads(report.read_text())["runs"]
    started_here = sum(len(run["incarnations"]) - run["shared_incarnations"] for run in runs)
    return {tuple(run["schedule"]): run for run in runs}, seconds, started_here


def judged(run: dict) -> tuple:
    return (run["outcome"], run["rules"], [(finding["property"], finding["call"]) for finding in run["findings"]],
            run["unreached"], [(incarnation["killed_at"], incarnation["points"], incarnation["exit_code"])
                               for incarnation in run["incarnations"]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print("| case | runs | judged differently | incarnations shared / alone | s shared | s alone |")
    print("|---|---:|---:|---|---:|---:|")
    differing_cases = 0
    for name, arguments in cases(args.quick):
        if args.only not in name:
            continue
        with tempfile.TemporaryDirectory(prefix="kp-sharing-") as folder:
            (Path(folder) / "a").mkdir()
            (Path(folder) / "b").mkdir()
            shared, shared_s, shared_started = session(arguments, args.jobs, Path(folder) / "a")
            alone, alone_s, alone_started = session(arguments, args.jobs, Path(folder) / "b", "--no-share-prefixes")
        differ = sum(1 for schedule in shared.keys() | alone.keys()
                     if schedule not in shared or schedule not in alone
                     or judged(shared[schedule]) != judged(alone[schedule]))
        differing_cases += bool(differ)
        print(f"| {name} | {len(shared)} | {differ} | {shared_started} / {alone_started} | {shared_s:.2f} | "
              f"{alone_s:.2f} |", flush=True)
    return 1 if differing_cases else 0


if __name__ == "__main__":
    sys.exit(main())
