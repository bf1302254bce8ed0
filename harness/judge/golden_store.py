"""Whether a ``[journal]`` scenario's store mapping reads the crash-free run's store at all.

A black-box verdict is only as good as the mapping that turns the runtime's own store into per-call
states. A wrong ``[journal].path`` reads as a store that holds nothing, so every call looks as if its
start was never durable (``write-ahead`` blames a correct runtime); a status the mapping does not list
reads as no record, so a replayed call looks like a first run (a real bug passes). The crash-free run
tells the two apart from a runtime's fault: it completed the task, so its store must hold a record of
every call whose tool the ledger shows ran. One that does not is bad input — the mapping's, named with
the key to fix — and no verdict is given.
"""

from __future__ import annotations

import os
from pathlib import Path

from killpoint import protocol
from killpoint.errors import ConfigError
from killpoint.harness.judge.evidence import StoreReading, read_lines, read_store_copy
from killpoint.harness.judge.stores._agent_seams import AgentSeams
from killpoint.harness.judge.stores._agent_store import AgentStore
from killpoint.harness.layout import RunPaths
from killpoint.harness.model import Scenario

_NAMED = 5  # calls quoted by name in the message; the rest are counted


def check_golden_store(scenario: Scenario, golden_dir: Path, ledger: Path) -> None:
    """ConfigError when the crash-free run's store is missing or holds no record of a call whose tool ran."""
    if scenario.journal is None:
        return
    reader = scenario.journal.reader
    state, why = read_store_copy(RunPaths(golden_dir).store_final, StoreReading(reader, scenario.plan, golden_dir))
    where = scenario.origin.get("scenario", "the scenario")
    if state is None:  # every run's store rules would be unknown for the same reason: say it once, up front
        raise ConfigError(f"{where}: [journal]: the crash-free run's store cannot be read, so no run could be judged",
                          (str(why), ("if the reason is the query or a value the mapping lacks, fix the mapping (journal.query; "
                           "journal.status must list every value the runtime writes); if it is what the runtime left "
                           "in its store, that is the runtime's to fix"),
                           f"the crash-free run's evidence: {golden_dir}"))
    if isinstance(reader, AgentSeams) and reader.own is not None:
        _check_agent_store(reader.own, scenario, RunPaths(golden_dir).store_final, where)
    ran = list(dict.fromkeys(line.record["call"] for line in read_lines(ledger).lines
                             if protocol.LEDGER_INVOKED in line.record and isinstance(line.record.get("call"), str)))
    unrecorded = [call for call in ran if call in {planned.call_id for planned in scenario.plan.calls}
                  and call not in state.records]
    if not unrecorded:
        return
    if scenario.agent is not None:
        raise ConfigError(
            f"{where}: the crash-free run's agent ran the tool of {_named(unrecorded)} but never showed the model "
            f"{'its result' if len(unrecorded) == 1 else 'their results'}, though it exited 0; nothing was judged",
            ("an agent judged at its seams finishes by sending the model every tool result and receiving its final "
             "answer (docs/agents.md, 'How it is judged'): send the results, then end on the answer",
             f"the crash-free run's evidence: {golden_dir}"))
    files = reader.files(scenario.plan)
    copied = [name for name in files if os.path.lexists(RunPaths(golden_dir).store_final / name)]
    named = _named(unrecorded)
    found = (f"the crash-free run left no {files[0]} in the workload folder ($KILLPOINT_RUN_DIR)" if not copied
             else f"the crash-free run's {reader.name} store ({files[0]}) holds no record of {named}")
    raise ConfigError(
        f"{where}: [journal]: {found}, though it completed the task and the ledger shows "
        f"{'that tool' if len(ran) == 1 else 'those tools'} ran; nothing was judged",
        (f"check journal.path ({scenario.journal.path or files[0]!r}, relative to the workload folder)"
         + ("" if not copied else ", and the mapping (journal.fields, journal.status with every value the runtime "
                                  "writes, journal.query, journal.steps, journal.thread, journal.workflow)"),
         f"the crash-free run's evidence: {golden_dir}"))


def _named(calls: list[str]) -> str:
    return ", ".join(calls[:_NAMED]) + (f" and {len(calls) - _NAMED} more" if len(calls) > _NAMED else "")


def _check_agent_store(store: AgentStore, scenario: Scenario, copy: Path, where: str) -> None:
    """ConfigError when the agent's own store (``[agent] store``) is not in the crash-free run's copy, cannot be
    read, or holds no tool-call id of any call: every run would quote it as holding nothing, a path or format
    mistake that would read as the agent keeping nothing."""
    named = " nor ".join(repr(path) for path in store.paths)
    state = store.read(copy, scenario.plan)
    if not store.held(copy, scenario.plan):
        found = f"the crash-free run left no {named} in the workload folder ($KILLPOINT_RUN_DIR)"
    elif state.problems:
        found = f"the crash-free run's {named} cannot be read ({'; '.join(state.problems)})"
    elif not state.records:
        ids = ", ".join(f"call_kp_{planned.call_id}" for planned in scenario.plan.calls[:_NAMED])
        found = (f"the crash-free run's {named} holds no tool-call id of any call ({ids}): it keeps no conversation "
                 "killpoint can read (SQLite, JSON or JSON lines, JSON text or msgpack inside)")
    else:
        return
    raise ConfigError(f"{where}: agent.store: {found}; nothing was judged",
                      ("name the file(s) where your agent keeps its conversation, relative to $KILLPOINT_RUN_DIR, "
                       "or drop agent.store (it only adds evidence to findings)",
                       f"the crash-free run's evidence: {copy.parent}"))
