"""Sessions the harness started for services of its own, which the hunt for escaped processes never takes.

A scenario's MCP server over HTTP (``harness/agents/mcp_http_proxy``) holds a
run's files by design (the world it acts on) and outlives the run's
incarnations, yet is never the workload's: no process can join a session it
did not begin. Apart from ``_escapees`` so that a service can say so without
loading the process machinery (psutil).
"""

from __future__ import annotations

SERVICE_SESSIONS: set[int] = set()


def spare_session(session: int) -> None:
    """Never take a process of ``session`` for an escaped one (until ``unspare_session``)."""
    SERVICE_SESSIONS.add(session)


def unspare_session(session: int) -> None:
    SERVICE_SESSIONS.discard(session)
