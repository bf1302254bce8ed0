"""Armed crash points ($KILLPOINT_ARMED): a workload waits for the harness only where it may be killed.

The client's reading of the variable, the server's handling of messages sent
without waiting (recorded, never answered, read to the end when the process
exits, even once it is reaped), and the kills and coverage of whole sessions,
which must be those of protocol v1's wait at every point.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from killpoint import protocol
from killpoint.client import ArmedPoints, Rendezvous
from killpoint.harness.execute.rendezvous import RendezvousServer
from killpoint.harness.execute.runner import armed_points
from killpoint.harness.model import AfterDelay, AfterPoint, AtPoint, OnEvent

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 10.0


@pytest.mark.parametrize("value, waits_at", [
    (None, {("after_effect", "c1"), ("after_effect", "c2"), ("before_started", "c1")}),
    ('{"at": []}', set()),
    ('{"at": [["after_effect", "c2"]]}', {("after_effect", "c2")}),
    ('{"at": [["after_effect", null]]}', {("after_effect", "c1"), ("after_effect", "c2")}),
    ("not json", {("after_effect", "c1"), ("after_effect", "c2"), ("before_started", "c1")}),
    ('{"at": [["after_effect", 3]]}', {("after_effect", "c1"), ("after_effect", "c2"), ("before_started", "c1")}),
    ('{"at": "after_effect"}', {("after_effect", "c1"), ("after_effect", "c2"), ("before_started", "c1")}),
], ids=["unset-waits-everywhere", "none-armed", "one-call", "any-call", "unreadable", "bad-entry", "bad-shape"])
def test_a_client_waits_where_it_is_armed_and_everywhere_when_it_cannot_tell(value, waits_at):
    environ = {} if value is None else {protocol.ENV_ARMED: value}
    armed = ArmedPoints.from_environ(environ)
    points = {("after_effect", "c1"), ("after_effect", "c2"), ("before_started", "c1")}
    assert {(point, call) for point, call in points if armed.waits(point, call)} == waits_at


def test_only_a_kill_at_a_crash_point_is_armed_and_timed_event_and_after_kills_wait_everywhere():
    assert json.loads(armed_points(None) or "") == {"at": []}
    assert json.loads(armed_points(AtPoint("after_effect", "c3")) or "") == {"at": [["after_effect", "c3"]]}
    assert json.loads(armed_points(AtPoint("after_effect", "c3", now=True)) or "") == {
        "at": [["after_effect", "c3"]], "now": True}
    assert armed_points(AfterPoint("after_effect", "c3")) is None
    assert armed_points(AfterDelay(0.01)) is None
    assert armed_points(OnEvent("ledger", "effect", "c3")) is None


# A workload of two points sent without waiting; then, by its mode, a third it waits for ("wait"), nothing
# ("nowait": it exits), or a sleep until it is killed ("linger": it cannot exit before the harness reads it).
SENDER = """
import json, socket, sys, time
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(sys.argv[1])
sock.sendall(json.dumps({"point": "before_started", "call": "c1", "wait": False}).encode() + b"\\n")
sock.sendall(json.dumps({"point": "after_started", "call": "c1", "wait": False}).encode() + b"\\n")
if sys.argv[2] == "wait":
    sock.sendall(json.dumps({"point": "after_effect", "call": "c1"}).encode() + b"\\n")
    print(sock.makefile("rb").readline().decode().strip())
elif sys.argv[2] == "linger":
    time.sleep(60)
