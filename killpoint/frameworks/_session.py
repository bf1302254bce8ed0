"""One process's link to killpoint while it runs a framework's steps: plan, classes, ledger, crash points.

Built once per process from the protocol environment (``current``), so every
step wrapper, checkpointer and call site of the process shares one control
connection and one ledger descriptor. LangGraph's ``async`` durability saves a
step's writes from a background thread while the next step runs on the
caller's, so the crash points go through one lock: two threads never
interleave their lines on the one connection.

The intent file ``killpoint-steps.jsonl`` (in the workload folder, fsynced per
record) is the steps' own memory across incarnations: a step writes
``entered`` before its invocation record and the framework's record of it
writes ``recorded``; a step entered in an earlier incarnation and never
recorded may have had its effect, which is what the guard checks for.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from typing import Any

from killpoint import protocol
from killpoint.client import AppendOnlyFile, Rendezvous, WorkloadEnv, read_json_lines
from killpoint.fake_tools.ledger import Ledger
from killpoint.fake_tools.world import World

INTENTS_NAME = "killpoint-steps.jsonl"
ENTERED = "entered"
RECORDED = "recorded"
# The classes whose interrupted call the decision matrix VERIFYs (unless it asks the user).
_VERIFIED_CLASSES = (protocol.NON_IDEMPOTENT, protocol.UNKNOWN)


class SerialRendezvous(Rendezvous):
    """The process's one control connection, safe to announce from any thread."""

    def __init__(self, control_path: str | None, incarnation: int) -> None:
        super().__init__(control_path, incarnation)
        self._lock = threading.Lock()

    def point(self, point: str, *, call: str | None = None, op: str | None = None) -> None:
        with self._lock:
            super().point(point, call=call, op=op)


class StepLedger(Ledger):
    """The fake tools' ledger, announcing ``step_entered`` right after each invocation record.

    ``fake_tools.base.invoke`` writes the invocation and acts in one call; this
    is how a fake tool's step, like a user's, is entered between the two.
    """

    def __init__(self, path: os.PathLike[str], incarnation: int, rendezvous: Rendezvous) -> None:
        super().__init__(path, incarnation)
        self._rendezvous = rendezvous

    def invoked(self, tool: str, call: str) -> None:
        super().invoked(tool, call)
        self._rendezvous.point(protocol.STEP_ENTERED, call=call)


@dataclass
class Session:
    """What the steps of one incarnation share."""

    env: WorkloadEnv
    calls: dict[str, dict[str, Any]]  # the plan's calls by call id, in plan order
    catalogue: dict[str, Any]
    world: World
    rendezvous: Rendezvous
    ledger: Ledger
    intents: AppendOnlyFile
    # Entered in an earlier incarnation, never recorded by the framework: call id -> its intent marker, which
    # holds the class its tool had then (recovery judges the step by that snapshot, as the rules say).
    unfinished: dict[str, dict[str, Any]]
    ran_here: set[str] = field(default_factory=set)  # the steps this process ran (or verified)

    def tool_of(self, call_id: str, default: str) -> str:
        """The planned call's tool (the name its class is looked up by), or ``default`` for an unplanned call."""
        return str(self.calls.get(call_id, {}).get("tool", default))

    def class_of(self, tool: str) -> str:
        return str(self.catalogue.get("tools", {}).get(tool, self.catalogue.get("default", protocol.UNKNOWN)))

    def needs_check(self, call_id: str, tool: str) -> bool:
        """Whether recovery must VERIFY this step: it may have acted in an earlier incarnation and its class
        then (not a question to the user) makes a blind re-run unsafe. The class is the marker's snapshot, not
        this incarnation's catalogue: a catalogue that drifted since does not change what the step was."""
        intent = self.unfinished.get(call_id)
        if intent is None:
            return False
        interactive = intent.get("interactive", tool in self.catalogue.get("interactive", ()))
        return not interactive and intent.get("class", self.class_of(tool)) in _VERIFIED_CLASSES

    def point(self, point: str, call_id: str) -> None:
        self.rendezvous.point(point, call=call_id)

    def enter(self, call_id: str, tool: str) -> None:
        """The intent marker, durable before the step's invocation record, with its tool's class snapshot."""
        self.intents.append({ENTERED: call_id, "incarnation": self.env.incarnation, "class": self.class_of(tool),
                             "interactive": tool in self.catalogue.get("interactive", ())})

    def saving(self, call_id: str) -> None:
        """The framework's saver has been handed the result of a step this process ran, not yet saved: announce it.

        Nothing is marked: the step is not recorded yet, so a recovery that finds it missing must check it.
        """
        if call_id in self.ran_here:
            self.point(protocol.STEP_SAVING, call_id)

    def recorded(self, call_id: str) -> None:
        """The framework has durably recorded the result of a step this process ran: mark it, announce it."""
        if call_id not in self.ran_here:
            return  # a result replayed from the store, or a task that is not one of the plan's steps
        self.intents.append({RECORDED: call_id, "incarnation": self.env.incarnation})
        self.point(protocol.STEP_RECORDED, call_id)


_lock = threading.Lock()
_session: Session | None = None


def current() -> Session | None:
    """This process's session, or None when killpoint did not start it (the steps then just run)."""
    global _session
    if not os.environ.get(protocol.ENV_RUN_DIR):
        return None
    with _lock:
        if _session is None:
            _session = _open(WorkloadEnv.from_environ())
        return _session


def _open(env: WorkloadEnv) -> Session:
    plan = json.loads(env.plan_path.read_text())
    rendezvous = SerialRendezvous(env.control_path, env.incarnation)
    intents_path = env.run_dir / INTENTS_NAME
    return Session(
        env=env,
        calls={call["call_id"]: call for call in plan["calls"]},
        catalogue=json.loads(env.catalogue_path.read_text()),
        world=World(env.world),
        rendezvous=rendezvous,
        ledger=StepLedger(env.ledger_path, env.incarnation, rendezvous),
        unfinished=_unfinished(intents_path),
        intents=AppendOnlyFile(intents_path, durable=True),
    )


def _unfinished(path: os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The steps whose last ``entered`` has no ``recorded`` after it, each with that marker (the class its last
    attempt was entered with); a torn last record (the kill cut it) is cut off."""
    records, torn_tail = read_json_lines(path)
    if torn_tail is not None:
        os.truncate(path, os.stat(path).st_size - len(torn_tail))
    unfinished: dict[str, dict[str, Any]] = {}
    for record in records:
        if ENTERED in record:
            unfinished[record[ENTERED]] = record
        elif RECORDED in record:
            unfinished.pop(record[RECORDED], None)
    return unfinished


def reset() -> None:
    """Forget the session (tests run several incarnations in one interpreter)."""
    global _session
    with _lock:
        if _session is not None:
            _session.rendezvous.close()
            _session.ledger.close()
            _session.intents.close()
        _session = None
