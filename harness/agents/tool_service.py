"""The fake tools as an HTTP service the harness runs outside the agent, so the ledger outlives every kill.

An agent's tool functions call ``POST {url}/tools/{name}`` with the call's
arguments as a JSON object and get ``{"ok", "output", "error"}`` back (an
OpenAPI document at ``GET {url}/openapi.json`` describes every tool, for a
framework that loads tools from one). The service runs each call through the
fake tools' one code path (``fake_tools.base.invoke``) on the run's world, so
the invocation and effect lines it writes are the ones a fake tool writes in
every other mode, stamped with the incarnation the harness says is running.

A request carries no planned call's id (an agent's tool function is handed the
arguments, not the model's tool-call id), so the call is the planned one with
that tool and those arguments (``PlanIndex``; a plan with two such calls is
refused when the scenario loads). A request no planned call matches runs
nothing and is answered with an error naming what the plan holds.

``verify_effect`` (READ_ONLY) is the read-only probe the recovery rules' VERIFY
asks for: ``{"tool_call_id": ID}`` (or ``{"call_id": C}``) runs the planned
call's fake-tool probe, written to the ledger as a probe line, and answers
``{"effect_found": bool}``.

A runtime that speaks the workload protocol names its calls, and calls the
same service instead of starting ``python -m killpoint.fake_tools`` per call
(an interpreter's start per call, most of a sweep's time for a runtime in
another language): ``POST {url}/calls/TOOL`` with ``{"call", "op", "args"}``
answers ``{"ok", "output", "error"}`` as the command's ``call`` prints it, after
announcing ``after_effect`` for the op on the control socket (held there when
the harness armed it); ``POST {url}/probes/TOOL`` with ``{"call", "args"}``
answers ``{"effect_found"}`` as its ``probe`` does. A body that is not that is
a 400 naming the field, and runs nothing.

The service keeps the world consistent with the kill: ``freeze`` (before the
harness strikes) lets no new call act and waits for the calls already acting
to finish, so every effect is in the ledger before the harness's kill marker,
and a request held at a crash point when its agent was killed acts on nothing.
A call still waiting out its tool's latency then acts on nothing either, as a
tool's process killed in its latency would not.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from killpoint import protocol
from killpoint._json import strict_json
from killpoint.errors import InternalError
from killpoint.fake_tools.base import ToolResult, invoke, lookup, verify
from killpoint.fake_tools.ledger import Ledger
from killpoint.fake_tools.world import World
from killpoint.harness._safe_files import open_regular
from killpoint.harness.agents._loopback import LoopbackServer, QuietHandler, content_length, excerpt
from killpoint.harness.agents import mcp_endpoint, mcp_http_proxy
from killpoint.harness.agents._mcp_messages import VERIFY_TOOL
from killpoint.harness.agents.declared_tools import declared_tools
from killpoint.harness.agents.mcp_proxy import PROXY_PATH
from killpoint.harness.agents.seam_client import SeamClient
from killpoint.harness.agents.seams import (SETTLE_DEADLINE_S, TOOL_EFFECT, TOOL_REPLY, TOOL_REQUEST, AgentKilled,
                                            ReplyWrites, SeamHook, free_running)

MAX_BODY_BYTES = 1 << 24  # 16 MiB: a tool call's arguments; more is refused (413), never read into memory
IO_TIMEOUT_S = 30.0  # a client that stops sending or reading mid-request is dropped, never waited on forever
FREEZE_DEADLINE_S = 60.0
EXCERPT_CHARS = 500
NAME_CHARS = 200
MAX_PROXIED = 1000  # calls through the recording proxy in flight at once; an agent runs a few
if TYPE_CHECKING:
    from killpoint.harness.agents.first_open import FirstOpens

# The model endpoint's stable tool-call ids: call_kp_<call_id>, then _<attempt> or _verify (harness/agents/script).
PROXY_STEPS = PROXY_PATH.removeprefix("/") + "/"  # under the MCP endpoint: /mcp/proxy/STEP
_TOOL_CALL_ID = re.compile(r"call_kp_(?P<call>.+?)(?:_(?:\d+|verify))?")


# (HTTP status, JSON body) -> None: how a handler answers the request it was given.
Reply = Callable[[int, dict[str, Any]], None]


class RunFolderRefused(InternalError):
    """The run's ledger or world was replaced by something the service will not open: no call acts."""


