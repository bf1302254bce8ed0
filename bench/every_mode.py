"""False alarms across every mode: correct runtimes in the sessions the soak's random draws do not reach.

    .venv/bin/python bench/every_mode.py [--jobs 2] [--only SUBSTRING]

``bench/soak.py`` draws random schedules (torn tails and timed kills mixed in) and hunt plans (catalogue
drift, repeated calls, a second kill during recovery). This bench runs, as ``killpoint run`` would, the
sessions a user starts by flag: exhaustive sweeps to depth 2 with and without torn tails, ``--no-pause``,
``--power-loss``, ``--drift``, ``--backend docker``, a runtime judged black-box from its SQLite store, the
standalone and Node.js runtimes that share no code with killpoint, the guarded framework workflows and the
reference agent at its network seams (its tools the fake tools', or a real MCP server's behind the recording
proxy). Every one is a correct runtime, so every failing run is a harness false alarm; an *unknown* run is
counted apart (the harness said it could not tell, which is no false alarm, but worth a look). A session that
needs what this machine lacks (FUSE, a Docker engine, node, the npm MCP server) is listed with the reason and
not counted. Prints one line per session and the totals; exits 1 on any false alarm.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from killpoint.errors import ConfigError
from killpoint.harness.backends import _engine
from killpoint.harness.config.scenario import load_scenario, with_workload
from killpoint.harness.databases import postgres
from killpoint.harness.faults.lazyfs import LazyFsUnavailable, probe
from killpoint.harness.frontends.spec import build_spec, run_spec

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
STANDALONE = f"{{python}} {SCENARIOS / 'standalone' / 'runtime.py'}"
NPM_SERVER = ROOT / "build" / "npm" / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"


@dataclass(frozen=True)
class Session:
    """One ``killpoint run`` of a correct runtime: its scenario file and the flags, as build_spec's keywords."""

    label: str
    scenario: str
    options: dict[str, Any] = field(default_factory=dict)
    needs: str = ""  # "fuse", "docker", "node", "npm server" or "postgres": what the machine must have

    def command(self) -> str:
        """The ``killpoint run`` command line this session stands for."""
        flags = []
        for name, value in self.options.items():
            flag = "--" + name.replace("_", "-")
            flags.append(flag if value is True else f"{flag} {value}")
        return " ".join(["killpoint run", self.scenario, *flags])


