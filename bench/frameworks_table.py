"""The frameworks table: every framework scenario × mode × kill style, measured; writes docs/frameworks.md's table.

    .venv/bin/python bench/frameworks_table.py [--trials 5] [--jobs 2] [--only NAME] [--print]

For each case (a framework, one of its durability modes) it runs ``killpoint run
SCENARIO --exhaustive`` with pausing kills and again with ``--no-pause``, each
``--trials`` times, keeping every run's evidence. A cell is one kill point: how
many times each step ran (``invoked`` lines of the ledger, across the run's
incarnations), the verdict (the properties broken, or pass), and the command that
repeats it. Where the trials disagree (the framework's behaviour depends on
timing) the cell gives each outcome with its frequency, never one trial's answer.
Everything is read from the CLI's JSON report and the runs' ledgers: the table is
what the framework did under real SIGKILLs, nothing is written in from its docs.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "frameworks.md"
KILLPOINT = [sys.executable, "-m", "killpoint"]
BEGIN, END = "<!-- frameworks-table:begin -->", "<!-- frameworks-table:end -->"
PINNED = ("langgraph", "langgraph-checkpoint-sqlite", "dbos")


@dataclass(frozen=True)
class Case:
    """One framework shape in one durability mode: a scenario file, its workload given the mode."""

    framework: str
    mode: str
    scenario: str  # relative to the project root
    workload: str | None = None  # replaces the scenario's workload (the mode's flag), None: the file's own

    @property
    def name(self) -> str:
        return f"{self.framework} {self.mode}"


def _cases(shape: str, stem: str, modes: tuple[str, ...]) -> list[Case]:
    return [Case(shape, mode, f"scenarios/frameworks/{stem}_{mode}.toml") for mode in modes]


CASES: tuple[Case, ...] = (
    *_cases("LangGraph StateGraph", "langgraph_graph", ("sync", "async", "exit", "guarded")),
    *_cases("LangGraph functional", "langgraph_functional", ("sync", "async", "exit", "guarded")),
    Case("DBOS workflow", "steps", "scenarios/frameworks/dbos_workflow.toml"),
    Case("DBOS workflow", "guarded", "scenarios/frameworks/dbos_workflow_guarded.toml"),
)
KILL_STYLES = {"pausing": [], "non-pausing": ["--no-pause"]}


@dataclass(frozen=True)
class Outcome:
    """What one run did: the times each step ran, and the verdict."""

    ran: tuple[tuple[str, int], ...]
    verdict: str

    def ran_text(self) -> str:
        return " · ".join(f"{call} ×{count}" for call, count in self.ran)


def invoked_counts(run_dir: Path, calls: list[str]) -> tuple[tuple[str, int], ...]:
    """Times each planned call was invoked in the run, from its ledger (every incarnation)."""
    counts: Counter[str] = Counter()
    for raw in (run_dir / "ledger.jsonl").read_text(errors="replace").splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict) and "invoked" in record:
            counts[str(record.get("call"))] += 1
    return tuple((call, counts[call]) for call in calls)


def verdict_text(run: dict[str, object]) -> str:
    if run["valid"] is True:
        return "pass"
    if run["valid"] is None:
        return "unknown"
    findings = run["findings"]
    assert isinstance(findings, list)
    return ", ".join(dict.fromkeys(str(finding["property"]) for finding in findings))


def run_session(case: Case, style: list[str], jobs: int, runs_dir: Path) -> tuple[list[str], dict[str, Outcome]]:
    """One exhaustive session of ``case``; the plan's calls, and each first kill's outcome."""
    report = runs_dir / "report.json"
    command = [*KILLPOINT, "run", case.scenario, "--exhaustive", *style, "--keep-all", "-q", "-j", str(jobs),
               "--runs-dir", str(runs_dir / "runs"), "--json", str(report)]
    if case.workload:
        command += ["--workload", case.workload]
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if finished.returncode not in (0, 1) or not report.exists():
        raise SystemExit(f"{case.name}: killpoint exited {finished.returncode}:\n{finished.stderr[-2000:]}")
    data = json.loads(report.read_text())
    plan = json.loads((Path(data["golden"]["run_dir"]) / "plan.json").read_text())
    calls = [call["call_id"] for call in plan["calls"]]
    outcomes = {run["schedule"][0]: Outcome(invoked_counts(Path(run["run_dir"]), calls), verdict_text(run))
                for run in data["runs"] if run["schedule"]}
    return calls, outcomes


def measure(case: Case, trials: int, jobs: int) -> tuple[list[str], dict[str, dict[str, Counter[Outcome]]], float]:
    """Per kill style, per kill point: how often each outcome came, over ``trials`` sessions."""
    cells: dict[str, dict[str, Counter[Outcome]]] = {style: defaultdict(Counter) for style in KILL_STYLES}
    calls: list[str] = []
    started = time.monotonic()
    for style, flags in KILL_STYLES.items():
        for _ in range(trials):
            with tempfile.TemporaryDirectory(prefix="kp-frameworks-") as scratch:
                calls, outcomes = run_session(case, flags, jobs, Path(scratch))
            for point, outcome in outcomes.items():
                cells[style][point.removesuffix("/now")][outcome] += 1
    return calls, cells, time.monotonic() - started


def cell_text(counter: Counter[Outcome], trials: int) -> tuple[str, str]:
    """The steps-ran and verdict columns of one cell; several outcomes each carry their k/N."""
    if len(counter) == 1:
        (outcome,) = counter
        return outcome.ran_text(), outcome.verdict
    parts = sorted(counter.items(), key=lambda item: -item[1])
    return ("<br>".join(f"{count}/{trials}: {outcome.ran_text()}" for outcome, count in parts),
            "<br>".join(f"{count}/{trials}: {outcome.verdict}" for outcome, count in parts))


def table(case: Case, calls: list[str], cells: dict[str, dict[str, Counter[Outcome]]], trials: int,
          seconds: float) -> str:
    lines = [f"### {case.name}", "",
             f"`{case.scenario}`" + (f", workload `{case.workload}`" if case.workload else "")
             + f"; {trials} trial(s) per kill style, {seconds:.0f} s in all.", "",
             "| kill point | kill (pausing, non-pausing or both alike) | steps ran | verdict | repeat it |", "|---|---|---|---|---|"]
    points = sorted({point for style in cells.values() for point in style}, key=_point_order(calls))
    workload = f" --workload '{case.workload}'" if case.workload else ""
    for point in points:
        pausing, non_pausing = (cells[style].get(point) for style in KILL_STYLES)
        rows = ([("both", pausing, point)] if pausing == non_pausing else
                [(style, counter, point + suffix) for (style, counter), suffix
                 in zip(((style, cells[style].get(point)) for style in KILL_STYLES), ("", "/now"))])
        for style, counter, kill in rows:
            if not counter:
                continue
            ran, verdict = cell_text(counter, trials)
            lines.append(f"| `{point}` | {style} | {ran} | {verdict} | "
                         f"`killpoint run {case.scenario}{workload} --kill-at {kill}` |")
    return "\n".join(lines) + "\n"


def _point_order(calls: list[str]) -> Callable[[str], tuple[int, str]]:
    """Kill points in plan order, then by name."""

    def key(point: str) -> tuple[int, str]:
        call = point.partition(":")[0]
        return (calls.index(call) if call in calls else len(calls), point)
    return key


def versions_line() -> str:
    return "Measured with " + ", ".join(f"{name} {version(name)}" for name in PINNED) + "."


def write_doc(text: str) -> None:
    doc = DOC.read_text()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{DOC}: the markers {BEGIN} and {END} are missing")
    head, _, rest = doc.partition(BEGIN)
    _, _, tail = rest.partition(END)
    DOC.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=5, help="sessions per case and kill style (default 5)")
    parser.add_argument("--jobs", type=int, default=2, help="killpoint run -j (default 2)")
    parser.add_argument("--only", help="cases whose name matches this regular expression")
    parser.add_argument("--print", action="store_true", help="print the tables instead of writing docs/frameworks.md")
    args = parser.parse_args()
    sections = [versions_line(), ""]
    for case in CASES:
        if args.only and not re.search(args.only, case.name):
            continue
        calls, cells, seconds = measure(case, args.trials, args.jobs)
        sections.append(table(case, calls, cells, args.trials, seconds))
        print(f"{case.name}: {seconds:.1f} s", file=sys.stderr)
    text = "\n".join(sections)
    if args.print:
        print(text)
    else:
        write_doc(text)


if __name__ == "__main__":
    main()