class BadRequest(InternalError, ValueError):
    """A request naming its call whose body is not the one the service reads: answered 400, nothing runs."""


def canonical(args: Any) -> str:
    """The arguments as one string, equal for equal JSON values whatever their key order."""
    return json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class PlanIndex:
    """The planned calls by (tool, arguments): how a request that names no call is attributed to one."""

    calls: dict[tuple[str, str], str]
    args_of: dict[str, tuple[str, dict[str, Any]]]

    @classmethod
    def of(cls, plan: dict[str, Any]) -> PlanIndex:
        """The index of a plan's calls; ValueError naming two calls a request could not tell apart."""
        calls: dict[tuple[str, str], str] = {}
        args_of: dict[str, tuple[str, dict[str, Any]]] = {}
        for call in plan["calls"]:
            key = (call["tool"], canonical(call.get("args", {})))
            if key in calls:
                raise ValueError(f"calls {calls[key]} and {call['call_id']} both call {call['tool']} with the same "
                                 f"arguments: a tool request names no call, so they could not be told apart; "
                                 f"give them different arguments")
            calls[key] = call["call_id"]
            args_of[call["call_id"]] = (call["tool"], call.get("args", {}))
        return cls(calls, args_of)

    def call_of(self, tool: str, args: Any) -> str | None:
        return self.calls.get((tool, canonical(args)))

    def probed_call(self, args: Any) -> str | None:
        """The planned call a ``verify_effect`` request asks about, by its call_id or its model tool-call id."""
        if not isinstance(args, dict):
            return None
        if isinstance(args.get("call_id"), str) and args["call_id"] in self.args_of:
            return str(args["call_id"])
        match = _TOOL_CALL_ID.fullmatch(str(args.get("tool_call_id", "")))
        return match["call"] if match and match["call"] in self.args_of else None

    def tools(self) -> list[str]:
        return sorted({tool for tool, _ in self.args_of.values()})


PROXY_CALL_STEPS = ("replied", "delivered")


@dataclass
class _ProxiedCall:
    """A call (or a probe) through the recording proxy: its exchange, its steps after the first and how many it has
    taken, and its reply's count in ``ReplyWrites`` from ``replied`` until ``delivered``."""

    exchange: dict[str, Any]
    steps: tuple[str, ...]
    steps_taken: int = 0
    writing: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)