SESSIONS = (
    Session("depth 2", "scenarios/demo.toml", {"exhaustive": True, "depth": 2}),
    Session("depth 2, torn tails", "scenarios/demo.toml", {"exhaustive": True, "depth": 2, "torn_tail": True}),
    Session("depth 2, 25 calls", "scenarios/restock.toml", {"exhaustive": True, "depth": 2}),
    Session("no pause, depth 2", "scenarios/checkout.toml", {"exhaustive": True, "depth": 2, "no_pause": True}),
    Session("timed kills", "scenarios/refund.toml", {"timed": True, "runs": 40, "seed": 1}),
    Session("drift to NON_IDEMPOTENT", "scenarios/demo.toml",
            {"exhaustive": True, "drift": "write_file=NON_IDEMPOTENT"}),
    Session("drift to IDEMPOTENT_WRITE", "scenarios/demo.toml", {"exhaustive": True, "drift": "ui_tap=IDEMPOTENT_WRITE"}),
    Session("power loss, depth 2", "scenarios/demo.toml", {"exhaustive": True, "depth": 2, "power_loss": True},
            needs="fuse"),
    Session("SQLite store, depth 2", "scenarios/sqlite_journal/short.toml", {"exhaustive": True, "depth": 2}),
    Session("SQLite store, power loss", "scenarios/sqlite_journal/short.toml", {"exhaustive": True, "power_loss": True},
            needs="fuse"),
    Session("standalone runtime, tools' command line", "scenarios/demo.toml",
            {"exhaustive": True, "workload": f"{STANDALONE} --tools-command"}),
    # The standalone runtime calls the harness's tool service: after_effect is the service's, outside the tree.
    Session("standalone runtime, depth 2, torn tails", "scenarios/demo.toml",
            {"exhaustive": True, "depth": 2, "torn_tail": True, "workload": STANDALONE}),
    Session("standalone runtime, no pause, depth 2", "scenarios/checkout.toml",
            {"exhaustive": True, "depth": 2, "no_pause": True, "workload": STANDALONE}),
    Session("standalone runtime, timed kills", "scenarios/refund.toml",
            {"timed": True, "runs": 40, "seed": 1, "workload": STANDALONE}),
    Session("standalone runtime, drift", "scenarios/demo.toml",
            {"exhaustive": True, "drift": "write_file=NON_IDEMPOTENT", "workload": STANDALONE}),
    Session("standalone runtime, power loss", "scenarios/demo.toml",
            {"exhaustive": True, "power_loss": True, "workload": STANDALONE}, needs="fuse"),
    Session("standalone runtime, docker, depth 2", "scenarios/demo.toml",
            {"exhaustive": True, "depth": 2, "backend": "docker", "workload": STANDALONE}, needs="docker"),
    Session("Node.js runtime, no pause", "scenarios/foreign/order.toml", {"exhaustive": True, "no_pause": True},
            needs="node"),
    Session("Node.js runtime, depth 2", "scenarios/foreign/short.toml", {"exhaustive": True, "depth": 2}, needs="node"),
    Session("docker, depth 2", "scenarios/demo.toml", {"exhaustive": True, "depth": 2, "backend": "docker"},
            needs="docker"),
    Session("LangGraph graph, guarded", "scenarios/frameworks/langgraph_graph_guarded.toml", {"exhaustive": True}),
    Session("LangGraph functional, guarded", "scenarios/frameworks/langgraph_functional_guarded.toml",
            {"exhaustive": True}),
    Session("DBOS, guarded and durable", "scenarios/frameworks/dbos_workflow_guarded_durable.toml", {"exhaustive": True}),
    # The same frameworks on PostgreSQL, a server of the harness's own per run, its defaults.
    Session("DBOS on PostgreSQL, guarded", "scenarios/frameworks/dbos_workflow_guarded_postgres.toml",
            {"exhaustive": True}, needs="postgres"),
    Session("DBOS on PostgreSQL, guarded, no pause", "scenarios/frameworks/dbos_workflow_guarded_postgres.toml",
            {"exhaustive": True, "no_pause": True}, needs="postgres"),
    Session("DBOS on PostgreSQL, guarded, power loss", "scenarios/frameworks/dbos_workflow_guarded_postgres.toml",
            {"exhaustive": True, "power_loss": True}, needs="postgres"),
    Session("LangGraph on PostgreSQL, guarded, depth 2", "scenarios/frameworks/langgraph_graph_guarded_postgres.toml",
            {"exhaustive": True, "depth": 2}, needs="postgres"),
    Session("LangGraph on PostgreSQL, guarded, power loss, random",
            "scenarios/frameworks/langgraph_graph_guarded_postgres.toml", {"random": 30, "seed": 11, "power_loss": True},
            needs="postgres"),
    Session("reference agent", "scenarios/agents/reference_agent.toml", {"exhaustive": True}),
    Session("reference agent, depth 2", "scenarios/agents/one_append.toml", {"exhaustive": True, "depth": 2}),
    Session("reference agent, no pause", "scenarios/agents/reference_agent.toml", {"exhaustive": True, "no_pause": True}),
    # A call chosen in one incarnation and run in the next, handed a drifted catalogue (a soak's false alarm once).
    Session("reference agent, depth 2, drift", "scenarios/agents/reference_agent.toml",
            {"exhaustive": True, "depth": 2, "drift": "write_file=NON_IDEMPOTENT"}),
    Session("reference agent, depth 2, no pause", "scenarios/agents/one_append.toml",
            {"exhaustive": True, "depth": 2, "no_pause": True}),
    Session("reference agent, own tools, depth 2", "scenarios/agents/shop_tools.toml", {"exhaustive": True, "depth": 2}),
    Session("reference agent, power loss", "scenarios/agents/reference_agent.toml",
            {"exhaustive": True, "power_loss": True}, needs="fuse"),
    Session("reference agent, docker", "scenarios/agents/reference_agent.toml",
            {"exhaustive": True, "backend": "docker"}, needs="docker"),
    # Its tools from a real MCP server (the npm filesystem server) behind the recording proxy, held at tool_opened.
    Session("reference agent, MCP server behind the proxy, depth 2", "scenarios/agents/reference_agent_mcp_proxy.toml",
            {"exhaustive": True, "depth": 2}, needs="npm server"),
    Session("reference agent, MCP server behind the proxy, no pause",
            "scenarios/agents/reference_agent_mcp_proxy.toml", {"exhaustive": True, "no_pause": True},
            needs="npm server"),
    # Its tools from a real MCP server over streamable HTTP, which the harness runs outside the agent's tree.
    Session("reference agent, MCP server over HTTP, depth 2", "scenarios/agents/reference_agent_mcp_http.toml",
            {"exhaustive": True, "depth": 2}),
)


