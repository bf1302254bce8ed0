"""Servers started ahead (``mcp.Spares``) and clean-up off the trial's path (``janitor``): faster, never another certificate.

A spare is a fresh world with a server starting on it; the pool is the
command's, so a tool's first trial may take a server started during another
tool's trials. What must hold: every trial's server is one no call has reached
and no other trial had, the certificates are those certify gives with every
server started when its trial asks for it and every watch closed and world
removed on the trial's path, and nothing is left running or on disk.
"""

from __future__ import annotations

import functools
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from killpoint.harness.certify import janitor, mcp
from killpoint.harness.certify.mcp import McpTarget, Spares
from killpoint.harness.certify.mcp_client import McpClient, McpServer
from killpoint.harness.execute.leftovers import owner_prefix
from tests.certify.test_mcp_state import certified

# add_observations builds states with create_entities and has a witness; read_graph is a read: both deterministic.
TOOLS = ("add_observations", "read_graph", "create_entities")


def without_speedups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Certify as before the speed-ups: no spare ahead, every call watched, every clean-up done on the trial's path."""
    monkeypatch.setattr(mcp, "SPARES_AHEAD", 0)
    monkeypatch.setattr(janitor, "later", lambda job: job())
    call = McpTarget._call

    def watched(self: McpTarget, *args: Any, watched: bool = True, **kwargs: Any) -> Any:
        return call(self, *args, watched=True, **kwargs)

    monkeypatch.setattr(McpTarget, "_call", watched)


def comparable(certificate: dict[str, Any]) -> dict[str, Any]:
    """The certificate but when it was made, how long it took, and what a kill raced by the server left.

    ``create_entities``'s kill "just after modify entities.json.<hex>.tmp" is not
    held in the kernel: the server's next step is its rename, which fanotify has
    no permission event for, so the SIGKILL lands before or after the rename as
    the scheduler says ("torn" or "once"; docs/certify.md, "Kills at a change are
    held, not raced"). The same code gives either under load; the kill's point,
    the trials, the verdict and the evidenced class do not vary. The digest of
    the evidence hashes what each kill left, so it is left out too (the
    observations are compared field by field).
    """
    raced = ("kill_left", "debris", "evidence_digest")  # what the kills left: counted, listed, and in the digest
    kept = {key: value for key, value in certificate.items() if key not in ("created", "seconds", *raced)}
    kept["observations"] = [{key: value for key, value in observation.items() if key not in ("left", "debris")}
                            for observation in certificate["observations"]]
    return kept


@pytest.mark.integration
def test_every_trial_takes_a_server_no_call_has_reached_and_no_other_trial_had(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[McpClient] = []
    called: set[int] = set()
    take, call_tool = Spares.take, McpServer.call_tool

    def recorded_take(self: Spares) -> tuple[Path, McpClient]:
        world, server = take(self)
        assert id(server) not in called and not server.used, "a spare a call had reached"
        assert all(server is not other for other in taken), "a spare taken twice"
        assert self.ahead == mcp.SPARES_AHEAD and len(self.ready) == self.ahead
        taken.append(server)
        return world, server

    def recorded_call(self: McpServer, *args: Any, **kwargs: Any) -> Any:
        called.add(id(self))
        return call_tool(self, *args, **kwargs)

    monkeypatch.setattr(Spares, "take", recorded_take)
    monkeypatch.setattr(McpServer, "call_tool", recorded_call)
    done = certified(tmp_path, tools=TOOLS)
    assert {tool: data["verdict"] for tool, data in done.items()} == {
        "add_observations": "CONFIRMED", "read_graph": "CONFIRMED", "create_entities": "CONFIRMED"}
    assert len(taken) > 3 * len(TOOLS) and not mcp._SPARES, "the pools are closed when certify ends"
    assert not any(server.alive for server in taken)


@pytest.mark.integration
def test_the_certificates_are_those_of_servers_started_on_demand_and_clean_up_on_the_trials_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A kill after a delay is drawn within the measured duration of a call, which follows the load: points only.
    monkeypatch.setattr(McpTarget, "timed_kills", False)
    fast = certified(tmp_path / "fast", tools=TOOLS)
    with monkeypatch.context() as patched:
        without_speedups(patched)
        slow = certified(tmp_path / "slow", tools=TOOLS)
    assert {tool: comparable(data) for tool, data in fast.items()} == {
        tool: comparable(data) for tool, data in slow.items()}


@pytest.mark.integration
def test_no_server_or_folder_of_the_pool_is_left_when_certify_ends(tmp_path: Path) -> None:
    certified(tmp_path, tools=("read_graph",))
    assert not mcp._SPARES
    assert not list(Path(tempfile.gettempdir()).glob(owner_prefix("killpoint-mcp-") + "*"))


def test_the_janitor_runs_its_jobs_in_order_past_a_failing_one_and_drain_waits_for_them(tmp_path: Path) -> None:
    ran: list[int] = []

    def fails() -> None:
        raise OSError("a clean-up that fails")

    janitor.later(fails)
    for number in range(20):
        janitor.later(functools.partial(ran.append, number))
    folder = tmp_path / "world"
    (folder / "sub").mkdir(parents=True)
    janitor.remove_later(folder)
    janitor.drain()
    assert ran == list(range(20)) and not folder.exists()


def test_a_watch_is_closed_at_once_when_the_janitor_is_behind(tmp_path: Path) -> None:
    """Its inotify instance counts against the user's limit while it waits: a backlog must not grow without bound."""
    release = threading.Event()
    janitor.later(release.wait)  # the janitor is busy: every job after this one waits
    for _ in range(janitor.MAX_WAITING):
        janitor.later(functools.partial(int, 0))
    read, write = os.pipe()
    try:
        janitor.close_later(read)
        with pytest.raises(OSError):
            os.fstat(read)  # closed already, on this thread
    finally:
        os.close(write)
        release.set()
        janitor.drain()
