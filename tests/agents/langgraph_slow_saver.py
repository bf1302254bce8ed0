"""The shipped LangGraph agent on a disk that takes half a second per save: a workload for the tests, run as a
user's script (``{python} tests/agents/langgraph_slow_saver.py [--durability MODE]``).

Under LangGraph's default durability (``"async"``) a step's save runs in the
background while the next step asks the model, so a kill at that request loses
the step whenever the save is slower than the request; a slow saver makes that
certain, and ``--durability sync`` (the save before the next step) makes it
impossible. Nothing else of the agent changes.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from killpoint.scenarios.agents import langgraph_prebuilt

SAVE_SECONDS = 0.5


def _slowed(save: Any) -> Any:
    def slow_save(self: SqliteSaver, *args: Any, **kwargs: Any) -> Any:
        time.sleep(SAVE_SECONDS)
        return save(self, *args, **kwargs)
    return slow_save


if __name__ == "__main__":
    SqliteSaver.put = _slowed(SqliteSaver.put)  # type: ignore[method-assign]
    SqliteSaver.put_writes = _slowed(SqliteSaver.put_writes)  # type: ignore[method-assign]
    sys.exit(langgraph_prebuilt.main())
