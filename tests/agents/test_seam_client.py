"""The services announce an agent's seams on the run's real rendezvous server, and a kill ends a held request."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from killpoint.client import ArmedPoints
from killpoint.harness.agents.seam_client import SeamClient
from killpoint.harness.agents.seams import MODEL_REQUEST, TOOL_EFFECT, TOOL_REQUEST, AgentKilled
from killpoint.harness.execute.rendezvous import RendezvousServer, Served
from killpoint.harness.model import AtPoint
from killpoint.protocol import AFTER_EFFECT

pytestmark = pytest.mark.integration  # a stand-in agent process, whose pid the server watches


@pytest.fixture
def agent():
    """A process standing in for the agent: the server watches its pid; the services are not in its tree."""
    process = subprocess.Popen(["sleep", "600"])
    yield process
    process.kill()
    process.wait()


def serving(server: RendezvousServer, pid: int, kill: AtPoint) -> tuple[threading.Thread, list[Served]]:
    served: list[Served] = []
    started = time.monotonic()
    thread = threading.Thread(target=lambda: served.append(server.serve(pid, kill, started=started,
                                                                         deadline=started + 60)))
    thread.start()
    return thread, served


def announce(client: SeamClient, point: str, calls: tuple[str, ...]) -> Any:
    try:
        client(point, calls, {})
        return "went on"
    except AgentKilled as error:
        return error


def test_a_pausing_kill_holds_the_seam_until_struck_and_later_seams_are_refused(tmp_path: Path, agent):
    server = RendezvousServer(tmp_path / "control.sock")
    client = SeamClient(str(server.path))
    try:
        thread, served = serving(server, agent.pid, AtPoint(TOOL_REQUEST, "c2"))
        assert announce(client, MODEL_REQUEST, ("c1", "c2")) == "went on"
        assert announce(client, TOOL_REQUEST, ("c1",)) == "went on"
        held: list[Any] = []
        holder = threading.Thread(target=lambda: held.append(announce(client, TOOL_REQUEST, ("c2",))))
        holder.start()
        thread.join(60)
        assert served and served[0].hit == AtPoint(TOOL_REQUEST, "c2")
        assert served[0].points == ["c1:model_request", "c2:model_request", "c1:tool_request", "c2:tool_request"]
        holder.join(0.5)
        assert holder.is_alive(), "the held request went on before the harness struck"
        client.struck()
        holder.join(30)
        assert held and isinstance(held[0], AgentKilled)
        assert isinstance(announce(client, TOOL_EFFECT, ("c1",)), AgentKilled)  # after the kill: never sent
        client.begin(1)
        thread, served = serving(server, agent.pid, AtPoint(TOOL_EFFECT, "c9"))
        assert announce(client, TOOL_REQUEST, ("c3",)) == "went on"
        agent.kill()
        thread.join(60)
        assert served[0].points == ["c3:tool_request"]  # nothing of the killed incarnation leaked into this one
    finally:
        server.close()


def test_a_non_pausing_kill_drops_the_request_at_once(tmp_path: Path, agent):
    server = RendezvousServer(tmp_path / "control.sock")
    client = SeamClient(str(server.path))
    try:
        thread, served = serving(server, agent.pid, AtPoint(TOOL_REQUEST, "c1", now=True))
        outcome = announce(client, TOOL_REQUEST, ("c1",))
        thread.join(60)
        assert isinstance(outcome, AgentKilled) and "kill" in str(outcome)
        assert served[0].hit == AtPoint(TOOL_REQUEST, "c1", now=True)
    finally:
        server.close()


def test_only_the_armed_point_is_waited_at_and_the_others_are_still_counted(tmp_path: Path, agent):
    """As ``$KILLPOINT_ARMED`` tells a workload: one round trip per run, not one per point."""
    server = RendezvousServer(tmp_path / "control.sock")
    client = SeamClient(str(server.path))
    client.begin(0, ArmedPoints(frozenset({(AFTER_EFFECT, "c2")})))
    try:
        thread, served = serving(server, agent.pid, AtPoint(AFTER_EFFECT, "c2"))
        client.announce(AFTER_EFFECT, "c1", "t-op1")  # not armed: sent, not waited at (the server never answers it)
        held: list[Any] = []
        holder = threading.Thread(target=lambda: held.append(announce(client, AFTER_EFFECT, ("c2",))))
        holder.start()
        thread.join(60)
        assert served and served[0].hit == AtPoint(AFTER_EFFECT, "c2")
        assert served[0].points == ["c1:after_effect", "c2:after_effect"]
        holder.join(0.5)
        assert holder.is_alive(), "the armed point went on before the harness struck"
        client.struck()
        holder.join(30)
        assert held and isinstance(held[0], AgentKilled)
    finally:
        server.close()


def test_a_seam_announced_for_an_incarnation_already_ended_is_no_point_of_the_next(tmp_path: Path, agent):
    """A late announcement (a store read whose incarnation exited before it was sent) waits in the socket's queue
    until the next incarnation is served: it names its incarnation, and is dropped there, never killed at."""
    server = RendezvousServer(tmp_path / "control.sock")
    late, current = SeamClient(str(server.path)), SeamClient(str(server.path))
    late.begin(0)
    current.begin(1)
    try:
        started = time.monotonic()
        served: list[Served] = []
        thread = threading.Thread(target=lambda: served.append(server.serve(
            agent.pid, AtPoint(TOOL_REQUEST, "c2"), started=started, deadline=started + 60, incarnation=1)))
        thread.start()
        assert announce(late, TOOL_REQUEST, ("c2",)) == "went on"  # answered, and nothing recorded
        assert announce(current, MODEL_REQUEST, ("c2",)) == "went on"
        killed: list[Any] = []
        holder = threading.Thread(target=lambda: killed.append(announce(current, TOOL_REQUEST, ("c2",))))
        holder.start()
        thread.join(60)
        current.struck()
        holder.join(60)
        assert served[0].points == ["c2:model_request", "c2:tool_request"]
        assert served[0].hit == AtPoint(TOOL_REQUEST, "c2") and isinstance(killed[0], AgentKilled)
    finally:
        server.close()
