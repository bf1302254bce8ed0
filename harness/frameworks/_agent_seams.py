"""Format ``agent-seams``: what the scripted model had received, read as an unmodified agent's durable record.

An agent judged at its network seams keeps no journal killpoint can read, but
the recovery rules' states have observable stand-ins at the model endpoint,
which the harness runs outside the agent and whose record no kill can touch
(``harness/agents/services.py`` writes it, one line per model request and
reply, a copy at each kill and at the end):

- SUCCEEDED: a model request carried the call's result, not marked unknown
  (the script counts it ``done``): the model had the result, so the call must
  never reach its tool again (SKIP);
- no record: the model never had its result. The call was interrupted if its
  request reached the tool before the kill (the ledger's invocation line, which
  the black-box rules read), and must then be RETRIED or VERIFIED by its tool's
  class; else it had not started, whatever the model had chosen: an agent
  killed after the model chose a call, before it called the tool, may ask the
  model again and run the call once (a model's choice is no start: only the
  tool service sees one). So this store records no step when it begins
  (``records_start`` False), and write-ahead's started half is not judged;
- the task completed: the model's final answer was sent.

A call the model had the result of stays SUCCEEDED even if a restarted agent
forgets it and shows the model a shorter conversation: what the model had
received is what the rules judge from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from killpoint import protocol
from killpoint.harness.evidence import Line, read_lines
from killpoint.harness.model import DurableState, Plan, StepRecord

SEAMS_FILE = "agent-seams.jsonl"
FORMAT = "agent-seams"
REQUEST, REPLY = "model_request", "model_reply"


@dataclass(frozen=True)
class AgentSeams:
    path: str = SEAMS_FILE
    name: str = FORMAT

    def files(self, plan: Plan) -> tuple[str, ...]:
        return (self.path,)

    def read(self, folder: Path, plan: Plan) -> DurableState:
        seams = read_lines(folder / self.path, self.path)
        problems = [*seams.problems, *(f"{line.quote()}: not a model request or reply the services write"
                                       for line in seams.lines if not _well_formed(line))]
        if problems:
            return DurableState.unreadable(True, *problems)
        records: dict[str, StepRecord] = {}
        for line in seams.lines:
            for call in line.get("done") if REQUEST in line.record else ():
                if plan.call(call) is not None and call not in records:
                    records[call] = StepRecord(call, protocol.SUCCEEDED, line.quote())
        completed = any(REPLY in line.record and line.get("answer") is True for line in seams.lines)
        return DurableState(records, False, completed)


def _well_formed(line: Line) -> bool:
    key = "done" if REQUEST in line.record else "calls" if REPLY in line.record else None
    calls = line.get(key) if key is not None else None
    return isinstance(calls, list) and all(isinstance(call, str) for call in calls)
