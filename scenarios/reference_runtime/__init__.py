"""The reference agent runtime: carries out a plan and recovers by the rules.

It keeps a write-ahead journal around every tool call, and on every start scans
that journal: if it finds an unfinished task it writes one decision per planned
call (SKIP / RETRY / VERIFY, from the decision matrix on the class snapshot of
the ``started`` record), then acts on them and goes on with the plan.

Mutant runtimes subclass it and override one method each, so every mutant is
the reference with exactly one bug.

Run it as ``python -m killpoint.scenarios.reference_runtime`` under killpoint
(``__main__.py``). This module only defines, and reads no environment when
imported, so it says the fork server may keep it warm (``__killpoint_warm__``):
its classes are made once in the server, not in every incarnation.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Protocol

from killpoint import protocol as p
from killpoint.client import AppendOnlyFile, Rendezvous, WorkloadEnv, read_json_lines
from killpoint.fake_tools.base import invoke, verify
from killpoint.fake_tools.ledger import Ledger
from killpoint.fake_tools.world import World

__killpoint_warm__ = True  # defines only; the fork server keeps it imported (README, Backends)


@dataclass
class Operation:
    """One planned call as the journal knows it."""

    op: str
    call: str
    tool: str
    tool_class: str
    interactive: bool
    attempt: int
    status: str = p.RUNNING


class Journal(Protocol):
    """Where the runtime makes each record durable before it goes on: ``journal.jsonl``, or a store of its own."""

    def append(self, record: dict[str, Any]) -> None: ...


class ReferenceRuntime:
    def __init__(self, env: WorkloadEnv) -> None:
        self.env = env
        self.plan = json.loads(env.plan_path.read_text())
        self.catalogue = json.loads(env.catalogue_path.read_text())
        self.calls = {call["call_id"]: call for call in self.plan["calls"]}
        self.world = World(env.world, durable=env.world_durable)
        self.ledger = Ledger(env.ledger_path, env.incarnation)
        self.rendezvous = Rendezvous(env.control_path, env.incarnation)
        self.operations: dict[str, Operation] = {}
        self.completed = False
        self.journal = self.open_journal()

    # -- journal -------------------------------------------------------------

    def open_journal(self) -> Journal:
        """Scan the journal, drop a torn last record (a crash cut it), and open it for appends.

        The cut is made durable by the first record's fsync (the file's, whole);
        until then a power loss brings back the same torn tail, cut again next
        start. The file's name is made durable by ``AppendOnlyFile``.
        """
        path = self.env.journal_path
        records, torn_tail = read_json_lines(path)
        if torn_tail is not None:
            os.truncate(path, path.stat().st_size - len(torn_tail))
        for record in records:
            self.fold(record)
        return AppendOnlyFile(path, durable=True)

    def fold(self, record: dict[str, Any]) -> None:
        kind = record.get("kind")
        if kind == p.STARTED:
            self.operations[record["call"]] = Operation(
                record["op"], record["call"], record["tool"], record["class"],
                record["interactive"], record["attempt"],
            )
        elif kind == p.FINISHED:
            self.operation_by_id(record["op"]).status = record["status"]
        elif kind == p.TASK and record.get("status") == p.COMPLETED:
            self.completed = True

    def operation_by_id(self, op: str) -> Operation:
        return next(operation for operation in self.operations.values() if operation.op == op)

    def write(self, record: dict[str, Any]) -> None:
        self.journal.append(record)
        self.fold(record)

    # -- classification ------------------------------------------------------

    def class_of(self, tool: str) -> str:
        return self.catalogue["tools"].get(tool, self.catalogue.get("default", p.UNKNOWN))

    def is_interactive(self, tool: str) -> bool:
        return tool in self.catalogue.get("interactive", ())

    def new_op_id(self) -> str:
        return f"{self.plan['task_id']}-op{len(self.operations) + 1}"

    # -- the decision matrix -------------------------------------------------

    def found_status(self, call_id: str) -> str:
        operation = self.operations.get(call_id)
        if operation is None:
            return p.NOT_STARTED
        return p.OUTCOME_UNKNOWN if operation.status == p.RUNNING else operation.status

    def decide(self, found: str, operation: Operation | None) -> str:
        if found != p.OUTCOME_UNKNOWN or operation is None:
            return p.SKIP
        if operation.interactive or operation.tool_class in (p.READ_ONLY, p.IDEMPOTENT_WRITE):
            return p.RETRY
        return p.VERIFY

    # -- running -------------------------------------------------------------

    def run(self) -> int:
        if self.completed:
            return 0
        if self.operations:
            self.recover()
        for call_id in self.calls:
            if call_id not in self.operations:
                self.execute(call_id)
        self.write({"kind": p.TASK, "status": p.COMPLETED})
        return 0

    def recover(self) -> None:
        """Decide for every planned call before acting on any, then act."""
        decisions = []
        for call_id in self.calls:
            found = self.found_status(call_id)
            operation = self.operations.get(call_id)
            action = self.decide(found, operation)
            decisions.append((call_id, action))
            self.write_decision(call_id, found, action, operation)
        self.rendezvous.point(p.AFTER_DECISIONS)
        for call_id, action in decisions:
            if action == p.RETRY:
                self.execute(call_id)
            elif action == p.VERIFY:
                self.verify_then_redo(call_id)

    def write_decision(self, call_id: str, found: str, action: str, operation: Operation | None) -> None:
        record = {"kind": p.DECISION, "call": call_id, "found": found, "action": action,
                  "incarnation": self.env.incarnation}
        if operation is not None:
            record["op"] = operation.op
        self.write(record)

    def effect_present(self, call_id: str) -> bool:
        """VERIFY's read-only check: the fake tool's probe, answered from the world."""
        call = self.calls[call_id]
        return verify(call["tool"], call_id, call.get("args", {}), world=self.world, ledger=self.ledger)

    def verify_then_redo(self, call_id: str) -> None:
        operation = self.operations[call_id]
        effect_found = self.effect_present(call_id)
        self.write({"kind": p.VERIFIED, "op": operation.op, "effect_found": effect_found})
        self.rendezvous.point(p.AFTER_VERIFY, call=call_id, op=operation.op)
        if effect_found:
            self.write({"kind": p.FINISHED, "op": operation.op, "status": p.SUCCEEDED})
        else:
            self.execute(call_id)

    def execute(self, call_id: str) -> None:
        """One tool call between a durable ``started`` and a durable ``finished``."""
        previous = self.operations.get(call_id)
        op = previous.op if previous else self.new_op_id()
        attempt = previous.attempt + 1 if previous else 1
        self.rendezvous.point(p.BEFORE_STARTED, call=call_id, op=op)
        self.journal_started(call_id, op, attempt)
        self.rendezvous.point(p.AFTER_STARTED, call=call_id, op=op)
        self.run_then_finish(call_id, op)

    def journal_started(self, call_id: str, op: str, attempt: int) -> None:
        tool = self.calls[call_id]["tool"]
        self.write({"kind": p.STARTED, "op": op, "call": call_id, "tool": tool, "class": self.class_of(tool),
                    "interactive": self.is_interactive(tool), "attempt": attempt})

    def run_then_finish(self, call_id: str, op: str) -> None:
        ok = self.run_tool(call_id, op)
        self.finish(call_id, op, p.SUCCEEDED if ok else p.FAILED)

    def run_tool(self, call_id: str, op: str) -> bool:
        call = self.calls[call_id]
        result = invoke(call["tool"], call_id, call.get("args", {}), world=self.world, ledger=self.ledger,
                        rendezvous=self.rendezvous, op=op)
        return result.ok

    def finish(self, call_id: str, op: str, status: str) -> None:
        self.rendezvous.point(p.BEFORE_FINISHED, call=call_id, op=op)
        self.write({"kind": p.FINISHED, "op": op, "status": status})
        self.rendezvous.point(p.AFTER_FINISHED, call=call_id, op=op)


def main(runtime_class: type[ReferenceRuntime] = ReferenceRuntime) -> int:
    return runtime_class(WorkloadEnv.from_environ()).run()
