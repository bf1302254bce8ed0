"""The Node.js agent of scenarios/foreign/, run directly: its own store holds what the recovery rules need.

No killpoint session here: each test lays out a run directory by hand (the
protocol environment, a seeded world, the plan and catalogue of a scenario
file), starts ``node agent.js`` in a process group of its own, kills it for real
at one crash point with a stand-in for the harness's control socket, restarts it,
and reads back its task store and the fake tools' ledger. So the agent's
behaviour is pinned before (and apart from) the black-box checker that judges it
in test_foreign_runtime_judged.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from killpoint import protocol
from killpoint.fake_tools.world import seed_world
from killpoint.harness.config.scenario import load_plan_file, resolve_catalogue
from killpoint.harness.judge.stores import journal_problems, reader_for
from tests.helpers import ROOT

FOREIGN = ROOT / "scenarios" / "foreign"
ORDER, SHORT = FOREIGN / "order.toml", FOREIGN / "short.toml"
DEADLINE_S = 20.0

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="the foreign agent runs on Node.js")


class ControlStandIn:
    """The harness's end of the control socket, cut down: answers every crash point with ``ok`` but one.

    At ``hold`` (point, call) it records the arrival and then either leaves the
    point unanswered (the harness's pausing kill: the test SIGKILLs the group)
    or answers ``reply`` (``kill``: the workload must SIGKILL its own group).
    """

    def __init__(self, hold: tuple[str, str] | None, reply: str | None = None) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="kp-foreign-"))  # short: a socket path has 107 bytes
        self.path = self.folder / "control.sock"
        self.hold, self.reply = hold, reply
        self.points: list[tuple[str, str | None]] = []
        self.messages: list[dict] = []  # every crash-point line, as sent
        self.held = threading.Event()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        self._listener.listen()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection, connection.makefile("rb") as lines:
            for line in lines:
                message = json.loads(line)
                reached = (message["point"], message["call"])
                self.points.append(reached)
                self.messages.append(message)
                if message.get(protocol.NO_WAIT_FIELD) is False:
                    continue  # the workload reads no reply to it, and the harness sends none
                if reached == self.hold:
                    self.held.set()
                    if self.reply is None:
                        continue  # unanswered: the test kills the workload while it waits
                    connection.sendall(f"{self.reply}\n".encode())
                else:
                    connection.sendall(b"ok\n")

    def close(self) -> None:
        self._listener.close()
        shutil.rmtree(self.folder, ignore_errors=True)


@dataclass
class ForeignRun:
    """One run directory of the agent, launched incarnation by incarnation."""

    root: Path
    bug: str | None = None
    incarnations: list[int] = field(default_factory=list)  # each incarnation's exit status (-9: SIGKILLed)

    @classmethod
    def laid_out(cls, root: Path, scenario_file: Path, bug: str | None = None) -> ForeignRun:
        """The run directory of ``scenario_file``'s plan, catalogue and world, as killpoint's runner lays it out."""
        data = tomllib.loads(scenario_file.read_text())
        catalogue = resolve_catalogue(data.get("catalogue"), scenario_file.parent)
        (root / "workload").mkdir(parents=True)
        (root / "plan.json").write_text(json.dumps(data["plan"]))
        (root / "catalogue.json").write_text(json.dumps(catalogue.to_protocol()))
        world = data.get("world", {})
        seed_world(root / "world", world.get("files", {}), world.get("state", {}))
        (root / "ledger.jsonl").touch()
        return cls(root, bug)

    def environment(self, control: ControlStandIn | None, armed: str | None = None) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("KILLPOINT_")}
        env.update({
            protocol.ENV_RUN_DIR: str(self.root / "workload"),
            protocol.ENV_PLAN: str(self.root / "plan.json"),
            protocol.ENV_CATALOGUE: str(self.root / "catalogue.json"),
            protocol.ENV_WORLD: str(self.root / "world"),
            protocol.ENV_LEDGER: str(self.root / "ledger.jsonl"),
            protocol.ENV_INCARNATION: str(len(self.incarnations)),
        })
        if control is not None:
            env[protocol.ENV_CONTROL] = str(control.path)
        if armed is not None:
            env[protocol.ENV_ARMED] = armed
        return env

    def launch(self, control: ControlStandIn | None = None, armed: str | None = None) -> subprocess.Popen[bytes]:
        number = len(self.incarnations)
        argv = ["node", "agent.js", "--python", sys.executable, *(["--bug", self.bug] if self.bug else [])]
        with (self.root / f"incarnation-{number}.stderr").open("wb") as stderr:
            return subprocess.Popen(argv, cwd=FOREIGN, env=self.environment(control, armed), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)

    def finish(self) -> int:
        """Run one incarnation with no control socket to its end; its exit status."""
        process = self.launch()
        self.incarnations.append(_waited(process))
        return self.incarnations[-1]

    def kill_at(self, point: str, call: str, *, reply: str | None = None) -> int:
        """Run one incarnation until ``call`` reaches ``point`` and die there by SIGKILL; its exit status.

        With no ``reply`` the test kills the process group, as the harness
        does; with ``reply="kill"`` the agent must kill itself.
        """
        control = ControlStandIn((point, call), reply)
        process = self.launch(control)
        try:
            assert control.held.wait(DEADLINE_S), f"{call}:{point} never reached; points: {control.points}"
            if reply is None:
                os.killpg(process.pid, signal.SIGKILL)
            self.incarnations.append(_waited(process))
        finally:
            _kill_group(process)
            control.close()
        return self.incarnations[-1]

    def operations(self) -> dict[str, dict[str, object]]:
        """The store's operations by call id."""
        task_id = json.loads((self.root / "plan.json").read_text())["task_id"]
        task = json.loads((self.root / "workload" / "tasks" / f"{task_id}.json").read_text())
        assert task["taskId"] == task_id
        return {operation["llmCallId"]: operation for operation in task["operations"]}

    def ledger(self, call: str) -> list[str]:
        """The kinds of the call's ledger lines in order: invoked, effect, probe."""
        lines = [json.loads(line) for line in (self.root / "ledger.jsonl").read_text().splitlines()]
        return [next(kind for kind in protocol.TOOL_LEDGER_KINDS if kind in line)
                for line in lines if line.get("call") == call]

    def stderr(self, number: int) -> str:
        return (self.root / f"incarnation-{number}.stderr").read_text()


def _waited(process: subprocess.Popen[bytes]) -> int:
    try:
        return process.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise AssertionError(f"pid {process.pid} did not end within {DEADLINE_S}s") from None


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Leave nothing of the incarnation running, whatever the test's outcome."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=DEADLINE_S)


@pytest.fixture
def order_run(tmp_path: Path) -> Iterator[ForeignRun]:
    yield ForeignRun.laid_out(tmp_path / "run", ORDER)


def test_a_crash_free_run_records_every_call_and_a_restart_runs_nothing(order_run):
    assert order_run.finish() == 0, order_run.stderr(0)
    operations = order_run.operations()
    assert list(operations) == ["c1", "c2", "c3", "c4", "c5", "c6"]
    assert {call: (op["operationId"], op["status"], op["idempotency"], op["attempt"])
            for call, op in operations.items()} == {
        "c1": ("order-op1", "SUCCEEDED", "READ_ONLY", 1),
        "c2": ("order-op2", "SUCCEEDED", "NON_IDEMPOTENT", 1),
        "c3": ("order-op3", "SUCCEEDED", "IDEMPOTENT_WRITE", 1),
        "c4": ("order-op4", "SUCCEEDED", "NON_IDEMPOTENT", 1),
        "c5": ("order-op5", "SUCCEEDED", "NON_IDEMPOTENT", 1),
        "c6": ("order-op6", "SUCCEEDED", "UNKNOWN", 1),
    }
    assert operations["c2"]["interactive"] is True and operations["c5"]["interactive"] is False
    before = (order_run.root / "ledger.jsonl").read_text()
    assert order_run.finish() == 0, order_run.stderr(1)
    assert (order_run.root / "ledger.jsonl").read_text() == before  # SUCCEEDED is SKIP: no tool runs again


def test_a_failed_call_is_recorded_failed_and_an_unlisted_tool_is_unknown(tmp_path):
    run = ForeignRun.laid_out(tmp_path / "run", SHORT)
    assert run.finish() == 0, run.stderr(0)
    operations = run.operations()
    assert (operations["c1"]["status"], operations["c3"]["idempotency"]) == ("FAILED", "UNKNOWN")
    assert run.finish() == 0 and run.ledger("c1") == ["invoked"]  # FAILED is SKIP too


def test_running_is_durable_before_the_tool_and_the_kill_reply_kills_the_agent(order_run):
    assert order_run.kill_at("after_started", "c5", reply="kill") == -signal.SIGKILL
    assert order_run.operations()["c5"]["status"] == "RUNNING"
    assert order_run.ledger("c5") == []
    assert order_run.finish() == 0, order_run.stderr(1)
    # Interrupted NON_IDEMPOTENT: verified first; the probe finds no effect, so the tap runs once.
    assert order_run.ledger("c5") == ["probe", "invoked", "effect"]
    assert (order_run.operations()["c5"]["status"], order_run.operations()["c5"]["attempt"]) == ("SUCCEEDED", 2)


def test_an_interrupted_tap_whose_effect_happened_is_verified_not_repeated(order_run):
    assert order_run.kill_at("after_effect", "c5") == -signal.SIGKILL
    assert order_run.operations()["c5"]["status"] == "RUNNING"
    assert order_run.finish() == 0, order_run.stderr(1)
    assert order_run.ledger("c5") == ["invoked", "effect", "probe"]
    assert order_run.operations()["c5"]["status"] == "SUCCEEDED"
    assert order_run.ledger("c6") == ["invoked", "effect", "effect"]  # the plan went on after the recovery


@pytest.mark.parametrize(("call", "redone"), [
    pytest.param("c2", ["invoked", "invoked"], id="interactive-question-asked-again"),
    pytest.param("c3", ["invoked", "effect", "invoked", "effect"], id="idempotent-write-retried"),
    pytest.param("c4", ["invoked", "effect", "probe"], id="non-idempotent-append-verified"),
])
def test_an_interrupted_call_gets_the_action_its_class_snapshot_says(order_run, call, redone):
    assert order_run.kill_at("after_effect", call) == -signal.SIGKILL
    assert order_run.finish() == 0, order_run.stderr(1)
    assert order_run.ledger(call) == redone
    assert order_run.operations()[call]["status"] == "SUCCEEDED"


def test_an_interrupted_unlisted_tool_is_verified(tmp_path):
    run = ForeignRun.laid_out(tmp_path / "run", SHORT)
    assert run.kill_at("after_effect", "c3") == -signal.SIGKILL
    assert run.finish() == 0, run.stderr(1)
    assert run.ledger("c3") == ["invoked", "effect", "effect", "probe"]


def test_a_call_killed_after_its_success_is_recorded_is_not_run_again(order_run):
    assert order_run.kill_at("after_finished", "c4") == -signal.SIGKILL
    assert order_run.finish() == 0, order_run.stderr(1)
    assert order_run.ledger("c4") == ["invoked", "effect"]


@pytest.mark.parametrize("scenario_file", [ORDER, SHORT], ids=["order", "short"])
def test_each_scenario_maps_the_store_the_agent_writes(scenario_file):
    assert journal_problems(tomllib.loads(scenario_file.read_text())["journal"], str(scenario_file)) == []


def test_the_journal_mapping_reads_a_killed_agent_store_as_killpoint_states(order_run):
    assert order_run.kill_at("after_started", "c5") == -signal.SIGKILL
    reader = reader_for(tomllib.loads(ORDER.read_text())["journal"])
    state = reader.read(order_run.root / "workload", load_plan_file(order_run.root / "plan.json"))
    assert (state.problems, state.records_start) == ((), True)
    assert {call: record.status for call, record in state.records.items()} == {
        "c1": "SUCCEEDED", "c2": "SUCCEEDED", "c3": "SUCCEEDED", "c4": "SUCCEEDED", "c5": "RUNNING"}
    assert "order-op5" in state.records["c5"].quote


def test_the_blind_retry_mutant_repeats_the_tap(tmp_path):
    run = ForeignRun.laid_out(tmp_path / "run", ORDER, bug="blind-retry")
    assert run.kill_at("after_effect", "c5") == -signal.SIGKILL
    assert run.finish() == 0, run.stderr(1)
    assert run.ledger("c5") == ["invoked", "effect", "invoked", "effect"]


def test_the_started_after_tool_mutant_leaves_an_effect_its_store_does_not_know(tmp_path):
    run = ForeignRun.laid_out(tmp_path / "run", ORDER, bug="started-after-tool")
    assert run.kill_at("after_effect", "c4") == -signal.SIGKILL
    assert "c4" not in run.operations() and run.ledger("c4") == ["invoked", "effect"]
    assert run.finish() == 0, run.stderr(1)
    assert run.ledger("c4") == ["invoked", "effect", "invoked", "effect"]


def test_a_damaged_store_is_moved_aside_never_deleted(order_run):
    assert order_run.kill_at("after_finished", "c1") == -signal.SIGKILL
    store = order_run.root / "workload" / "tasks" / "order.json"
    damaged = store.read_bytes()[:40]
    store.write_bytes(damaged)
    assert order_run.finish() == 0, order_run.stderr(1)
    assert (store.parent / "order.json.corrupt-1").read_bytes() == damaged
    assert "moved aside" in order_run.stderr(1)
    assert {op["status"] for op in order_run.operations().values()} == {"SUCCEEDED"}  # the task started afresh


@pytest.mark.parametrize(("argv", "complaint"), [
    pytest.param([], "KILLPOINT_TOOLS_URL is unset (killpoint sets it), so give --python", id="no-way-to-the-tools"),
    pytest.param(["--python", sys.executable, "--bug", "typo"], "is not one of blind-retry", id="unknown-bug"),
    pytest.param(["--pyhton", sys.executable], "unexpected argument", id="misspelt-flag"),
])
def test_bad_usage_exits_2_naming_the_fix(order_run, argv, complaint):
    done = subprocess.run(["node", "agent.js", *argv], cwd=FOREIGN, env=order_run.environment(None),
                          capture_output=True, text=True, timeout=DEADLINE_S, check=False)
    assert (done.returncode, complaint in done.stderr) == (2, True), done.stderr


def test_outside_killpoint_it_says_what_is_missing(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("KILLPOINT_")}
    done = subprocess.run(["node", "agent.js", "--python", sys.executable], cwd=FOREIGN, env=env,
                          capture_output=True, text=True, timeout=DEADLINE_S, check=False)
    assert done.returncode == 2 and "KILLPOINT_RUN_DIR" in done.stderr, done.stderr


ARMED_C3 = json.dumps({"at": [["after_started", "c3"]]})


def test_an_armed_incarnation_waits_only_at_its_armed_point(order_run):
    """$KILLPOINT_ARMED: every other point is sent with "wait": false and its CLOCK_MONOTONIC time."""
    control = ControlStandIn(("after_started", "c3"))
    before = time.monotonic()
    process = order_run.launch(control, ARMED_C3)
    try:
        assert control.held.wait(DEADLINE_S), f"c3:after_started never reached; points: {control.points}"
        after = time.monotonic()
        os.killpg(process.pid, signal.SIGKILL)
        assert _waited(process) == -signal.SIGKILL
    finally:
        _kill_group(process)
        control.close()
    *passed, armed = control.messages
    assert (armed["point"], armed["call"]) == ("after_started", "c3") and protocol.NO_WAIT_FIELD not in armed
    assert passed and all(message[protocol.NO_WAIT_FIELD] is False
                          and before <= message[protocol.SENT_FIELD] <= after for message in passed)


def test_a_now_kill_announces_its_point_and_kills_itself_reading_no_reply(order_run):
    control = ControlStandIn(("after_started", "c3"))  # never answers it
    process = order_run.launch(control, json.dumps({"at": [["after_started", "c3"]], protocol.ARMED_NOW: True}))
    try:
        assert _waited(process) == -signal.SIGKILL
    finally:
        _kill_group(process)
        control.close()
    assert control.points[-1] == ("after_started", "c3") and order_run.operations()["c3"]["status"] == "RUNNING"


@pytest.mark.parametrize("armed", ["{not json", json.dumps({"at": [["after_started"]]}), json.dumps({"at": "c3"})])
def test_an_armed_value_it_cannot_read_makes_it_wait_everywhere(order_run, armed):
    control = ControlStandIn(None)
    process = order_run.launch(control, armed)
    try:
        assert _waited(process) == 0, order_run.stderr(0)
    finally:
        _kill_group(process)
        control.close()
    assert len(control.messages) > 20 and not any(protocol.NO_WAIT_FIELD in message for message in control.messages)
