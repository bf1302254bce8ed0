"""killpoint.frameworks in-process: the order of a step's ledger records and crash points, the guard that
probes an interrupted NON_IDEMPOTENT step before redoing it, tool failures returned as values, the saving
and record points from LangGraph's checkpointer, and one control connection shared safely by threads.

The harness's end of the control socket is a fake that answers every point (or holds one) and notes,
at each point, the ledger lines written before it: so the tests see one interleaved sequence.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import pytest

from killpoint import protocol
from killpoint.catalogue import REFERENCE_CATALOGUE, load_catalogue
from killpoint.fake_tools.world import seed_world
from killpoint.frameworks import _session, fake_step, step
from killpoint.frameworks._session import INTENTS_NAME

PLAN = {"task_id": "shop", "calls": [
    {"call_id": "c1", "tool": "read_file", "args": {"path": "cart.txt"}},
    {"call_id": "c2", "tool": "write_file", "args": {"path": "receipt.txt", "content": "tea\n"}},
    {"call_id": "c3", "tool": "charge_card", "args": {}},
    {"call_id": "c4", "tool": "append", "args": {"path": "log.txt", "text": "sent\n"}},
    {"call_id": "c5", "tool": "ask_user", "args": {"question": "ok?"}},
]}


@dataclass
class FakeHarness:
    """Serves the control socket: answers each point (unless ``hold`` names it) and notes the ledger before it."""

    path: str
    ledger: Path
    hold: set[str] = field(default_factory=set)
    events: list[str] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    _seen: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        self._seen = len(self.ledger.read_text().splitlines()) if self.ledger.exists() else 0  # an earlier one's
        self._listener = socket.socket(socket.AF_UNIX)
        self._listener.bind(self.path)
        self._listener.listen()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        for raw in connection.makefile("rb"):
            message = json.loads(raw)
            name = f"{message['call']}:{message['point']}"
            with self._lock:
                self._note_ledger()
                self.events.append(name)
            if name in self.hold:  # answered on release; meanwhile the connection is read on
                threading.Thread(target=self._answer_on_release, args=(connection,), daemon=True).start()
            else:
                connection.sendall(b"ok\n")

    def _answer_on_release(self, connection: socket.socket) -> None:
        self.release.wait(10)
        connection.sendall(b"ok\n")

    def _note_ledger(self) -> None:
        lines = self.ledger.read_text().splitlines() if self.ledger.exists() else []
        for line in lines[self._seen:]:
            record = json.loads(line)
            kind = next(kind for kind in protocol.TOOL_LEDGER_KINDS if kind in record)
            self.events.append(f"{record['call']}:ledger {kind}")
        self._seen = len(lines)

    def sequence(self) -> list[str]:
        with self._lock:
            self._note_ledger()
            return list(self.events)

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def incarnation(tmp_path, monkeypatch) -> Iterator[Callable[[int], FakeHarness]]:
    """Start incarnation N of a workload in this process: protocol environment, world, fake harness."""
    run_dir = tmp_path / "workload"
    run_dir.mkdir()
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    catalogue = load_catalogue(REFERENCE_CATALOGUE).with_class("charge_card", protocol.NON_IDEMPOTENT)
    (tmp_path / "catalogue.json").write_text(json.dumps(catalogue.to_protocol()))
    seed_world(tmp_path / "world", {"cart.txt": "tea\n"}, {})
    harnesses: list[FakeHarness] = []

    def start(number: int) -> FakeHarness:
        _session.reset()
        harness = FakeHarness(str(tmp_path / f"c{number}.sock"), tmp_path / "ledger.jsonl")
        harness.start()
        harnesses.append(harness)
        for name, value in {protocol.ENV_RUN_DIR: run_dir, protocol.ENV_PLAN: tmp_path / "plan.json",
                            protocol.ENV_CATALOGUE: tmp_path / "catalogue.json", protocol.ENV_WORLD: tmp_path / "world",
                            protocol.ENV_LEDGER: tmp_path / "ledger.jsonl", protocol.ENV_CONTROL: harness.path,
                            protocol.ENV_INCARNATION: number}.items():
            monkeypatch.setenv(name, str(value))
        return harness

    yield start
    _session.reset()
    for harness in harnesses:
        harness.close()


def intents(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "workload" / INTENTS_NAME
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def charge(amount: int, charges: list[int]) -> str:
    charges.append(amount)
    return f"charged {amount}"


def test_a_step_writes_its_ledger_records_between_its_crash_points_in_order(incarnation, tmp_path):
    harness = incarnation(0)
    charges: list[int] = []
    assert step("c3", charge)(5, charges) == "charged 5" and charges == [5]
    assert harness.sequence() == ["c3:ledger invoked", "c3:step_entered", "c3:ledger effect", "c3:after_effect",
                                  "c3:step_returned"]
    assert intents(tmp_path) == [ENTERED_C3]


def test_the_intent_marker_is_durable_before_the_invocation_record(incarnation, tmp_path):
    harness = incarnation(0)
    harness.hold.add("c3:step_entered")
    worker = threading.Thread(target=step("c3", charge), args=(5, []))
    worker.start()
    deadline = time.monotonic() + 10
    while "c3:step_entered" not in harness.sequence() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert harness.sequence() == ["c3:ledger invoked", "c3:step_entered"]
    assert intents(tmp_path) == [ENTERED_C3]  # a kill now finds the step entered
    harness.release.set()
    worker.join(10)


def test_step_is_also_a_decorator(incarnation):
    harness = incarnation(0)

    @step("c3", probe=lambda amount: None)
    def charge_card(amount: int) -> int:
        return amount

    assert charge_card.__name__ == "c3" and charge_card(2) == 2
    assert "c3:ledger invoked" in harness.sequence()


def test_a_read_only_step_records_no_effect(incarnation):
    harness = incarnation(0)
    step("c1", lambda: "tea")()
    assert "c1:ledger effect" not in harness.sequence()


def test_the_wrapper_is_named_after_its_call_so_langgraph_names_the_node_after_it():
    from langgraph.graph import StateGraph

    class State(TypedDict, total=False):
        c3: str

    wrapped = step("c3", charge)
    assert wrapped.__name__ == "c3"
    assert "c3" in StateGraph(State).add_node(wrapped).nodes


def test_outside_killpoint_the_step_only_calls_the_function(monkeypatch, tmp_path):
    monkeypatch.delenv(protocol.ENV_RUN_DIR, raising=False)
    _session.reset()
    monkeypatch.chdir(tmp_path)
    charges: list[int] = []
    assert step("c3", charge, probe=lambda *_: "found")(7, charges) == "charged 7" and charges == [7]
    assert list(tmp_path.iterdir()) == []


def test_a_step_that_raises_returns_its_failure_as_a_value(incarnation, capsys):
    harness = incarnation(0)

    def declined() -> str:
        raise RuntimeError("card declined")

    assert step("c3", declined)() == {"error": "c3 (charge_card): RuntimeError: card declined"}
    # Said on stderr too: a StateGraph whose state has no "error" key drops the value silently.
    assert "step c3 (charge_card): RuntimeError: card declined" in capsys.readouterr().err
    # No effect is claimed; the step still passes its points and returns to the framework, which records it.
    assert harness.sequence() == ["c3:ledger invoked", "c3:step_entered", "c3:after_effect", "c3:step_returned"]


def test_a_fake_tool_that_fails_returns_its_failure_as_a_value(incarnation, tmp_path):
    incarnation(0)
    (tmp_path / "plan.json").write_text(json.dumps(
        {"task_id": "shop", "calls": [{"call_id": "c1", "tool": "read_file", "args": {"path": "absent.txt"}}]}))
    _session.reset()
    result = fake_step("c1")({"any": "state"})
    assert result["c1"]["ok"] is False and "absent.txt" in result["c1"]["error"]


def test_a_fake_step_passes_the_same_points_with_the_fake_tools_own_records(incarnation, tmp_path):
    harness = incarnation(0)
    assert fake_step("c4")()["c4"]["ok"] is True
    assert harness.sequence() == ["c4:ledger invoked", "c4:step_entered", "c4:ledger effect", "c4:after_effect",
                                  "c4:step_returned"]


# The intent marker of c3 (charge_card, NON_IDEMPOTENT in this catalogue) entered by incarnation 0.
ENTERED_C3 = {"entered": "c3", "incarnation": 0, "class": protocol.NON_IDEMPOTENT, "interactive": False}


def entered_before(tmp_path: Path, *records: dict[str, Any]) -> None:
    """What an earlier incarnation left in the intent file (it was killed inside the step)."""
    path = tmp_path / "workload" / INTENTS_NAME
    path.write_text("".join(json.dumps(record) + "\n" for record in records))


def test_an_interrupted_non_idempotent_step_whose_effect_is_there_is_not_redone(incarnation, tmp_path):
    entered_before(tmp_path, {"entered": "c3", "incarnation": 0})
    harness = incarnation(1)
    charges: list[int] = []
    assert step("c3", charge, probe=lambda amount, _: f"charged {amount}")(5, charges) == "charged 5"
    assert charges == []
    assert harness.sequence() == ["c3:ledger probe", "c3:step_returned"]


def test_an_interrupted_non_idempotent_step_whose_effect_is_absent_probes_then_redoes(incarnation, tmp_path):
    entered_before(tmp_path, {"entered": "c3", "incarnation": 0})
    harness = incarnation(1)
    charges: list[int] = []
    assert step("c3", charge, probe=lambda *_: None)(5, charges) == "charged 5" and charges == [5]
    assert harness.sequence()[:3] == ["c3:ledger probe", "c3:ledger invoked", "c3:step_entered"]


def test_the_guard_judges_a_step_by_the_class_it_was_entered_with_not_a_drifted_catalogue(incarnation, tmp_path):
    # Incarnation 0 entered c3 as NON_IDEMPOTENT; recovery is handed a catalogue that calls it IDEMPOTENT_WRITE
    # (--drift): the step may have acted as what it was, so it is still checked before it runs again.
    entered_before(tmp_path, ENTERED_C3)
    drifted = load_catalogue(REFERENCE_CATALOGUE).with_class("charge_card", protocol.IDEMPOTENT_WRITE)
    (tmp_path / "catalogue.json").write_text(json.dumps(drifted.to_protocol()))
    harness = incarnation(1)
    charges: list[int] = []
    assert step("c3", charge, probe=lambda amount, _: f"charged {amount}")(5, charges) == "charged 5"
    assert charges == [] and harness.sequence() == ["c3:ledger probe", "c3:step_returned"]


def test_a_fake_step_is_guarded_by_its_fake_tools_probe(incarnation, tmp_path):
    incarnation(0)
    fake_step("c4")()
    entered_before(tmp_path, {"entered": "c4", "incarnation": 0})
    harness = incarnation(1)
    assert fake_step("c4", probe=True)()["c4"]["verified"] is True
    assert harness.sequence() == ["c4:ledger probe", "c4:step_returned"]
    assert (tmp_path / "world" / "files" / "log.txt").read_text() == "sent\n"


@pytest.mark.parametrize(("call", "tool_fn", "why"), [
    ("c2", lambda: "written", "an IDEMPOTENT_WRITE is retried"),
    ("c5", lambda: "yes", "a question to the user is asked again"),
])
def test_a_step_the_matrix_retries_is_redone_without_a_probe(incarnation, tmp_path, call, tool_fn, why):
    entered_before(tmp_path, {"entered": call, "incarnation": 0})
    harness = incarnation(1)
    step(call, tool_fn, probe=lambda: "found")()
    assert f"{call}:ledger probe" not in harness.sequence(), why


def test_a_step_the_framework_recorded_is_not_probed_again(incarnation, tmp_path):
    entered_before(tmp_path, {"entered": "c3", "incarnation": 0}, {"recorded": "c3", "incarnation": 0})
    harness = incarnation(1)
    charges: list[int] = []
    step("c3", charge, probe=lambda *_: "found")(5, charges)
    assert charges == [5] and "c3:ledger probe" not in harness.sequence()


def test_a_step_without_a_probe_is_redone_blindly_as_the_framework_does(incarnation, tmp_path):
    entered_before(tmp_path, {"entered": "c3", "incarnation": 0})
    harness = incarnation(1)
    charges: list[int] = []
    step("c3", charge)(5, charges)
    assert charges == [5] and harness.sequence()[0] == "c3:ledger invoked"


def test_a_torn_last_intent_is_cut_off_and_the_file_stays_readable(incarnation, tmp_path):
    path = tmp_path / "workload" / INTENTS_NAME
    path.write_bytes(b'{"entered": "c3", "incarnation": 0}\n{"recorded": "c')
    incarnation(1)
    step("c3", charge, probe=lambda *_: "found")(5, [])
    assert intents(tmp_path) == [{"entered": "c3", "incarnation": 0}]  # found: no new entry, nothing glued on


def test_the_checkpointer_announces_each_node_saving_then_recorded_once_it_returned(incarnation):
    """Each node's points in order, its saving and its record last. LangGraph calls put_writes from its background
    executor and, under sync, starts the next node once the superstep's checkpoint is saved, not put_writes: so
    c1's saving and record may come before c3 starts or while it runs (each point here waits for its answer,
    which makes the second the likelier)."""
    from langgraph.graph import START, StateGraph

    from killpoint.frameworks.langgraph import run

    class State(TypedDict, total=False):
        c1: str
        c3: str

    harness = incarnation(0)
    builder = StateGraph(State).add_sequence([step("c1", lambda state: {"c1": "tea"}),
                                              step("c3", lambda state: {"c3": "charged"})])
    builder.add_edge(START, "c1")
    assert run(builder, {}, durability="sync") == {"c1": "tea", "c3": "charged"}
    points = [event for event in harness.sequence() if "ledger" not in event]
    for call in ("c1", "c3"):
        assert [point for point in points if point.startswith(f"{call}:")] == [
            f"{call}:step_entered", f"{call}:after_effect", f"{call}:step_returned", f"{call}:step_saving",
            f"{call}:step_recorded"]
    incarnation(1)
    assert run(builder, {}, durability="sync") == {"c1": "tea", "c3": "charged"}  # finished: nothing re-runs


def saved_writes(tmp_path: Path) -> list[str]:
    """The task paths of the writes rows the checkpointer has saved so far."""
    path = tmp_path / "workload" / "checkpoints.sqlite"
    connection = sqlite3.connect(path, timeout=10)
    try:
        has = connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'writes'").fetchone()
        return [row[0] for row in connection.execute("SELECT task_path FROM writes")] if has else []
    finally:
        connection.close()


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_step_saving_comes_once_the_checkpointer_is_handed_the_writes_and_before_it_saves_them(
        incarnation, tmp_path, durability):
    """Held at c1's step_saving, the checkpointer has been handed c1's writes (put_writes was called) and has
    saved none of them: no writes row of c1, no ``recorded`` intent; once answered, both follow, and only then
    step_recorded."""
    from langgraph.graph import START, StateGraph

    from killpoint.frameworks.langgraph import run

    class State(TypedDict, total=False):
        c1: str
        c3: str

    harness = incarnation(0)
    harness.hold.add("c1:step_saving")
    builder = StateGraph(State).add_sequence([step("c1", lambda state: {"c1": "tea"}),
                                              step("c3", lambda state: {"c3": "charged"})])
    builder.add_edge(START, "c1")
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(run(builder, {}, durability=durability)))
    worker.start()
    deadline = time.monotonic() + 10
    while "c1:step_saving" not in harness.sequence() and time.monotonic() < deadline:
        time.sleep(0.01)
    c1_points = [event for event in harness.sequence() if event.startswith("c1:") and "ledger" not in event]
    assert c1_points == ["c1:step_entered", "c1:after_effect", "c1:step_returned", "c1:step_saving"]
    assert "~__pregel_pull, c1" not in saved_writes(tmp_path)
    assert {"recorded": "c1", "incarnation": 0} not in intents(tmp_path)
    assert "c1:step_recorded" not in harness.sequence()
    harness.release.set()
    worker.join(20)
    assert results == [{"c1": "tea", "c3": "charged"}]
    assert "~__pregel_pull, c1" in saved_writes(tmp_path)
    assert {"recorded": "c1", "incarnation": 0} in intents(tmp_path)
    sequence = harness.sequence()
    assert sequence.index("c1:step_saving") < sequence.index("c1:step_recorded")


def test_step_saving_is_announced_only_for_a_step_this_process_ran(incarnation):
    """A step's writes handed again on resume (or a task that is no planned step) announce no step_saving."""
    harness = incarnation(0)
    session = _session.current()
    assert session is not None
    session.saving("c1")
    session.ran_here.add("c3")
    session.saving("c3")
    assert harness.sequence() == ["c3:step_saving"]


