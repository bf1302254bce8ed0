"""What the harness serves one run: the fake tools over HTTP, an agent's scripted model, and the seams between them.

A protocol runtime's run gets the tools (``ToolServices``), an agent's the
model beside them (``AgentServices``). The services live in the harness,
outside the workload's process tree, for the whole run: a kill ends the
workload, never them, so the ledger they write and the exchanges they keep
survive it. The harness drives them through five moments: ``begin`` before each
incarnation starts, ``strike`` once the kill's moment has come and before the
tree is killed (no held request goes on, no tool call acts past it: every
effect is in the ledger before the kill marker), ``save`` once the incarnation
is dead (for an agent, a copy of what the model had received into a store
folder, at each kill and at the end: the ``agent-seams`` record the checker
reads, ``judge/stores/_agent_seams``, with the exchanges beside it), and ``close``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from killpoint import protocol
from killpoint.client import ArmedPoints
from killpoint.errors import WorkloadError
from killpoint.harness._safe_files import fresh_folder, write_fresh
from killpoint.harness.agents._loopback import LoopbackServer
from killpoint.harness.agents.first_open import FirstOpens
from killpoint.harness.agents.mcp_http_proxy import LOG_NAME as MCP_SERVER_LOG, HttpServer
from killpoint.harness.agents.model_endpoint import ModelEndpoint
from killpoint.harness.agents.script import Script
from killpoint.harness.agents.seam_client import SeamClient
from killpoint.harness.agents.seams import (SETTLE_DEADLINE_S, TOOL_REQUEST, AgentKilled, ReplyWrites, SeamHook,
                                           free_running)
from killpoint.harness.agents.store_seam import StoreSeam
from killpoint.harness.agents.mcp_endpoint import PATH as MCP_PATH
from killpoint.harness.agents.tool_service import ToolService
from killpoint.harness.backends import Launched
from killpoint.harness.judge.stores._agent_seams import EXCHANGES_FILE, REPLY, REQUEST, SEAMS_FILE
from killpoint.harness.judge.stores._agent_store import AgentStore
from killpoint.harness.model import Plan

TOOLS_URL_ENV = protocol.ENV_TOOLS_URL
MCP_URL_ENV = protocol.ENV_MCP_URL
MODEL_URL_ENV = "KILLPOINT_MODEL_URL"
API_KEY = "killpoint-scripted-model"  # the SDKs refuse to start without a key; the scripted model reads none


@dataclass
class SeamRecord:
    """The hook the services call: the model's side of each seam recorded first, then ``inner`` (the hold).

    A model request is recorded on receipt, with the calls its conversation
    shows done (the model has their results even if the agent is killed while
    the request is held); a reply once it has been sent, with the calls it chose.
    A request is taken only once every reply sent before it has had its seam
    (``ReplyWrites``) and the agent's store has been read for it, and only if
    the incarnation was not struck meanwhile (``struck``): a request the agent
    sent after the kill's moment reaches no one, the model included.
    """

    inner: SeamHook
    struck: Callable[[], bool] = lambda: False  # the running incarnation was struck (``SeamClient.is_struck``)
    incarnation: int = 0
    lines: list[dict[str, Any]] = field(default_factory=list)
    store: StoreSeam | None = None  # the agent's own store, read before each of its requests is announced
    replies: ReplyWrites = field(default_factory=ReplyWrites)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, point: str, calls: tuple[str, ...], exchange: dict[str, Any]) -> None:
        # A model request is this incarnation's from its arrival on, its reply with it; a tool's exchange is
        # stamped by its service. The hold refuses an exchange of an incarnation that is no longer running.
        arrived_in = exchange.setdefault("incarnation", self.incarnation)
        if point in (REQUEST, TOOL_REQUEST):
            if point == REQUEST:  # a tool request waited in its service, before its invocation was written
                # Bounded: a reply the agent leaves unread ends at its socket's timeout, and the order is moot then.
                self.replies.settle(SETTLE_DEADLINE_S)
            self._require_running(arrived_in, point)
            if self.store is not None:
                self.store.sync(arrived_in)  # a result saved before this request is its store_result, before it
                if point == TOOL_REQUEST:
                    self.store.expect(*calls)
            self._require_running(arrived_in, point)
        if point in (REQUEST, REPLY):
            # The API rides in the line a finding quotes; the bodies are in the exchanges saved beside it.
            line = ({REQUEST: 0, "done": list(exchange.get("done", ())),
                     "told_unknown": list(exchange.get("told_unknown", ())), "api": exchange.get("api")}
                    if point == REQUEST else
                    {REPLY: 0, "calls": list(calls), "answer": bool(exchange.get("answer")), "api": exchange.get("api")})
            with self._lock:
                line[point] = len(self.lines) + 1
                self.lines.append({**line, "incarnation": arrived_in})
        self.inner(point, calls, exchange)

    def _require_running(self, incarnation: int, point: str) -> None:
        """AgentKilled if incarnation ``incarnation`` was struck, or a later one begun (struck is read first:
        ``begin`` numbers the next incarnation before it clears the strike)."""
        if self.struck() or self.incarnation != incarnation:
            raise AgentKilled(f"incarnation {incarnation} was struck before its {point} was taken")

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.lines)


@dataclass
class ToolServices:
    """What the harness serves a protocol runtime's run: the fake tools over HTTP, announcing ``after_effect``.

    A runtime that reads ``KILLPOINT_TOOLS_URL`` calls them there, one request per
    call, instead of starting ``python -m killpoint.fake_tools``; one that does not
    runs as before. Their moments are the agents' (see the module's docstring);
    ``save`` writes nothing, for the ledger is their whole record.
    """

    tools: ToolService
    seams: SeamClient | None  # None: a run nothing holds (the services' own tests)

    @classmethod
    def start(cls, plan: dict[str, Any], world: Path, ledger: Path, control: Path | None, *,
              classes: Mapping[str, str] | None = None) -> ToolServices:
        """``classes``: each tool's class in the scenario's catalogue (which the MCP tool list annotates)."""
        seams = SeamClient(str(control)) if control is not None else None
        return cls(ToolService(plan, world, ledger, seams=seams, by_arguments=False, classes=classes).start(), seams)

    def paused(self) -> contextlib.AbstractContextManager[bool]:
        """No tool call acts while the run is copied as a kill would leave it (``ToolService.paused``)."""
        return self.tools.paused()

    def environment(self) -> dict[str, str]:
        """The tools' URL (and the same tools' MCP endpoint), and loopback kept off any proxy the workload's
        environment names."""
        return {TOOLS_URL_ENV: self.tools.url, MCP_URL_ENV: f"{self.tools.url}{MCP_PATH}",
                "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}

    def begin(self, incarnation: int, armed: ArmedPoints = ArmedPoints(), *, world_durable: bool = False) -> None:
        """Incarnation ``incarnation`` is about to start, to be held at the points ``armed`` names (by default,
        at every one); its calls act on the world, fsynced when ``world_durable`` (on a power loss's device),
        under a new secret (``environment`` hands it the new one), so what an earlier incarnation left running
        reaches nothing."""
        if self.seams is not None:
            self.seams.begin(incarnation, armed)
        self.tools.begin(incarnation, world_durable=world_durable)

    def started(self, launched: Launched) -> None:
        """The incarnation ``launched`` started: if it has a network of its own (a container's), serve it there too."""
        pid = launched.pid
        try:
            for server in self._servers():
                server.reach_from(pid)
        except OSError as error:
            if not os.path.exists(f"/proc/{pid}"):
                return  # it ended at once, before a listener was made: the runner sees it exit
            raise WorkloadError(f"the workload's container cannot reach the harness's services: no listener could be "
                                f"made in its network ({error})" + ("; the harness must run as root to enter a "
                                                                    "container's network namespace"
                                                                    if error.errno == errno.EPERM else "")) from None

    def strike(self) -> None:
        """The kill's moment has come: end every held request, and let every tool call acting finish; their
        connections stay open until ``save`` (the workload is dead then)."""
        for server in self._servers():
            server.hold_drops()
        if self.seams is not None:
            self.seams.struck()
        self.tools.freeze()

    def ended(self) -> None:
        """The incarnation is dead (killed, or exited on its own): the connections held for it close, and nothing
        announced for it is waited on any more."""
        for server in self._servers():
            server.release_drops()
        if self.seams is not None:
            self.seams.struck()

    def save(self, folder: Path) -> None:
        """The incarnation is dead (``ended``). Nothing is written: the ledger is the tools' whole record."""
        self.ended()

    def opened(self) -> str | None:
        """The world's file a real server was held opening for ``tool_opened`` (``first_open``), if one was."""
        return self.tools.opens.opened if self.tools.opens is not None else None

    def close(self) -> None:
        self.ended()  # a run that failed mid-incarnation: nothing announced for it waits on the harness any more
        with contextlib.ExitStack() as closing:  # each is closed, whichever of them fails to
            for server in self._servers():
                closing.callback(server.close)
            if self.tools.mcp_server is not None:
                closing.callback(self.tools.mcp_server.close)

    def _servers(self) -> list[LoopbackServer]:
        return [self.tools]


@dataclass
class AgentServices(ToolServices):
    """An agent's run: the scripted model beside the tools, and the record of what the model received."""

    model: ModelEndpoint
    record: SeamRecord

    @classmethod
    def start(cls, plan: dict[str, Any], world: Path, ledger: Path, control: Path | None, *,
              classes: Mapping[str, str] | None = None) -> AgentServices:
        """Both services of a run, held at their seams on ``control`` (None: a run nothing holds)."""
        seams = SeamClient(str(control)) if control is not None else None
        record = SeamRecord(seams, seams.is_struck) if seams is not None else SeamRecord(free_running)
        opens = FirstOpens(world / "files", record)
        tools = ToolService(plan, world, ledger, record, seams=seams, replies=record.replies, classes=classes,
                            opens=opens).start()
        if "mcp_server" in plan:  # started at the run's first incarnation, once its world is where it will stay
            tools.mcp_server = HttpServer(plan["mcp_server"], world / "files", world.parent / MCP_SERVER_LOG)
        try:
            model = ModelEndpoint(Script.from_plan(plan), hook=record, replies=record.replies).start()
        except BaseException:
            tools.close()
            raise
        return cls(tools, seams, model, record)

    def environment(self) -> dict[str, str]:
        """How an unmodified agent is pointed at the services: the SDKs' own base-URL settings, and the tools' URL."""
        return {
            **super().environment(),
            "OPENAI_BASE_URL": f"{self.model.url}/v1", "OPENAI_API_KEY": API_KEY,
            "ANTHROPIC_BASE_URL": self.model.url, "ANTHROPIC_API_KEY": API_KEY,
            "OPENAI_AGENTS_DISABLE_TRACING": "1",  # the Agents SDK would export traces to the real API
            MODEL_URL_ENV: self.model.url,
        }

    def keep_store(self, store: AgentStore, plan: Plan, workload: Path) -> None:
        """The agent keeps ``store`` (its files under ``workload``): announce ``store_result`` as it first holds each
        of ``plan``'s results (``store_seam``)."""
        self.record.store = StoreSeam(store, plan, workload, self.record.inner, self.record.replies)

    def started(self, launched: Launched) -> None:
        super().started(launched)
        if self.record.store is not None:
            self.record.store.watch(launched)
        if self.tools.opens is not None:
            self.tools.opens.start(launched.pid)

    def begin(self, incarnation: int, armed: ArmedPoints = ArmedPoints(), *, world_durable: bool = False) -> None:
        """As ``ToolServices.begin``, but every seam is waited at, whatever ``armed`` says: a hold at a seam after a
        reply (``model_reply``, ``tool_reply``) holds a service's thread, not the agent, so only the agent's next
        request, held at its own seam while the harness strikes, keeps the agent from acting past the point."""
        self.model.new_secret()
        if self.tools.mcp_server is not None and self.tools.mcp_server.process is None:
            self.tools.mcp_server.start()
        if self.record.store is not None:
            self.record.store.begin(incarnation)  # first: a request numbered for it finds its store seam ready
        self.record.incarnation = incarnation
        super().begin(incarnation, ArmedPoints(), world_durable=world_durable)

    def save(self, folder: Path) -> None:
        """What the model had received so far (``SEAMS_FILE``) and every exchange (``EXCHANGES_FILE``), in ``folder``.

        Called once the incarnation is dead (killed, or exited): no seam waits on the harness from then on,
        and every reply already written is recorded before the record is copied (``ModelEndpoint.settle``).
        """
        super().save(folder)
        if not self.model.settle(SETTLE_DEADLINE_S):
            raise TimeoutError(f"a model reply was still being recorded {SETTLE_DEADLINE_S:g}s after its agent ended")
        fresh_folder(folder)  # in the run's folder, where the agent may have planted a link at its name
        write_fresh(folder / SEAMS_FILE, "".join(json.dumps(line) + "\n" for line in self.record.snapshot()).encode())
        write_fresh(folder / EXCHANGES_FILE, "".join(json.dumps(line, default=str) + "\n"
                                                     for line in self.exchanges()).encode())

    def ended(self) -> None:
        super().ended()  # first: an announcement of store_result or tool_opened waiting on the harness ends
        if self.record.store is not None:
            self.record.store.stop()
        if self.tools.opens is not None:
            self.tools.opens.stop()

    def exchanges(self) -> list[dict[str, Any]]:
        """What the agent asked and was answered, model and tools, as the evidence quotes it."""
        return [*({"service": "model", **exchange} for exchange in self.model.exchanges),
                *({"service": "tools", **exchange} for exchange in self.tools.exchanges)]

    def _servers(self) -> list[LoopbackServer]:
        return [self.model, self.tools]