"""


@pytest.fixture
def server(tmp_path):
    served = RendezvousServer(Path(tmp_path / "c.sock"))
    yield served
    served.close()


def _start(server: RendezvousServer, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", SENDER, str(server.path), mode], stdout=subprocess.PIPE, text=True)


def test_points_sent_without_waiting_are_counted_and_never_answered(server):
    process = _start(server, "wait")
    served = server.serve(process.pid, None, started=time.monotonic(), deadline=time.monotonic() + DEADLINE_S)
    out, _ = process.communicate(timeout=DEADLINE_S)
    assert served.points == ["c1:before_started", "c1:after_started", "c1:after_effect"]
    assert out.strip() == "ok"  # one reply, to the one message that waited: no stale "ok" was queued before it
    assert served.hit is None and not served.protocol_problems


def test_an_incarnation_reaped_before_it_is_served_still_has_its_points_counted(server):
    process = _start(server, "nowait")
    process.wait(timeout=DEADLINE_S)  # exited and reaped: no pidfd can be opened on it any more
    served = server.serve(process.pid, None, started=time.monotonic(), deadline=time.monotonic() + DEADLINE_S)
    assert served.points == ["c1:before_started", "c1:after_started"]


def test_a_workload_that_does_not_wait_at_its_armed_point_is_killed_late_and_said_to(server):
    process = _start(server, "linger")
    try:
        served = server.serve(process.pid, AtPoint("after_started", "c1"), started=time.monotonic(),
                              deadline=time.monotonic() + DEADLINE_S)
    finally:
        process.kill()
        process.wait(timeout=DEADLINE_S)
    assert served.hit == AtPoint("after_started", "c1")
    assert served.protocol_problems and "without waiting" in served.protocol_problems[0]


def test_the_client_sends_unarmed_points_without_waiting_and_waits_at_the_armed_one(tmp_path):
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "c.sock"))
    listener.listen(1)
    client = Rendezvous(str(tmp_path / "c.sock"), 0, ArmedPoints(frozenset({("after_effect", "c1")})))
    client.point("before_started", call="c1")  # returns with no reply: nobody has even accepted yet
    connection, _ = listener.accept()
    connection.sendall(b"ok\n")
    client.point("after_effect", call="c1")
    received = connection.recv(4096).decode().splitlines()
    assert [json.loads(line).get("wait", True) for line in received] == [False, True]
    client.close()
    connection.close()
    listener.close()


def _points_of_each_run(runs: Path) -> list[list[list[str]]]:
    return [[incarnation["points"] for incarnation in json.loads((run / "incarnations.json").read_text())]
            for run in sorted(runs.glob("run-*"))]


def test_armed_and_v1_workloads_reach_the_same_points_in_every_incarnation(killpoint, tmp_path):
    # The reference runtime reads $KILLPOINT_ARMED; the standalone one shares no code with it and speaks bare v1
    # (it waits at every point). The same schedules must record the same crash points, kill for kill.
    scenario = ROOT / "scenarios" / "demo.toml"
    standalone = f"{{python}} {ROOT / 'scenarios' / 'standalone' / 'runtime.py'}"
    points = {}
    for name, extra in (("armed", ()), ("v1", ("--workload", standalone))):
        runs = tmp_path / name
        result = killpoint("run", scenario, "--exhaustive", "--keep-all", "--runs-dir", runs, "-j", "2", "-q", *extra)
        assert result.exit_code == 0, result.out + result.err
        points[name] = _points_of_each_run(runs)
    assert len(points["armed"]) == 30 and points["armed"] == points["v1"]


@pytest.mark.parametrize("args, expected", [
    (("--exhaustive", "--depth", "2"), "533 runs: 533 passed, 0 failed"),
    (("--exhaustive", "--torn-tail"), "42 runs: 42 passed, 0 failed"),
    (("--exhaustive", "--drift", "append=READ_ONLY"), "30 runs: 30 passed, 0 failed"),
    (("--exhaustive", "--no-pause"), "30 runs: 30 passed, 0 failed"),
    (("--random", "40", "--timed", "--seed", "3"), " 0 failed"),  # a timed kill may come after the end
], ids=["depth-2", "torn-tail", "drift", "no-pause", "random-with-timed"])
def test_a_correct_runtime_passes_armed_under_every_mode(killpoint, tmp_path, args, expected):
    # Depth 2 explores from the points each restart reached: none may be missed by a run that waited nowhere.
    result = killpoint("run", ROOT / "scenarios" / "demo.toml", *args, "-j", "2", "-q", "--runs-dir", tmp_path / "r")
    assert result.exit_code == 0 and expected in result.out, result.out + result.err


def _send(sock: socket.socket, point: str, **fields) -> None:
    sock.sendall(json.dumps({"point": point, "call": "c1", "wait": False, **fields}).encode() + b"\n")


@pytest.fixture
def two_senders(server):
    """A live stand-in incarnation and two connections to ``server``: its runtime's and its tool process's."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    runtime, tool = (socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(2))
    runtime.connect(str(server.path))
    tool.connect(str(server.path))
    yield process, runtime, tool
    process.kill()
    process.wait(timeout=DEADLINE_S)
    runtime.close()
    tool.close()