class ToolService(LoopbackServer):
    """The fake tools of one run over HTTP on 127.0.0.1, writing the run's ledger; see the module's docstring."""

    def __init__(self, plan: dict[str, Any], world: Path, ledger: Path, hook: SeamHook = free_running, *,
                 world_durable: bool = False, seams: SeamClient | None = None, by_arguments: bool = True,
                 replies: ReplyWrites | None = None, classes: Mapping[str, str] | None = None,
                 opens: FirstOpens | None = None) -> None:
        """``seams``: where ``after_effect`` is announced for a call a runtime names (None: nowhere).
        ``classes``: each tool's class in the scenario's catalogue, which its MCP annotations say (none: UNKNOWN).
        ``replies``: where the replies being written are counted (shared with the model's: ``ReplyWrites``).
        ``opens``: where a real server behind the recording proxy is held at its first open (``first_open``).
        ``by_arguments``: requests that name no call are attributed to the plan's (an agent's run); a plan
        whose runtime names its calls may call one tool twice with the same arguments, and such requests are
        refused."""
        self.index = PlanIndex.of(plan) if by_arguments else None
        self.declared = declared_tools(plan.get("tools", {}))  # the agent's own tools, as its scenario declares them
        # The read of a real server that checks each call, for verify_effect through the proxy ([agent.verify]).
        self.verify_reads: dict[str, dict[str, Any]] = dict(plan.get("verify", {}))
        self.classes = {**(classes or {}), VERIFY_TOOL: protocol.READ_ONLY}
        self.world_path, self.world_durable = world, world_durable
        self._world: World | None = None  # held from ``begin`` (World.held)
        self.ledger_path = ledger
        self.hook = hook
        self.seams = seams
        self.replies = replies or ReplyWrites()
        self.opens = opens
        self.mcp_server: mcp_http_proxy.HttpServer | None = None  # the scenario's own, behind /mcp (``[agent]``)
        self._incarnation = 0
        self._ledger: Ledger | None = None
        self._refused: str | None = None  # why the ledger or the world was not opened (begin)
        self._frozen = False
        self._paused = False  # ``paused``: a call waits to act until the harness's copy of the run is taken
        self._struck = threading.Event()  # set by ``freeze``: cuts a tool's latency short (``_pause``)
        self._acting = 0
        self._state = threading.Condition()
        # Calls through the recording proxy (``proxied``) by token: each one's exchange, and its reply's count in
        # ``replies`` from ``replied`` until ``delivered`` (or until its incarnation ends).
        self._proxied: dict[str, _ProxiedCall] = {}
        self._proxy_tokens = itertools.count()
        super().__init__(_handler_for(self), "killpoint-tool-service")

    def close(self) -> None:
        super().close()
        with self._state:
            self._let_go()

    def _let_go(self) -> None:
        for proxied in self._proxied.values():  # a reply the proxy never delivered: its agent is dead
            proxied.writing.close()
        self._proxied.clear()
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None
        if self._world is not None:
            self._world.close()
            self._world = None

    def begin(self, incarnation: int, *, world_durable: bool | None = None) -> None:
        """Incarnation ``incarnation`` is about to start: its calls act, stamped with its number (on a world
        fsynced from now on if ``world_durable``, the world being on a power loss's device; None: as before).

        The ledger and the world are in the run's folder, which the agent can write: what it planted at their
        names (a symlink to a host file or folder, a FIFO that would block the open) is never opened, and no
        call acts; the evidence readers refuse it too, so the run's rules come out unknown. Both are opened
        here, once the last incarnation is dead and the world's device (a power loss's) is mounted, and acted
        on through those descriptors until the next ``begin``, whatever is renamed meanwhile.
        """
        self.new_secret()  # what the last incarnation left running reaches nothing from now on
        if world_durable is not None:
            self.world_durable = world_durable
        with self._state:
            self._let_go()
            self._refused = None
            try:
                self._world = World.held(self.world_path, durable=self.world_durable)
                fd = open_regular(self.ledger_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            except OSError as error:
                self._refused = f"the run's world or ledger cannot be used: {error}"
            else:
                self._ledger = Ledger(self.ledger_path, incarnation, fd=fd)
            self._incarnation = incarnation
            self._frozen = False
            self._struck.clear()

    def freeze(self) -> None:
        """No new call acts, and the ones acting have finished (the harness is about to strike)."""
        with self._state:
            self._frozen = True
            self._struck.set()
            if not self._state.wait_for(lambda: self._acting == 0, timeout=FREEZE_DEADLINE_S):
                raise TimeoutError(f"a tool call still acted {FREEZE_DEADLINE_S:g}s after the service froze")

    @contextmanager
    def paused(self) -> Iterator[bool]:
        """True, with no call acting for the body: the run may be copied as a kill now would leave it (a held
        point, ``point_snapshots``). A call arriving meanwhile waits, and acts once the body is done, as it would
        have. False, pausing nothing, when a call is acting now: a kill would let it finish (or, in its latency,
        cut it short), which no copy taken now stands in for."""
        with self._state:
            if self._acting:
                quiet = False
            else:
                quiet = self._paused = True
        try:
            yield quiet
        finally:
            if quiet:
                with self._state:
                    self._paused = False
                    self._state.notify_all()

    @contextmanager
    def _acting_for(self, incarnation: int) -> Iterator[tuple[World, Ledger]]:
        """The world and ledger to act with, while incarnation ``incarnation`` still runs (once no copy of the run
        is being taken, ``paused``); AgentKilled once it does not."""
        with self._state:
            self._state.wait_for(lambda: not self._paused)
            if self._refused is not None:
                raise RunFolderRefused(self._refused)
            if self._frozen or self._incarnation != incarnation or self._ledger is None or self._world is None:
                raise AgentKilled(f"incarnation {incarnation} is no longer running")
            self._acting += 1
            acting = self._world, self._ledger
        try:
            yield acting
        finally:
            with self._state:
                self._acting -= 1
                self._state.notify_all()

    def _invoke(self, tool: str, call: str, args: dict[str, Any], incarnation: int, *, recorded: bool) -> ToolResult:
        """Run the tool on the run's world while ``incarnation`` runs (``recorded``: its invocation is written)."""
        with self._acting_for(incarnation) as (world, ledger):
            try:
                return invoke(tool, call, args, world=world, ledger=ledger, pause=self._pause,
                              tool=self.declared.get(tool), recorded=recorded)
            except AgentKilled:
                raise
            except Exception as error:  # on a state area the workload wrote (the world is its own): a failed call
                return ToolResult(ok=False, error=excerpt(f"{tool} failed on the world's state: {error!r}",
                                                          EXCERPT_CHARS))

    def _pause(self, seconds: float) -> None:
        """A tool's latency (``state/latency.json``, which the workload can write), ended by a strike: the call
        then acts on nothing (``AgentKilled``), and ``freeze`` never waits on it."""
        if self._struck.wait(min(seconds, FREEZE_DEADLINE_S)):
            raise AgentKilled("the incarnation was struck while its tool call waited out its latency")

    def call_named(self, tool: str, body: Any, reply: Reply) -> None:
        """``POST /calls/TOOL``: the call a runtime names runs, ``after_effect`` is announced (and held where
        armed), then the answer (see the module's docstring); BadRequest when ``body`` is not one."""
        call, op, args = _named_call(body, with_op=True)
        incarnation = self._incarnation
        exchange: dict[str, Any] = {"tool": excerpt(tool, NAME_CHARS), "call": excerpt(call, NAME_CHARS),
                                    "op": op if op is None else excerpt(op, NAME_CHARS),
                                    "args": excerpt(canonical(args), EXCERPT_CHARS), "incarnation": incarnation}
        self.record(exchange)
        result = self._invoke(tool, call, args, incarnation, recorded=False)
        exchange.update(ok=result.ok, error=result.error)
        if self.seams is not None:
            self.seams.announce(protocol.AFTER_EFFECT, call, op, incarnation=incarnation)
        reply(200, {"ok": result.ok, "output": result.output, "error": result.error})
        exchange["status"] = 200

    def probe_named(self, tool: str, body: Any, reply: Reply) -> None:
        """``POST /probes/TOOL``: the read-only check of whether the named call's effect is in the world."""
        call, _, args = _named_call(body, with_op=False)
        incarnation = self._incarnation
        exchange: dict[str, Any] = {"tool": excerpt(tool, NAME_CHARS), "call": excerpt(call, NAME_CHARS),
                                    "probe": True, "incarnation": incarnation}
        self.record(exchange)
        found = self._verify(tool, args, incarnation, exchange, reply, call=call)
        if found is not None:
            reply(200, {"effect_found": found})
            exchange["status"] = 200

    def handle(self, tool: str, args: Any, reply: Reply) -> None:
        """One tool request: attribute it, hold it at its seams, act, answer (``reply(status, body)``)."""
        incarnation = self._incarnation
        exchange: dict[str, Any] = {"tool": excerpt(tool, NAME_CHARS), "args": excerpt(canonical(args), EXCERPT_CHARS),
                                    "incarnation": incarnation}
        self.record(exchange)
        if self.index is None:
            exchange["status"] = 404
            reply(404, {"ok": False, "error": f"this run's runtime names its calls: POST /calls/{exchange['tool']} "
                                              f"with {{\"call\", \"op\", \"args\"}}"})
            return
        if tool == VERIFY_TOOL:
            self._probe(self.index, args, exchange, incarnation, reply)
            return
        call = self.index.call_of(tool, args)
        if call is None or not isinstance(args, dict):
            exchange["status"] = 404
            reply(404, {"ok": False, "error": f"no planned call of {exchange['tool']} with these arguments; the plan calls "
                                              f"{', '.join(self.index.tools())}"})
            return
        exchange["call"] = call
        # Taken once every reply sent before it has had its seam (``ReplyWrites``): a kill at one of those seams
        # freezes the service first, and the request then acts on nothing, its invocation unwritten.
        self.replies.settle(SETTLE_DEADLINE_S)
        # The request reached its tool: the call is under way from here, its outcome unknown to the agent until
        # the reply comes, so the invocation is in the ledger before the request is held (a kill there leaves a
        # call a NON_IDEMPOTENT class makes the agent VERIFY, as the fake tools' own invoked line does).
        with self._acting_for(incarnation) as (world, ledger):
            ledger.invoked(tool, call)
        self.hook(TOOL_REQUEST, (call,), exchange)
        result = self._invoke(tool, call, args, incarnation, recorded=True)
        exchange.update(ok=result.ok, error=result.error)
        self.hook(TOOL_EFFECT, (call,), exchange)
        with self.replies.writing():
            reply(200, {"ok": result.ok, "output": result.output, "error": result.error})
            exchange["status"] = 200
            self.hook(TOOL_REPLY, (call,), exchange)

    def proxied(self, step: str, body: Any, reply: Reply) -> None:
        """``POST /mcp/proxy/STEP``: one step of a call through the recording proxy in front of a real MCP server
        (``mcp_proxy``), held at the seam it stands for; BadRequest when ``body`` is not the step's.

        ``request`` attributes the call as ``handle`` does, writes its invocation and is ``tool_request`` (held
        before the proxy forwards it), answering a token the later steps name (or ``refused``, the tool error
        the proxy answers the agent with). While the server works, ``opens`` holds it at its first open in the
        world (``tool_opened``). ``replied`` writes the effect line of a call that succeeded (a READ_ONLY
        tool's has none) and is ``tool_effect``, the reply counted as being written (``ReplyWrites``) until
        ``delivered``, ``tool_reply``, says it reached the agent. The server's effect itself is the world's: it
        is judged from the world, and whatever a kill left there, not from these lines alone.
        """
        if not isinstance(body, dict):
            raise BadRequest(f"a proxy step's body is one JSON object, not {type(body).__name__}")
        if step in ("request", "probe"):
            (self._proxy_request if step == "request" else self._proxy_probe)(body, reply)
            return
        token = body.get("token")
        with self._state:
            proxied = self._proxied.get(token) if isinstance(token, str) else None
            if proxied is None or step not in proxied.steps[proxied.steps_taken:][:1]:
                raise BadRequest(f"proxy step {excerpt(step, NAME_CHARS)!r} with token "
                                 f"{excerpt(str(token), NAME_CHARS)!r}: a call's steps are request, then replied, "
                                 f"delivered in that order (a probe's, probe then probed), each with the token the "
                                 f"first answered")
            proxied.steps_taken += 1
        exchange, call = proxied.exchange, proxied.exchange["call"]
        if step == "probed":
            self._proxy_probed(str(token), proxied, body, reply)
        elif step == "replied":
            if self.opens is not None:
                self.opens.done(call)
            exchange.update(ok=body.get("ok") is True, error=None if body.get("ok") is True else
                            excerpt(str(body.get("error")), EXCERPT_CHARS))
            if exchange["ok"] and self.classes.get(exchange["tool"]) != protocol.READ_ONLY:
                with self._acting_for(exchange["incarnation"]) as (_, ledger):
                    ledger.effect(exchange["tool"], tool=exchange["tool"], call=call)
            self.hook(TOOL_EFFECT, (call,), exchange)
            proxied.writing.enter_context(self.replies.writing())
        else:
            exchange["status"] = 200
            try:
                self.hook(TOOL_REPLY, (call,), exchange)
            finally:
                with self._state:
                    self._proxied.pop(str(token), None)
                proxied.writing.close()
        reply(200, {})

    def _proxy_probe(self, body: dict[str, Any], reply: Reply) -> None:
        """``verify_effect`` through the proxy: the read of the server that checks the call (``[agent.verify]``)."""
        incarnation = self._incarnation
        args = body.get("arguments")
        exchange: dict[str, Any] = {"tool": VERIFY_TOOL, "args": excerpt(canonical(args), EXCERPT_CHARS),
                                    "incarnation": incarnation, "proxied": True, "probe": True}
        self.record(exchange)
        call = self.index.probed_call(args) if self.index is not None else None
        read = self.verify_reads.get(call) if call is not None else None
        if call is None or read is None:
            exchange["status"] = 404
            reply(200, {"refused": "verify_effect: give {\"tool_call_id\": ID} of a planned call's tool call; "
                                   "through the proxy only a call its scenario gives a read for ([agent.verify]) "
                                   f"can be checked: {', '.join(sorted(self.verify_reads)) or 'none is given'}"})
            return
        exchange["call"] = call
        token = self._proxied_token(exchange, ("probed",))
        if self.opens is not None:  # the server's opens for the read are no call's first open
            self.opens.expect(None, exchange)
        reply(200, {"token": token, "read": {"tool": read["tool"], "arguments": read.get("args", {})}})

    def _proxy_probed(self, token: str, proxied: _ProxiedCall, body: dict[str, Any], reply: Reply) -> None:
        """The server's answer to a probe's read: the effect is there if the read succeeded and its text holds the
        scenario's ``found``; the probe is written to the ledger."""
        exchange, call = proxied.exchange, proxied.exchange["call"]
        read = self.verify_reads[call]
        found = body.get("ok") is True and isinstance(body.get("text"), str) and read["found"] in body["text"]
        with self._state:
            self._proxied.pop(token, None)
        if self.opens is not None:
            self.opens.done(None)
        assert self.index is not None  # a probe's token is handed out only for a call the index attributed
        with self._acting_for(exchange["incarnation"]) as (_, ledger):
            ledger.probe("effect_present", tool=self.index.args_of[call][0], call=call)
        exchange.update(effect_found=found, status=200)
        reply(200, {"effect_found": found})

    def _proxied_token(self, exchange: dict[str, Any], steps: tuple[str, ...]) -> str:
        """A new token for a proxied call (or probe) whose later steps are ``steps``; BadRequest past
        ``MAX_PROXIED`` in flight (a proxy that never finishes its calls cannot grow the harness)."""
        with self._state:
            if len(self._proxied) >= MAX_PROXIED:
                raise BadRequest(f"{MAX_PROXIED} proxied calls are in flight already: finish one (replied, "
                                 f"delivered) before the next")
            token = f"{exchange['incarnation']}-{next(self._proxy_tokens)}"
            self._proxied[token] = _ProxiedCall(exchange, steps)
        return token

    def _proxy_request(self, body: dict[str, Any], reply: Reply) -> None:
        tool, args = body.get("tool"), body.get("arguments")
        incarnation = self._incarnation
        exchange: dict[str, Any] = {"tool": excerpt(str(tool), NAME_CHARS), "args": excerpt(canonical(args), EXCERPT_CHARS),
                                    "incarnation": incarnation, "proxied": True}
        self.record(exchange)
        call = self.index.call_of(str(tool), args) if self.index is not None else None
        if call is None or not isinstance(args, dict):
            exchange["status"] = 404
            reply(200, {"refused": f"no planned call of {exchange['tool']} with these arguments; the plan calls "
                                   f"{', '.join(self.index.tools()) if self.index is not None else 'nothing by name'}"})
            return
        exchange["call"] = call
        token = self._proxied_token(exchange, PROXY_CALL_STEPS)  # refused past the cap, before anything is written
        self.replies.settle(SETTLE_DEADLINE_S)  # as ``handle``: every reply sent before it has had its seam
        with self._acting_for(incarnation) as (_, ledger):
            ledger.invoked(exchange["tool"], call)
        self.hook(TOOL_REQUEST, (call,), exchange)
        if self.opens is not None:  # before the proxy forwards it: the server's first open in the world is held
            self.opens.expect(call, exchange)
        reply(200, {"token": token})

    def _probe(self, index: PlanIndex, args: Any, exchange: dict[str, Any], incarnation: int, reply: Reply) -> None:
        call = index.probed_call(args)
        if call is None:
            exchange["status"] = 404
            reply(404, {"ok": False, "error": "verify_effect: give {\"tool_call_id\": ID} of a planned call's tool "
                                              "call (or {\"call_id\": C})"})
            return
        exchange["call"] = call
        found = self._verify(*index.args_of[call], incarnation, exchange, reply, call=call)
        if found is not None:
            reply(200, {"ok": True, "output": {"effect_found": found}, "error": None})
            exchange["status"] = 200

    def _verify(self, tool: str, args: dict[str, Any], incarnation: int, exchange: dict[str, Any], reply: Reply, *,
                call: str) -> bool | None:
        """Whether ``call``'s effect is in the world (its probe, in the ledger); None once a 500 has said that
        the probe failed on a state area the workload wrote, which cannot be told, so nothing is said."""
        with self._acting_for(incarnation) as (world, ledger):
            try:
                found = verify(tool, call, args, world=world, ledger=ledger, tool=self.declared.get(tool))
            except Exception as error:
                exchange["status"] = 500
                reply(500, {"ok": False, "error": excerpt(f"the probe of {tool} failed on the world's state: "
                                                          f"{error!r}", EXCERPT_CHARS)})
                return None
        exchange["effect_found"] = found
        return found

    def offered(self) -> Iterator[tuple[str, dict[str, Any], str]]:
        """(name, JSON schema of its arguments, one line saying what it is) of each tool the plan calls, and the
        probe: what the OpenAPI document and the MCP tool list offer."""
        for name in [*(self.index.tools() if self.index is not None else ()), VERIFY_TOOL]:
            tool = self.declared.get(name) or lookup(name)
            schema = tool.schema if tool is not None else {
                "type": "object", "properties": {"tool_call_id": {"type": "string"}}, "required": ["tool_call_id"]}
            summary = ("read-only: is the effect of an interrupted tool call in the world?" if tool is None else
                       f"{name} (declared by the scenario)" if name in self.declared else
                       f"{name} (a killpoint fake tool, family {tool.family})")
            yield name, schema, summary

    def mcp_tools(self) -> list[dict[str, Any]]:
        """The MCP ``tools/list`` entries: each offered tool, annotated by its class."""
        return [mcp_endpoint.listed_tool(name, summary, schema, self.classes.get(name, protocol.UNKNOWN))
                for name, schema, summary in self.offered()]

    def openapi(self) -> dict[str, Any]:
        """An OpenAPI 3.1 document: one POST operation per tool the plan calls, and the probe."""
        paths: dict[str, Any] = {}
        for name, schema, summary in self.offered():
            paths[f"/tools/{name}"] = {"post": {
                "operationId": name, "summary": summary,
                "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}},
                "responses": {"200": {"description": "the call's result", "content": {"application/json": {
                    "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}, "output": {},
                                                                "error": {"type": ["string", "null"]}}}}}}}}}
        return {"openapi": "3.1.0", "info": {"title": "killpoint fake tools", "version": "1"}, "paths": paths}


