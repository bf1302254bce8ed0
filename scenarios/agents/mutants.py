"""Mutants of the reference agent, each breaking one recovery rule, to prove the seams catch every bug class.

``python -m killpoint.scenarios.agents.mutants NAME`` runs the reference agent
with one change:

- ``blind-retry``: every interrupted call is called again, whatever its tool's
  class (an interrupted NON_IDEMPOTENT call repeats its effect: VERIFY broken);
- ``forgets``: the agent keeps its conversation in a journal it starts afresh
  each time, as an agent with no durable state does (calls the model had the
  results of reach their tools again: SKIP broken);
- ``retries-done``: at a restart the calls of the last turn are called again,
  results or not (a call whose result the model had is replayed).

Arguments after NAME are the reference agent's (``--server CMD ...``: a real MCP server's tools).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from killpoint.scenarios.agents.reference_agent import JOURNAL_NAME, Journal, Tools, main, unanswered


def blind_retry(journal: Journal, tools: Tools) -> list[dict[str, Any]]:
    return [{"role": "tool", "tool_call_id": call["id"],
             "content": tools.call(call["function"]["name"], call["function"]["arguments"])}
            for call in unanswered(journal.messages)]


def retries_done(journal: Journal, tools: Tools) -> list[dict[str, Any]]:
    last = next((message for message in reversed(journal.messages) if message.get("role") == "assistant"), None)
    for call in (last or {}).get("tool_calls") or []:
        tools.call(call["function"]["name"], call["function"]["arguments"])
    return blind_retry(journal, tools)


def forgets(arguments: list[str]) -> int:
    (Path(os.environ["KILLPOINT_RUN_DIR"]) / JOURNAL_NAME).unlink(missing_ok=True)
    return main(arguments=arguments)


MUTANTS = {"blind-retry": lambda arguments: main(blind_retry, arguments), "forgets": forgets,
           "retries-done": lambda arguments: main(retries_done, arguments)}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in MUTANTS:
        sys.exit(f"usage: python -m killpoint.scenarios.agents.mutants {{{','.join(MUTANTS)}}} [--server CMD ...]")
    sys.exit(MUTANTS[sys.argv[1]](sys.argv[2:]))