def test_points_from_two_processes_are_kept_in_the_order_they_were_sent_not_read(server, two_senders):
    # The runtime's connection is read first, but its tool's process sent its point (on its own connection) earlier.
    process, runtime, tool = two_senders
    started = time.monotonic()
    tool_sent, runtime_sent = time.monotonic(), time.monotonic()
    _send(runtime, "before_finished", sent=runtime_sent)
    _send(tool, "after_effect", sent=tool_sent)
    _send(tool, "after_finished", sent=10 ** 12)  # not this clock's: ordered by its arrival, last
    process.kill()  # the incarnation ends; the server reads what it sent
    served = server.serve(process.pid, None, started=started, deadline=started + DEADLINE_S)
    assert served.points == ["c1:after_effect", "c1:before_finished", "c1:after_finished"]


def test_after_a_kill_the_points_reached_before_its_point_are_read_and_those_after_it_are_not(server, two_senders):
    process, runtime, tool = two_senders
    started = time.monotonic()
    runtime.sendall(json.dumps({"point": "before_finished", "call": "c1"}).encode() + b"\n")  # waits: the kill
    served = server.serve(process.pid, AtPoint("before_finished", "c1"), started=started,
                          deadline=started + DEADLINE_S)
    assert served.hit == AtPoint("before_finished", "c1") and served.hit_at is not None
    _send(tool, "after_effect", sent=(started + served.hit_at) / 2)  # sent before the kill's point, read after it
    _send(tool, "after_finished", sent=time.monotonic())  # after it: a wait there is never answered
    process.kill()
    process.wait(timeout=DEADLINE_S)
    server.read_after_kill(served)
    assert served.points == ["c1:after_effect", "c1:before_finished"]


# A workload armed to kill itself at c3's after_effect: it passes c1's point, then announces c3's.
SELF_KILLER = """
import sys
from killpoint.client import Rendezvous
rendezvous = Rendezvous(sys.argv[1], 0)
rendezvous.point("after_effect", call="c1")
rendezvous.point("after_effect", call="c3")
print("ran on past the armed point", flush=True)
"""


@pytest.mark.parametrize("now", [True, False])
def test_a_non_pausing_kill_is_carried_out_by_the_workload_with_no_round_trip(server, now):
    """--no-pause once waited for the harness's ``kill`` reply (0.2-1.3 ms in which a framework's saver thread
    ran on); armed with ``"now"``, the client SIGKILLs its group as soon as the point is sent."""
    armed = {"at": [["after_effect", "c3"]], **({"now": True} if now else {})}
    workload = subprocess.Popen([sys.executable, "-c", SELF_KILLER, str(server.path)], stdout=subprocess.PIPE,
                                text=True, start_new_session=True,
                                env={**os.environ, protocol.ENV_ARMED: json.dumps(armed)})
    try:
        # The harness never replies here: only a workload that kills itself ends.
        deadline = time.monotonic() + (DEADLINE_S if now else 0.5)
        while workload.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if now:
            assert workload.returncode == -9, "the armed workload did not kill itself at its point"
            assert workload.stdout is not None and workload.stdout.read() == ""
        else:
            assert workload.returncode is None, "a pausing kill's workload waits for the harness"
    finally:
        workload.kill()
        workload.wait()


def test_a_workload_that_killed_itself_at_its_now_point_is_killed_there_not_crashed(server):
    """The harness reads the point from the dead workload's socket and counts the kill as landed, also when
    the workload died (and was reaped) before the harness began to serve it."""
    kill = AtPoint("after_effect", "c3", now=True)
    workload = subprocess.Popen([sys.executable, "-c", SELF_KILLER, str(server.path)], stdout=subprocess.PIPE,
                                text=True, start_new_session=True,
                                env={**os.environ, protocol.ENV_ARMED: armed_points(kill) or ""})
    deadline = time.monotonic() + DEADLINE_S
    while workload.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert workload.returncode == -9
    served = server.serve(workload.pid, kill, started=time.monotonic(), deadline=time.monotonic() + DEADLINE_S)
    assert served.hit == kill and served.points == ["c1:after_effect", "c3:after_effect"], served
