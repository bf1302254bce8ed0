"""Format ``killpoint``: killpoint's own ``journal.jsonl``, read black-box.

Folded by the checker's own ``fold_journal`` (started -> RUNNING, finished ->
its status; decisions ignored), so the reference runtime judged black-box sees
exactly the states the white-box checker sees: the no-false-alarm test of the
black-box rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from killpoint import protocol
from killpoint.harness.judge.evidence import read_lines
from killpoint.harness.judge.properties import fold_journal
from killpoint.harness.model import DurableState, Plan, StepRecord

# The keys fold_journal looks records up by (a list there would not even hash).
_IDS = {protocol.STARTED: ("op", "call"), protocol.FINISHED: ("op",)}


@dataclass(frozen=True)
class KillpointJournal:
    path: str = protocol.JOURNAL_NAME
    name: str = "killpoint"

    def files(self, plan: Plan) -> tuple[str, ...]:
        return (self.path,)

    def read(self, folder: Path, plan: Plan) -> DurableState:
        journal = read_lines(folder / self.path, self.path)
        problems = list(journal.problems) + [
            f"{line.quote()}: a {line.get('kind')} record whose op or call is not a string"
            for line in journal.lines if line.get("kind") in (protocol.STARTED, protocol.FINISHED)
            and not all(isinstance(line.get(key), str) for key in _IDS[line.get("kind")])]
        if problems:
            return DurableState.unreadable(True, *problems)
        records = {}
        for call, state in fold_journal(journal.lines).items():
            if plan.call(call) is not None:
                evidence = state.started if state.status == protocol.RUNNING or state.closing is None else state.closing
                records[call] = StepRecord(call, state.status, evidence.quote())
        completed = any(line.get("kind") == protocol.TASK and line.get("status") == protocol.COMPLETED
                        for line in journal.lines)
        return DurableState(records, True, completed)