def missing(need: str) -> str | None:
    """Why this machine cannot run a session that needs ``need``, or None."""
    if need == "node":
        return None if shutil.which("node") else "no node on PATH"
    if need == "postgres":
        try:
            postgres.binaries()
            probe()  # its power-loss session needs FUSE too
        except (LazyFsUnavailable, ConfigError) as error:
            return str(error)
        return None
    if need == "npm server":
        return None if shutil.which("node") and NPM_SERVER.is_file() else "no node, or no npm MCP server: run " \
                                                                          "ci/install-mcp-servers"
    try:
        if need == "fuse":
            probe()
        elif need == "docker":
            _engine.connect().close()
    except (LazyFsUnavailable, ConfigError) as error:
        return str(error)
    return None


def run(session: Session, jobs: int, runs_dir: Path) -> Counter[str]:
    """The session's runs counted by outcome: passed, failed (false alarms), unknown."""
    options = dict(session.options)
    workload = options.pop("workload", None)
    scenario = load_scenario(ROOT / session.scenario)
    if workload is not None:
        scenario = with_workload(scenario, workload)
    spec = build_spec(scenario, jobs=jobs, runs_dir=runs_dir, **options)
    _, outcomes = run_spec(spec)
    tally: Counter[str] = Counter()
    for outcome in outcomes:
        tally[{True: "passed", False: "failed", None: "unknown"}[outcome.verdict.valid]] += 1
        if outcome.verdict.valid is False:
            print(f"  FALSE ALARM: killpoint repro {outcome.token}", flush=True)
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="", help="run only the sessions whose label contains this text")
    args = parser.parse_args()
    runs_dir = Path(tempfile.mkdtemp(prefix="killpoint-every-mode-"))
    totals: Counter[str] = Counter()
    started = time.monotonic()
    for number, session in enumerate(session for session in SESSIONS if args.only in session.label):
        why = missing(session.needs)
        if why is not None:
            print(f"{session.label:<32} not run: {why}", flush=True)
            continue
        begun = time.monotonic()
        tally = run(session, args.jobs, runs_dir / str(number))
        totals += tally
        print(f"{session.label:<32} {sum(tally.values()):>5} runs  {tally['failed']} false alarms  "
              f"{tally['unknown']} unknown  {time.monotonic() - begun:6.1f}s   {session.command()}", flush=True)
    print(f"every mode: {sum(totals.values())} runs of correct runtimes, {totals['failed']} false alarms, "
          f"{totals['unknown']} unknown, {time.monotonic() - started:.0f}s wall")
    if totals["failed"] or totals["unknown"]:
        print(f"evidence kept in {runs_dir}")
    else:
        shutil.rmtree(runs_dir)
    return 1 if totals["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
