"""Benchmark: what users bring, in two checkouts (today's main and the new code), interleaved, in one run.

    .venv/bin/python bench/user_workloads.py BEFORE_DIR AFTER_DIR [--rounds 2] [--jobs 2] [--only LABEL]

Each checkout needs its own venv (``DIR/.venv``, set up as the README says); its bytecode caches are removed
first, so both start cold. The workloads (issue 33's list):

- the demo's exhaustive depth-1 sweep with killpoint's reference runtime (also the baseline of the next ratio);
- the same order task run by the Node.js agent of scenarios/foreign/ (its own store, the tool service);
- the shop's LangGraph graph and DBOS workflow (scenarios/frameworks/examples) as a user's own scripts
  (``{python} my_shop_graph.py``), ``--exhaustive``: they find the shop's planted bug, so they exit 1;
- ``killpoint certify --mcp`` of a 9-tool stdio server started with npx (``@modelcontextprotocol/server-memory``,
  its state file in the world), every tool at the default draws, seed 0.

Each workload runs ``--rounds`` times in each checkout, alternating, so drift in the machine's load falls on
both alike. Printed per workload: the median wall seconds of each checkout, after / before, and whether the
verdicts (the summary line, or every certificate's verdict) are the same in both.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench_certify import MEMORY_FLAGS
from compare_checkouts import drop_bytecode

EXAMPLES = Path("scenarios") / "frameworks" / "examples"


@dataclass(frozen=True)
class Workload:
    label: str
    arguments: tuple[str, ...]  # killpoint's, run in the checkout; {scripts} is the folder of the users' scripts
    exit_codes: tuple[int, ...]  # what a correct session exits with
    evidence_flag: str = "--runs-dir"  # where the session's files go, in a folder of its own


WORKLOADS = (
    Workload("demo, reference runtime, exhaustive depth 1",
             ("run", "scenarios/demo.toml", "--exhaustive", "--depth", "1", "-q"), (0,)),
    Workload("order task, Node.js agent, exhaustive",
             ("run", "scenarios/foreign/order.toml", "--exhaustive", "-q"), (0,)),
    Workload("LangGraph graph, a user's script, exhaustive",
             ("run", "{scripts}/my_shop_graph.toml", "--workload", "{python} {scripts}/my_shop_graph.py",
              "--exhaustive", "-q"), (1,)),
    Workload("DBOS workflow, a user's script, exhaustive",
             ("run", "{scripts}/my_shop_dbos.toml", "--workload", "{python} {scripts}/my_shop_dbos.py",
              "--exhaustive", "-q"), (1,)),
    Workload("certify --mcp, 9-tool stdio server (npx), default draws",
             ("certify", *MEMORY_FLAGS, "--seed", "0"),
             (0, 3), "--out"),
)


def write_user_scripts(checkout: Path, folder: Path) -> None:
    """The shop's examples as a user writes them: the module copied out of the package, its relative import made
    absolute, beside a scenario naming the shipped catalogue (as bench/runtimes_speed.py does)."""
    examples = checkout / EXAMPLES
    for example in ("shop_graph", "shop_dbos"):
        source = (examples / f"{example}.py").read_text()
        (folder / f"my_{example}.py").write_text(
            source.replace("from .shop_tools import", "from killpoint.scenarios.frameworks.examples.shop_tools import"))
        (folder / f"my_{example}.toml").write_text(re.sub(
            r'(?m)^catalogue = "catalogue.toml"$', f'catalogue = "{examples / "catalogue.toml"}"',
            (examples / f"{example}.toml").read_text()))


def verdicts(workload: Workload, stdout: str, out: Path) -> str:
    """What the session decided: a run's summary line, or certify's tools and their verdicts."""
    if workload.evidence_flag == "--out":
        certificates = sorted(out.glob("*.json"))
        return "; ".join(f"{path.stem}: {json.loads(path.read_text()).get('verdict')}" for path in certificates)
    line = next((line for line in stdout.splitlines() if " runs: " in line), "")
    return line.split(" in ")[0]


def timed(checkout: Path, workload: Workload, jobs: int, scripts: Path) -> tuple[float, str]:
    arguments = [argument.replace("{scripts}", str(scripts)) for argument in workload.arguments]
    if arguments[0] == "run":
        arguments += ["-j", str(jobs)]
    with tempfile.TemporaryDirectory(prefix="kp-user-bench-") as folder:
        out = Path(folder) / "out"
        started = time.perf_counter()
        done = subprocess.run([str(checkout / ".venv" / "bin" / "killpoint"), *arguments, workload.evidence_flag,
                               str(out)], cwd=checkout, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if done.returncode not in workload.exit_codes:
            sys.exit(f"{checkout}: {workload.label}: exited {done.returncode}:\n{done.stdout[-2000:]}"
                     f"{done.stderr[-2000:]}")
        return seconds, verdicts(workload, done.stdout, out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="", help="run only the workloads whose label holds this")
    args = parser.parse_args()
    checkouts = (args.before.resolve(), args.after.resolve())
    for checkout in checkouts:
        drop_bytecode(checkout)
    chosen = [workload for workload in WORKLOADS if args.only in workload.label]
    seconds: dict[tuple[Path, str], list[float]] = {(checkout, workload.label): [] for checkout in checkouts
                                                    for workload in chosen}
    decided: dict[tuple[Path, str], set[str]] = {key: set() for key in seconds}
    with tempfile.TemporaryDirectory(prefix="kp-user-scripts-") as folder:
        scripts = {checkout: Path(folder) / str(number) for number, checkout in enumerate(checkouts)}
        for checkout, where in scripts.items():
            where.mkdir()
            write_user_scripts(checkout, where)
        for _ in range(args.rounds):
            for workload in chosen:
                for checkout in checkouts:
                    wall, verdict = timed(checkout, workload, args.jobs, scripts[checkout])
                    seconds[checkout, workload.label].append(wall)
                    decided[checkout, workload.label].add(verdict)
    print(f"before {checkouts[0]}, after {checkouts[1]}; {args.rounds} rounds, interleaved, -j {args.jobs}\n")
    print("| workload | before s | after s | after / before | verdicts the same |")
    print("|---|---:|---:|---:|---|")
    for workload in chosen:
        before, after = (statistics.median(seconds[checkout, workload.label]) for checkout in checkouts)
        same = decided[checkouts[0], workload.label] == decided[checkouts[1], workload.label]
        print(f"| {workload.label} | {before:.2f} | {after:.2f} | {after / before:.2f} | "
              f"{'yes' if same else 'NO: ' + ' / '.join(' | '.join(sorted(decided[checkout, workload.label])) for checkout in checkouts)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
