"""A protocol-v1 agent runtime written from the spec alone, sharing no code with killpoint.

It is deliberately independent: it imports only the Python standard library (no
``harness``, ``fake_tools`` or ``scenarios`` module) and reaches the fake tools
the way a runtime in another language would: over HTTP at ``$KILLPOINT_TOOLS_URL``,
the tool service the harness runs (``urllib``, one request per call), or with
``--tools-command`` by running ``python -m killpoint.fake_tools``. So when
killpoint passes it, the harness has judged a runtime through the protocol alone
(environment, journal, ledger, control socket), and a mistake shared by the
harness and its own client code could not hide behind it.

On every start it reads its journal, cutting off a torn last line. If any call
was started before, it first writes one decision per planned call and only then
acts, in plan order, issuing the calls that never started as it goes.

Run it under killpoint: ``--workload "{python} /path/to/scenarios/standalone/runtime.py"``.
``--bug no-fsync`` makes it a mutant that never fsyncs (neither a record nor the
journal's folder): right under every SIGKILL, since the page cache outlives the
process, and caught only when the power fails (``killpoint run --power-loss``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Mapping
from typing import Any, BinaryIO

Record = dict[str, Any]

# The protocol's names, copied from the spec rather than imported: a name killpoint itself misspelt
# would otherwise be shared and pass unseen (tests/integration/test_standalone_runtime.py holds each
# one equal to killpoint.protocol's).
ENV_PLAN, ENV_CATALOGUE, ENV_RUN_DIR = "KILLPOINT_PLAN", "KILLPOINT_CATALOGUE", "KILLPOINT_RUN_DIR"
ENV_CONTROL, ENV_INCARNATION = "KILLPOINT_CONTROL", "KILLPOINT_INCARNATION"
ENV_TOOLS_URL = "KILLPOINT_TOOLS_URL"
JOURNAL_NAME = "journal.jsonl"
BEFORE_STARTED, AFTER_STARTED = "before_started", "after_started"
BEFORE_FINISHED, AFTER_FINISHED = "before_finished", "after_finished"
AFTER_DECISIONS, AFTER_VERIFY = "after_decisions", "after_verify"
STARTED, FINISHED, DECISION, VERIFIED, TASK = "started", "finished", "decision", "verified", "task"
RUNNING, SUCCEEDED, FAILED, COMPLETED = "RUNNING", "SUCCEEDED", "FAILED", "COMPLETED"
NOT_STARTED, OUTCOME_UNKNOWN = "NOT_STARTED", "UNKNOWN"
SKIP, RETRY, VERIFY = "SKIP", "RETRY", "VERIFY"
READ_ONLY, IDEMPOTENT_WRITE = "READ_ONLY", "IDEMPOTENT_WRITE"

RETRY_SAFE_CLASSES = (READ_ONLY, IDEMPOTENT_WRITE)
REPLY_OK = b"ok\n"  # the harness's replies to a crash point: go on,
REPLY_KILL = b"kill\n"  # or die at once


class Journal:
    """``journal.jsonl``: folded once at start, then one write and one fsync per record.

    Its folder is fsynced at every start, so the journal's name is as durable as
    its records (an fsync of a file does not make its name survive a power
    loss): this start may have created it, or the one before was killed first.
    ``durable=False`` is the bug of never fsyncing anything.
    """

    def __init__(self, path: str, *, durable: bool = True) -> None:
        self.ops: dict[str, Record] = {}  # call_id -> its latest started record, plus "status"
        self.completed = False
        self.durable = durable
        with open(path, "ab+") as stream:
            stream.seek(0)
            data = stream.read()
        intact = 0
        for line in data.splitlines(keepends=True):
            try:
                record = json.loads(line) if line.endswith(b"\n") else None
            except ValueError:
                record = None
            if not isinstance(record, dict):
                if intact + len(line) < len(data):
                    sys.exit(f"{path}: the record at byte {intact} is corrupt and is not the last one")
                os.truncate(path, intact)  # a torn last line: a crash cut the write short
                break
            self._fold(record)
            intact += len(line)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        if durable:
            folder = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)

    def append(self, record: Record) -> None:
        """Make ``record`` durable before the caller goes on (write-ahead)."""
        os.write(self._fd, (json.dumps(record) + "\n").encode())
        if self.durable:
            os.fsync(self._fd)
        self._fold(record)

    def _fold(self, record: Record) -> None:
        if record["kind"] == STARTED:
            self.ops[record["call"]] = {**record, "status": RUNNING}
        elif record["kind"] == FINISHED:
            started = next(op for op in self.ops.values() if op["op"] == record["op"])
            started["status"] = record["status"]
        elif record["kind"] == TASK:
            self.completed = record.get("status") == COMPLETED


class Control:
    """The crash-point rendezvous: one connection; send a JSON line, block for the reply line.

    ``kill`` asks for a crash right here: the process group (this runtime and its
    tool processes, for the harness started it as a group of its own) is
    SIGKILLed at once, and a process the signal spares (a container's PID 1)
    exits without running another line.
    """

    def __init__(self, path: str | None, incarnation: int) -> None:
        self.path, self.incarnation = path, incarnation
        self.connection: socket.socket | None = None
        self.replies: BinaryIO | None = None

    def point(self, point: str, call: str | None = None, op: str | None = None) -> None:
        if not self.path:
            return  # no control socket: run freely
        if self.connection is None or self.replies is None:
            self.connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.connection.connect(self.path)
            self.replies = self.connection.makefile("rb")
        message = {"point": point, "call": call, "op": op, "incarnation": self.incarnation}
        self.connection.sendall((json.dumps(message) + "\n").encode())
        reply = self.replies.readline()
        if reply == REPLY_KILL:
            os.killpg(os.getpgrp(), signal.SIGKILL)
            os._exit(128 + signal.SIGKILL)
        if not reply:
            sys.exit(f"the harness closed the control socket at {point} {call or ''}")
        if reply != REPLY_OK:
            sys.exit(f"protocol error: the harness replied {reply[:80]!r} at {point} {call or ''}")


class Runtime:
    """One incarnation: recover what the journal left open, then carry the plan to its end."""

    def __init__(self, environ: Mapping[str, str], *, durable: bool = True, tools_command: bool = False) -> None:
        with open(environ[ENV_PLAN]) as plan, open(environ[ENV_CATALOGUE]) as catalogue:
            self.plan, self.catalogue = json.load(plan), json.load(catalogue)
        self.incarnation = int(environ.get(ENV_INCARNATION, "0"))
        self.tools_url = None if tools_command else environ.get(ENV_TOOLS_URL)
        self.journal = Journal(os.path.join(environ[ENV_RUN_DIR], JOURNAL_NAME), durable=durable)
        self.control = Control(environ.get(ENV_CONTROL), self.incarnation)

    def run(self) -> None:
        if self.journal.completed:
            return
        actions = self.decide_every_call() if self.journal.ops else {}
        for call in self.plan["calls"]:
            action = actions.get(call["call_id"])
            if action == VERIFY:
                self.verify_then_redo(call)
            elif action == RETRY or call["call_id"] not in self.journal.ops:
                self.perform(call)
        self.journal.append({"kind": TASK, "status": COMPLETED})

    def decide_every_call(self) -> dict[str, str]:
        """Recovery: a durable decision for every planned call before acting on any."""
        actions = {}
        for call in self.plan["calls"]:
            started = self.journal.ops.get(call["call_id"])
            found = NOT_STARTED if started is None else started["status"]
            found = OUTCOME_UNKNOWN if found == RUNNING else found  # the crash hid its outcome
            actions[call["call_id"]] = action = self.action_for(found, started)
            decision = {"kind": DECISION, "call": call["call_id"], "found": found, "action": action,
                        "incarnation": self.incarnation}
            self.journal.append(decision | ({"op": started["op"]} if started else {}))
        self.control.point(AFTER_DECISIONS)
        return actions

    @staticmethod
    def action_for(found: str, started: Record | None) -> str:
        """The decision matrix, on the class snapshot the ``started`` record carries."""
        if found != OUTCOME_UNKNOWN or started is None:
            return SKIP
        if started["interactive"] or started["class"] in RETRY_SAFE_CLASSES:
            return RETRY
        return VERIFY

    def verify_then_redo(self, call: Record) -> None:
        op = self.journal.ops[call["call_id"]]["op"]
        effect_found = self.fake_tool("probe", call)["effect_found"]
        self.journal.append({"kind": VERIFIED, "op": op, "effect_found": effect_found})
        self.control.point(AFTER_VERIFY, call["call_id"], op)
        if effect_found:
            self.journal.append({"kind": FINISHED, "op": op, "status": SUCCEEDED})
        else:
            self.perform(call)

    def perform(self, call: Record) -> None:
        """One attempt of a call: durable ``started``, the tool, durable ``finished``."""
        call_id, tool = call["call_id"], call["tool"]
        previous = self.journal.ops.get(call_id)
        op = previous["op"] if previous else f"{self.plan['task_id']}-op{len(self.journal.ops) + 1}"
        self.control.point(BEFORE_STARTED, call_id, op)
        self.journal.append({"kind": STARTED, "op": op, "call": call_id, "tool": tool,
                             "class": self.catalogue["tools"].get(tool, self.catalogue["default"]),
                             "interactive": tool in self.catalogue["interactive"],
                             "attempt": previous["attempt"] + 1 if previous else 1})
        self.control.point(AFTER_STARTED, call_id, op)
        ok = self.fake_tool("call", call, op)["ok"]
        self.finish(call_id, op, SUCCEEDED if ok else FAILED)

    def finish(self, call_id: str, op: str, status: str) -> None:
        self.control.point(BEFORE_FINISHED, call_id, op)
        self.journal.append({"kind": FINISHED, "op": op, "status": status})
        self.control.point(AFTER_FINISHED, call_id, op)

    def fake_tool(self, command: str, call: Record, op: str | None = None) -> Record:
        """The fake tools' JSON answer to ``command`` (``call`` or ``probe``), at the tool service when there is
        one and the runtime may use it, else from ``python -m killpoint.fake_tools`` (exit 1: a FAILED call)."""
        if self.tools_url:
            body = {"call": call["call_id"], "args": call.get("args", {}), **({"op": op} if command == "call" else {})}
            request = urllib.request.Request(f"{self.tools_url}/{command}s/{call['tool']}",
                                             data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=600) as answer:  # the harness holds a call at a crash point
                return json.loads(answer.read())
        argv = [sys.executable, "-m", "killpoint.fake_tools", command, call["tool"], "--call", call["call_id"],
                *(("--op", op) if op is not None else ()), "--args", json.dumps(call.get("args", {}))]
        done = subprocess.run(argv, stdout=subprocess.PIPE, check=False)
        try:
            return json.loads(done.stdout)
        except ValueError:  # a crash exits 1 too, but prints no answer
            sys.exit(f"fake_tools {command} {call['tool']} ({call['call_id']}) exited {done.returncode}, no answer")


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A protocol-v1 agent runtime written from the spec alone.")
    parser.add_argument("--bug", choices=["no-fsync"], help="no-fsync: never fsync the journal or its folder")
    parser.add_argument("--tools-command", action="store_true",
                        help="run the fake tools' command line per call, even where the harness serves them")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_arguments(sys.argv[1:])
    Runtime(os.environ, durable=arguments.bug != "no-fsync", tools_command=arguments.tools_command).run()