@pytest.mark.parametrize(("task_path", "call"), [
    ("~__pregel_pull, c3", "c3"),
    ("~__pregel_pull, __start__", None),
    ("~__pregel_push, ~__pregel_pull, checkout, 0000000001, 0000000001", "c2"),
    ("~__pregel_push, ~__pregel_pull, checkout, 0000000009, 0000000001", None),
    ("~__pregel_pull, checkout", None),
    ("", None),
])
def test_the_checkpointer_reads_the_step_off_its_task_path(task_path, call):
    from killpoint.frameworks.langgraph import step_of

    assert step_of(task_path, ("c1", "c2", "c3")) == call


def test_a_point_from_a_second_thread_waits_for_the_first_to_be_answered(incarnation):
    """LangGraph saves writes from a background thread: its point must not interleave with the caller's."""
    harness = incarnation(0)
    harness.hold.add("c1:step_recorded")
    session = _session.current()
    assert session is not None
    writer = threading.Thread(target=session.point, args=(protocol.STEP_RECORDED, "c1"))
    writer.start()
    deadline = time.monotonic() + 10
    while "c1:step_recorded" not in harness.sequence() and time.monotonic() < deadline:
        time.sleep(0.01)
    caller = threading.Thread(target=session.point, args=(protocol.STEP_ENTERED, "c3"))
    caller.start()
    caller.join(0.3)
    assert harness.sequence() == ["c1:step_recorded"], "a second point went out while the first awaited its reply"
    harness.release.set()
    writer.join(10)
    caller.join(10)
    assert harness.sequence() == ["c1:step_recorded", "c3:step_entered"]
