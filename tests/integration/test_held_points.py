"""An incarnation held at its points (``serve``'s ``on_point``) is a real process, and the time held is not its own."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from killpoint.harness.backends._cgroup import IncarnationCgroup, preexec_joiner, usable_parent
from killpoint.harness.execute.rendezvous import RendezvousServer, Served

pytestmark = pytest.mark.integration

# A v1 workload: three points, each waited at, then exit 0.
WAITS_AT_THREE = """
import sys
from killpoint.client import Rendezvous
rendezvous = Rendezvous(sys.argv[1], 1)
for call in ("c1", "c2", "c3"):
    rendezvous.point("after_started", call=call)
"""
# The workload's own time (a Python start and an import, 0.05 s idle, several times that beside a CPU hog) must
# fit in the timeout with room to spare, or it times out for its own slowness, not the holds.
TIMEOUT_S = 2.0
HELD_S = 0.8  # at each point: three holds outlast the timeout


def test_the_time_an_incarnation_is_held_moves_its_deadline_and_it_is_never_timed_out_for_it(tmp_path: Path) -> None:
    server = RendezvousServer(tmp_path / "c.sock")
    held: list[str] = []

    def hold(point: str, call: str | None, served: Served) -> None:
        held.append(served.points[-1])
        time.sleep(HELD_S)

    process = subprocess.Popen([sys.executable, "-c", WAITS_AT_THREE, str(server.path)])
    try:
        started = time.monotonic()
        served = server.serve(process.pid, None, started=started, deadline=started + TIMEOUT_S, on_point=hold)
        assert process.wait(timeout=10) == 0
    finally:
        process.kill()
        process.wait()
        server.close()
    assert not served.timed_out and served.hit is None
    assert held == served.points == ["c1:after_started", "c2:after_started", "c3:after_started"]
    assert served.held_s >= 3 * HELD_S > TIMEOUT_S


def test_an_incarnation_that_hangs_between_holds_still_times_out(tmp_path: Path) -> None:
    server = RendezvousServer(tmp_path / "c.sock")
    hangs = WAITS_AT_THREE + "import time\ntime.sleep(60)\n"
    process = subprocess.Popen([sys.executable, "-c", hangs, str(server.path)])
    try:
        started = time.monotonic()
        served = server.serve(process.pid, None, started=started, deadline=started + TIMEOUT_S,
                              on_point=lambda point, call, served: time.sleep(0.1))
    finally:
        process.kill()
        process.wait()
        server.close()
    assert served.timed_out and len(served.points) == 3
    assert time.monotonic() - started < TIMEOUT_S + served.held_s + 5  # at its moved deadline, not never


def cpu_ticks(pid: int) -> int:
    """User + system clock ticks ``pid`` has run (fields 14 and 15 of /proc/PID/stat, after its name)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])


@pytest.fixture
def spinning() -> Iterator[tuple[IncarnationCgroup, subprocess.Popen[bytes]]]:
    """A process spinning in a cgroup of its own; whatever the test left of either is killed afterwards."""
    if usable_parent() is None:
        pytest.skip("no cgroup v2 folder this process may write: incarnations are never held here")
    cgroup = IncarnationCgroup.create()
    assert cgroup is not None
    with preexec_joiner(cgroup) as join:
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=join)
    try:
        yield cgroup, spinner
    finally:
        spinner.kill()
        spinner.wait(timeout=10)
        cgroup.discard()


def test_a_frozen_cgroup_holds_every_process_in_it_still_and_thaws_on_leaving(spinning) -> None:
    cgroup, spinner = spinning
    deadline = time.monotonic() + 10
    while cpu_ticks(spinner.pid) < 5 and time.monotonic() < deadline:  # running, and seen to run
        time.sleep(0.05)
    with cgroup.frozen() as held:
        assert held
        before = cpu_ticks(spinner.pid)
        time.sleep(0.5)
        assert cpu_ticks(spinner.pid) == before
    thawed = cpu_ticks(spinner.pid)
    while cpu_ticks(spinner.pid) == thawed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cpu_ticks(spinner.pid) > thawed  # it runs again
    cgroup.discard()
    assert spinner.wait(timeout=10) == -9


def test_a_frozen_cgroup_is_killed_while_still_frozen(spinning) -> None:
    """A kill at the store's point lands while the watch holds the incarnation frozen: SIGKILL must end it there,
    with no thaw first (a thaw would let the agent run on past the point before it died)."""
    cgroup, spinner = spinning
    with cgroup.frozen() as held:
        assert held
        cgroup.discard()  # killed, confirmed empty and removed, all inside the freeze
        assert spinner.wait(timeout=10) == -9
