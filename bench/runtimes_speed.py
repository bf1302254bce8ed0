"""What a runtime a user brings costs beside the reference runtime: the same sweep, timed in one bench run.

    .venv/bin/python bench/runtimes_speed.py [--rounds 3] [--jobs 2] [--write docs/performance.md]

Each session is a ``killpoint run ... --exhaustive`` of the demo's order task (six calls, every class, 30
schedules at depth 1): killpoint's reference runtime (the baseline), the standalone runtime (plain Python
with no killpoint import; both forked from a warm interpreter) and the Node.js agent of scenarios/foreign/,
each calling the fake tools at the harness's tool service (``$KILLPOINT_TOOLS_URL``) and through their
command line (a Python start per call). The sessions run in rounds, interleaved, so drift in the machine's
load falls on all alike; each row gives the median wall time, its ratio to the reference runtime's, and
the floor a runtime's own start sets: how many incarnations the session launched, times what one start of
its interpreter costs here (measured alone), over the jobs.

A second table does the same for the frameworks as a user writes them: the shop's LangGraph graph and DBOS
workflow (scenarios/frameworks/examples), each run as the shipped ``-m`` module and as a script of the
user's own (the module copied out of the package, its one relative import made absolute, run as
``{python} my_shop.py``). Those sweeps find the shop's planted bug, so their verdict line is shown: it
must be the same for both forms. Beside them, the unmodified agents of scenarios/agents (the OpenAI Agents
SDK's, LangGraph's prebuilt ReAct agent and Pydantic AI's, on killpoint's scripted model), whose sweeps find
the tools their SDKs run again (how many varies from session to session: docs/agents.md). With ``--write``
the tables replace what stands between their markers.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KILLPOINT = ROOT / ".venv" / "bin" / "killpoint"
STANDALONE = f"{{python}} {ROOT / 'scenarios' / 'standalone' / 'runtime.py'}"
MARKERS = {"runtimes": ("<!-- runtimes-table:start -->", "<!-- runtimes-table:end -->"),
           "frameworks": ("<!-- framework-scripts-table:start -->", "<!-- framework-scripts-table:end -->")}
EXAMPLES = ROOT / "scenarios" / "frameworks" / "examples"
AGENTS = ROOT / "scenarios" / "agents"


@dataclass(frozen=True)
class Session:
    label: str
    scenario: str
    workload: str | None  # None: the scenario's own
    start_command: tuple[str, ...]  # one start of the runtime's interpreter, for its floor


SESSIONS = (
    # Python workloads run on the fork server (forked from a warm interpreter): no interpreter start to floor them.
    Session("reference runtime", "scenarios/demo.toml", None, ()),
    Session("standalone Python runtime, tool service", "scenarios/demo.toml", STANDALONE, ()),
    Session("standalone Python runtime, tools' command line", "scenarios/demo.toml", f"{STANDALONE} --tools-command",
            ()),
    Session("Node.js agent, tool service", "scenarios/foreign/order.toml", None,
            ("node", "-e", "require('http'); require('net'); require('fs')")),
    Session("Node.js agent, tools' command line", "scenarios/foreign/order.toml", "node agent.js --python {python}",
            ("node", "-e", "require('http'); require('net'); require('fs')")),
)


def sweep(session: Session, jobs: int, *, findings: bool = False) -> tuple[float, int, str]:
    """One exhaustive session: its wall seconds, how many incarnations it launched (golden run included; one a
    run shares, started by another, is counted once) and
    its verdict line; ``findings``: the session finds a bug on purpose (exit 1), else it must pass."""
    with tempfile.TemporaryDirectory(prefix="kp-runtimes-") as folder:
        report = Path(folder) / "report.json"
        workload = ("--workload", session.workload) if session.workload else ()
        started = time.perf_counter()
        done = subprocess.run([str(KILLPOINT), "run", session.scenario, "--exhaustive", "-j", str(jobs), "-q",
                               *workload, "--runs-dir", f"{folder}/runs", "--json", str(report)],
                              cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if done.returncode != (1 if findings else 0):
            sys.exit(f"{session.label}: killpoint exited {done.returncode}\n{done.stdout}{done.stderr}")
        runs = json.loads(report.read_text())["runs"]
    verdicts = next((line for line in done.stdout.splitlines() if " runs: " in line), "")
    launched = 1 + sum(len(run["incarnations"]) - run["shared_incarnations"] for run in runs)
    return seconds, launched, verdicts.split(" in ")[0]


def user_scripts(folder: Path) -> tuple[Session, ...]:
    """The shop's framework examples, shipped and as a user's own scripts written into ``folder``."""
    sessions = []
    for example, framework in (("shop_graph", "LangGraph graph"), ("shop_dbos", "DBOS workflow")):
        source = (EXAMPLES / f"{example}.py").read_text()
        script = folder / f"my_{example}.py"
        script.write_text(source.replace("from .shop_tools import",
                                         "from killpoint.scenarios.frameworks.examples.shop_tools import"))
        scenario = folder / f"my_{example}.toml"
        scenario.write_text(re.sub(r'(?m)^catalogue = "catalogue.toml"$', f'catalogue = "{EXAMPLES / "catalogue.toml"}"',
                                   (EXAMPLES / f"{example}.toml").read_text()))
        sessions += [Session(f"{framework}, shipped module (-m)", str(EXAMPLES / f"{example}.toml"), None, ()),
                     Session(f"{framework}, a user's script", str(scenario), f"{{python}} {script}", ())]
    return tuple(sessions)


AGENT_SESSIONS = tuple(Session(label, str(AGENTS / f"{name}.toml"), None, ()) for label, name in (
    ("OpenAI Agents SDK agent", "openai_agents_sdk"),
    ("LangGraph prebuilt ReAct agent", "langgraph_prebuilt"),
    ("Pydantic AI agent", "pydantic_ai_agent"),
))


def start_seconds(command: tuple[str, ...], times: int = 10) -> float:
    """The median wall time of one start of ``command`` (an interpreter loading what the runtime imports)."""
    if not command:
        return 0.0
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        subprocess.run(command, check=True)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def timed(sessions: tuple[Session, ...], rounds: int, jobs: int, *, findings: bool = False,
          ) -> tuple[dict[str, list[float]], dict[str, int], dict[str, str]]:
    """Every session ``rounds`` times, interleaved: seconds per round, incarnations and verdict line of each."""
    seconds: dict[str, list[float]] = {session.label: [] for session in sessions}
    incarnations: dict[str, int] = {}
    verdicts: dict[str, str] = {}
    for _ in range(rounds):
        for session in sessions:
            wall, incarnations[session.label], verdicts[session.label] = sweep(session, jobs, findings=findings)
            seconds[session.label].append(wall)
    return seconds, incarnations, verdicts


def runtimes_table(rounds: int, jobs: int) -> str:
    sessions = tuple(session for session in SESSIONS
                     if not session.start_command or shutil.which(session.start_command[0]))
    seconds, incarnations, _ = timed(sessions, rounds, jobs)
    baseline = statistics.median(seconds[sessions[0].label])
    lines = [f"Exhaustive depth 1 of the order task (30 schedules), -j {jobs}, median of {rounds} interleaved rounds:",
             "", "| runtime | wall s | × reference | incarnations | floor of its starts, s |", "|---|---:|---:|---:|---:|"]
    for session in sessions:
        median = statistics.median(seconds[session.label])
        floor = incarnations[session.label] * start_seconds(session.start_command) / jobs
        lines.append(f"| {session.label} | {median:.2f} | {median / baseline:.1f} | {incarnations[session.label]} "
                     f"| {floor:.2f} |")
    return "\n".join(lines)


def frameworks_table(rounds: int, jobs: int) -> str:
    with tempfile.TemporaryDirectory(prefix="kp-user-scripts-") as folder:
        sessions = user_scripts(Path(folder)) + AGENT_SESSIONS
        seconds, _, verdicts = timed(sessions, rounds, jobs, findings=True)
    lines = [f"The shop's framework examples and the agents of scenarios/agents, `--exhaustive`, -j {jobs}, "
             f"median of {rounds} interleaved rounds:", "",
             "| workload | wall s | verdicts |", "|---|---:|---|"]
    lines += [f"| {session.label} | {statistics.median(seconds[session.label]):.2f} | {verdicts[session.label]} |"
              for session in sessions]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--write", type=Path, help="replace the table between the markers in this file")
    args = parser.parse_args()
    tables = {"runtimes": runtimes_table(args.rounds, args.jobs), "frameworks": frameworks_table(args.rounds, args.jobs)}
    print("\n\n".join(tables.values()))
    if args.write is not None:
        document = args.write.read_text()
        for name, text in tables.items():
            start, end = MARKERS[name]
            if start not in document or end not in document:
                sys.exit(f"{args.write}: no {start} ... {end} markers to write the {name} table between")
            document = re.sub(f"{re.escape(start)}.*?{re.escape(end)}", lambda _: f"{start}\n{text}\n{end}",
                              document, flags=re.S)
        args.write.write_text(document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
