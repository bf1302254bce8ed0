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

import json
from dataclasses import dataclass
from pathlib import Path

from killpoint import protocol
from killpoint.harness.judge.evidence import Line, read_lines
from killpoint.harness.judge.stores._agent_store import AgentStore
from killpoint.harness.model import DurableState, Plan, StepRecord

SEAMS_FILE = "agent-seams.jsonl"
EXCHANGES_FILE = "agent-exchanges.jsonl"  # saved beside it: every request the services answered, bodies excerpted
QUOTED_EXCHANGES = 6  # of one call, the last ones: those around its kills and its replays
QUOTED_BODY_CHARS = 200
FORMAT = "agent-seams"
REQUEST, REPLY = "model_request", "model_reply"


@dataclass(frozen=True)
class AgentSeams:
    path: str = SEAMS_FILE
    name: str = FORMAT
    own: AgentStore | None = None  # the agent's own store, copied beside the seams and quoted as evidence

    def files(self, plan: Plan) -> tuple[str, ...]:
        """Only the agent's own store's: the seams are the services', saved beside them (``AgentServices.save``)."""
        return self.own.files(plan) if self.own is not None else ()

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
        kept, notes = self._kept(folder, plan)
        return DurableState(records, False, completed, notes=notes, traffic=_traffic(folder / EXCHANGES_FILE, plan),
                            kept=kept)

    def _kept(self, folder: Path, plan: Plan) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
        """What the agent's own store held of each planned call, absence quoted too; a store that cannot be read
        is a note, not a problem: the verdict does not rest on it."""
        if self.own is None:
            return {}, ()
        own = self.own.read(folder, plan)
        if own.problems:
            return {}, tuple(f"the agent's own store could not be read: {problem}" for problem in own.problems)
        held = self.own.held(folder, plan)
        files = ", ".join(held) if held else " nor ".join(self.own.paths)
        absent = (f"{files}: {'hold' if len(held) > 1 else 'holds'} nothing of {{call}} (no tool-call id of it)" if held
                  else f"{files}: not there (the agent had kept nothing yet)")
        return {planned.call_id: (tuple(own.records[planned.call_id].quote.split("\n"))
                                  if planned.call_id in own.records else (absent.format(call=planned.call_id),))
                for planned in plan.calls}, ()


def _traffic(path: Path, plan: Plan) -> dict[str, tuple[str, ...]]:
    """Each planned call's exchanges, quoted short: the tool requests it was attributed to, and the model requests
    that showed its result or note (``done``, ``told_unknown``) or whose reply chose it. What the quotes leave out
    is in the file whole (excerpted as the services kept it)."""
    exchanges = read_lines(path, EXCHANGES_FILE)
    traffic: dict[str, list[str]] = {planned.call_id: [] for planned in plan.calls}
    for line in exchanges.lines:
        named = [line.get("call")] if line.get("service") == "tools" else [
            *_names(line.get("done")), *_names(line.get("told_unknown")), *_names(line.get("calls"))]
        for call in dict.fromkeys(named):
            if call in traffic:
                traffic[call].append(_quoted(line))
    return {call: tuple(quotes[-QUOTED_EXCHANGES:]) for call, quotes in traffic.items() if quotes}


def _names(value: object) -> list[str]:
    return [name for name in value if isinstance(name, str)] if isinstance(value, list) else []


def _quoted(line: Line) -> str:
    """One exchange as a finding quotes it: its fields, each text cut to QUOTED_BODY_CHARS."""
    shown = {key: value[:QUOTED_BODY_CHARS] + "…" if isinstance(value, str) and len(value) > QUOTED_BODY_CHARS
             else value for key, value in line.record.items()}
    return f"{line.source}:{line.number}: {json.dumps(shown, sort_keys=True, default=str)}"


def _well_formed(line: Line) -> bool:
    key = "done" if REQUEST in line.record else "calls" if REPLY in line.record else None
    calls = line.get(key) if key is not None else None
    return isinstance(calls, list) and all(isinstance(call, str) for call in calls)
