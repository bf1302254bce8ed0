"""An agent process SIGKILLed at its seams, for real: the services outlive it, the ledger says what ran.

The reference agent (a plain ``openai`` chat loop with a journal of its own)
is killed with its whole process group at each tool seam of a NON_IDEMPOTENT
call, and restarted; a naive agent (the same loop with no journal) is the
control. The ledger the tool service wrote outside the agent is the ground
truth the verdict will rest on: how often each planned call reached its tool,
and whether a read-only probe came before a repeat.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from killpoint.catalogue import load_catalogue
from killpoint.client import parse_json_lines
from killpoint.fake_tools.world import seed_world
from killpoint.harness.agents.seams import TOOL_EFFECT, TOOL_REPLY, TOOL_REQUEST
from killpoint.harness.agents.services import AgentServices
from killpoint.harness.execute.rendezvous import RendezvousServer
from killpoint.harness.model import AtPoint
from tests.helpers import ROOT

pytestmark = pytest.mark.integration

PLAN = {"task_id": "order", "calls": [
    {"call_id": "c1", "tool": "read_file", "args": {"path": "notes.txt"}},
    {"call_id": "c2", "tool": "append", "args": {"path": "log.txt", "text": "ordered\n"}},
    {"call_id": "c3", "tool": "write_file", "args": {"path": "summary.txt", "content": "done\n"}},
]}
REFERENCE = [sys.executable, "-m", "killpoint.scenarios.agents.reference_agent"]
# The same loop with its journal in a folder each start empties: it remembers nothing across a kill.
NAIVE = [sys.executable, "-c", "import os, shutil, runpy; d = os.environ['KILLPOINT_RUN_DIR']; "
         "shutil.rmtree(d); os.mkdir(d); runpy.run_module('killpoint.scenarios.agents.reference_agent', "
         "run_name='__main__')"]
DEADLINE_S = 120.0


def run_killed_at(tmp_path: Path, agent: list[str], kill: AtPoint) -> tuple[list[dict[str, Any]], Path, list[int]]:
    """Incarnation 0 killed at ``kill``, incarnation 1 run to its end: the ledger, the world, the exit codes."""
    world, ledger, workload = tmp_path / "world", tmp_path / "ledger.jsonl", tmp_path / "workload"
    seed_world(world, {"notes.txt": "2 boxes of tea\n"}, {})
    workload.mkdir()
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    catalogue = load_catalogue(ROOT / "fake_tools" / "catalogue.toml").to_protocol()
    (tmp_path / "catalogue.json").write_text(json.dumps(catalogue))
    server = RendezvousServer(tmp_path / "control.sock")
    services = AgentServices.start(PLAN, world, ledger, server.path)
    codes: list[int] = []
    try:
        for number, this_kill in enumerate((kill, None)):
            services.begin(number)
            env = {**os.environ, **services.environment(), "KILLPOINT_RUN_DIR": str(workload),
                   "KILLPOINT_PLAN": str(tmp_path / "plan.json"), "KILLPOINT_CATALOGUE": str(tmp_path / "catalogue.json")}
            started = time.monotonic()
            agent_process = subprocess.Popen(agent, env=env, cwd=ROOT, start_new_session=True,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            served = server.serve(agent_process.pid, this_kill, started=started, deadline=started + DEADLINE_S)
            if served.hit is not None:
                services.strike()
                os.killpg(agent_process.pid, signal.SIGKILL)
            out, err = agent_process.communicate(timeout=DEADLINE_S)
            server.drop_connections()
            codes.append(agent_process.returncode)
            assert not served.timed_out, err
            assert (served.hit is not None) == (this_kill is not None), (served.points, err)
        return [record for _, record in parse_json_lines(ledger.read_bytes()).records], world, codes
    finally:
        services.close()
        server.close()


def reached_tool(ledger: list[dict[str, Any]], call: str) -> list[int]:
    return [line["incarnation"] for line in ledger if line.get("invoked") and line["call"] == call]


@pytest.mark.parametrize("seam", [TOOL_REQUEST, TOOL_EFFECT, TOOL_REPLY])
def test_the_reference_agent_verifies_an_interrupted_non_idempotent_call_and_never_repeats_its_effect(tmp_path, seam):
    ledger, world, codes = run_killed_at(tmp_path, REFERENCE, AtPoint(seam, "c2"))
    assert codes == [-signal.SIGKILL, 0]
    appended = (world / "files" / "log.txt").read_text() if (world / "files" / "log.txt").exists() else ""
    assert appended == "ordered\n", ledger  # exactly once, whether the kill came before the effect or after
    probes = [line["incarnation"] for line in ledger if line.get("probe") and line["call"] == "c2"]
    # Told the model, which checked read-only before anything else. At tool_reply the agent is not held (the reply
    # is already sent): it may journal the result before the kill lands, and then has nothing to verify.
    assert probes == [1] or (seam == TOOL_REPLY and probes == []), ledger
    assert reached_tool(ledger, "c1") == [0] and reached_tool(ledger, "c3") == [1]
    # Held at its request, c2 reached its tool (the ledger says so) and did nothing; the probe found no effect,
    # so the model asked for it again.
    assert reached_tool(ledger, "c2") == ([0, 1] if seam == TOOL_REQUEST else [0])


def test_an_agent_that_remembers_nothing_repeats_the_effect(tmp_path):
    ledger, world, codes = run_killed_at(tmp_path, NAIVE, AtPoint(TOOL_REPLY, "c2"))
    assert codes == [-signal.SIGKILL, 0]
    assert (world / "files" / "log.txt").read_text() == "ordered\nordered\n"
    assert reached_tool(ledger, "c2") == [0, 1] and reached_tool(ledger, "c1") == [0, 1]
