"""The services reached from a process with a network of its own (a container's), and from nowhere else.

A process made with ``unshare --net`` stands in for a container here: its
namespace has only a loopback. The harness makes the tool service's listener
inside it, on the service's own port, and a client entering that namespace
(``nsenter``) reaches the service at the very URL the agent is handed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from killpoint.fake_tools.world import seed_world
from killpoint.harness.agents._netns import listen_in_network_of, own_network
from killpoint.harness.agents.tool_service import ToolService
from tests.agents.test_tool_service import PLAN

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nsenter"),
                                 reason="entering another network namespace needs root, unshare and nsenter")]
FETCH = ("import sys, urllib.request\n"
         "print(urllib.request.urlopen(sys.argv[1], timeout=10).status)")


@pytest.fixture
def isolated() -> Iterator[int]:
    """The pid of a process in a network namespace of its own, its loopback up (as a container's is)."""
    process = subprocess.Popen(["unshare", "--net", "sh", "-c", "ip link set lo up 2>/dev/null; exec sleep 60"])
    try:
        deadline = time.monotonic() + 10
        while not own_network(process.pid) or "sleep" not in Path(f"/proc/{process.pid}/cmdline").read_text():
            assert time.monotonic() < deadline, "the isolated process never got its own network"
            time.sleep(0.01)
        yield process.pid
    finally:
        process.kill()
        process.wait(10)


def inside(pid: int, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", *argv], capture_output=True, text=True, timeout=30)


def test_the_harness_shares_its_own_network_and_the_isolated_process_has_another(isolated):
    assert not own_network(os.getpid()) and own_network(isolated)
    assert not own_network(2 ** 22 + 1)  # no such process: nothing to reach


def test_the_tool_service_is_reached_from_inside_at_the_url_the_agent_is_handed(isolated, tmp_path):
    world = tmp_path / "world"
    seed_world(world, {}, {})
    with ToolService(PLAN, world, tmp_path / "ledger.jsonl", lambda *_: None) as tools:
        tools.begin(0)
        before = inside(isolated, sys.executable, "-c", FETCH, f"{tools.url}/openapi.json")
        assert before.returncode != 0 and "Connection refused" in before.stderr  # not yet: nothing listens there
        tools.reach_from(isolated)
        reached = inside(isolated, sys.executable, "-c", FETCH, f"{tools.url}/openapi.json")
        assert reached.returncode == 0 and reached.stdout.strip() == "200", reached.stderr
        tools.reach_from(isolated)  # the next incarnation's: the old listener is closed first, the port taken again
        assert inside(isolated, sys.executable, "-c", FETCH, f"{tools.url}/openapi.json").returncode == 0


def test_a_listener_inside_is_not_on_the_hosts_loopback(isolated):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free on the host once closed
    listener = listen_in_network_of(isolated, port)
    try:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5)
    finally:
        listener.close()


def test_no_listener_is_made_for_a_process_gone(tmp_path):
    """A container that ended at once has no network left to serve: an error to make one, nothing to reach."""
    with pytest.raises(OSError):
        listen_in_network_of(2 ** 22 + 1, 0)
    world = tmp_path / "world"
    seed_world(world, {}, {})
    with ToolService(PLAN, world, tmp_path / "ledger.jsonl", lambda *_: None) as tools:
        tools.reach_from(2 ** 22 + 1)  # quietly nothing: the runner sees the incarnation end