def _named_call(body: Any, *, with_op: bool) -> tuple[str, str | None, dict[str, Any]]:
    """The call id, op and arguments of a request naming its call; BadRequest naming the field that is wrong."""
    fields = '{"call": CALL_ID, ' + ('"op": OP, ' if with_op else "") + '"args": {...}}'
    if not isinstance(body, dict):
        raise BadRequest(f"the body must be one JSON object {fields}")
    call, op, args = body.get("call"), body.get("op"), body.get("args", {})
    if not isinstance(call, str) or not call:
        raise BadRequest(f"'call' must be the planned call's call_id, a non-empty string: {fields}")
    if with_op and not (op is None or isinstance(op, str)):
        raise BadRequest(f"'op' must be the operation id the runtime journaled, a string (or null): {fields}")
    if not isinstance(args, dict):
        raise BadRequest(f"'args' must be the call's arguments, a JSON object: {fields}")
    unknown = sorted(set(body) - {"call", "args", *(("op",) if with_op else ())})
    if unknown:
        raise BadRequest(f"unknown field {excerpt(unknown[0], NAME_CHARS)!r}: {fields}")
    return call, op, args


def _handler_for(service: ToolService) -> type[QuietHandler]:
    class Handler(QuietHandler):
        timeout = IO_TIMEOUT_S

        def do_GET(self) -> None:
            if self.path.split("?")[0] == "/openapi.json":
                self._send(200, service.openapi())
            elif self.path.split("?")[0] == mcp_endpoint.PATH:  # no stream from server to client is offered
                self._send(405, None, ("Allow", "POST"))
            else:
                self._send(404, {"ok": False, "error": f"no such path {self.path[:200]!r}; see /openapi.json"})

        def do_DELETE(self) -> None:
            self._send(405, None, ("Allow", "POST"))  # no MCP session is handed out, so none is ended

        def do_POST(self) -> None:
            kind, _, name = self.path.split("?")[0].removeprefix("/").partition("/")
            if kind == mcp_endpoint.PATH.removeprefix("/") and not name and (server := service.mcp_server):
                self._serve(lambda message: mcp_http_proxy.serve(  # the scenario's own server, behind the harness
                    service, server, message, json.dumps(message).encode(), dict(self.headers.items()),
                    self._relay), mcp_endpoint.parse_error, None)
                return
            if kind == mcp_endpoint.PATH.removeprefix("/") and not name:  # one MCP message: its tool calls too
                self._serve(lambda message: mcp_endpoint.answer(message, service.mcp_tools(), service.handle,
                                                                self._send), mcp_endpoint.parse_error, None)
                return
            if kind == mcp_endpoint.PATH.removeprefix("/") and name.startswith(PROXY_STEPS):  # the recording proxy
                self._serve(lambda body: service.proxied(name.removeprefix(PROXY_STEPS), body, self._send),
                            lambda reason: {"ok": False, "error": f"the body is not one JSON value: {reason}"}, {})
                return
            handle = {"tools": service.handle, "calls": service.call_named, "probes": service.probe_named}.get(kind)
            if handle is None or not name or "/" in name:
                self._send(404, {"ok": False, "error": f"no such path {self.path[:200]!r}; POST /tools/NAME (or "
                                                       f"/calls/NAME, /probes/NAME for a runtime naming its calls)"})
                return
            self._serve(lambda args: handle(name, args, self._send),
                        lambda reason: {"ok": False, "error": f"the body is not one JSON value: {reason}"}, {})

        def _serve(self, respond: Callable[[Any], None], not_json: Callable[[str], dict[str, Any]],
                   empty: Any) -> None:
            """Read the body (bounded, strict JSON; ``empty`` when there is none) and ``respond`` to it; a body
            that is not JSON is answered 400 with ``not_json(reason)``."""
            length = content_length(self.headers.get("Content-Length"))
            if length is None or length > MAX_BODY_BYTES:
                self._send(411 if length is None else 413, {
                    "ok": False, "error": f"a tool request has a Content-Length, a whole number of at most "
                                          f"{MAX_BODY_BYTES} bytes"})
                self.close_connection = True
                return
            try:
                body = strict_json(self.rfile.read(length)) if length else empty
            except ValueError as error:
                self._send(400, not_json(str(error)))
                return
            try:
                respond(body)
            except BadRequest as bad:
                self._send(400, {"ok": False, "error": str(bad)})
            except RunFolderRefused as refused:
                self._send(503, {"ok": False, "error": f"nothing acts: {refused}"})
            except AgentKilled:
                self.drop_when_dead()  # nothing is written to it, nothing acts

        def _relay(self, answer: mcp_http_proxy.Answer) -> None:
            """The scenario's MCP server's answer, as it came (its status, content type and session id)."""
            self.send_response(answer.status)
            for header in answer.headers:
                self.send_header(*header)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)
            self.wfile.flush()

        def _send(self, status: int, body: dict[str, Any] | None, *headers: tuple[str, str]) -> None:
            data = b"" if body is None else json.dumps(body, default=str).encode()
            self.send_response(status)
            if body is not None:
                self.send_header("Content-Type", "application/json")
            for header in headers:
                self.send_header(*header)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

    return Handler
