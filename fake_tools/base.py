"""What a fake tool is, and the one code path through which every tool runs.

A tool is data (``FakeTool``): its name, family, argument schema, an ``act``
that changes the world, and a read-only ``probe`` that tells, from the world
alone, whether a given call's effect is there. ``invoke`` and ``verify`` do the
bookkeeping every tool shares, so the catalogue's tools hold only their logic.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from killpoint import protocol
from killpoint.client import Rendezvous
from killpoint.errors import InternalError
from killpoint.fake_tools.ledger import Ledger
from killpoint.fake_tools.schema import schema_errors
from killpoint.fake_tools.world import SandboxError, World


class ToolFailed(InternalError):
    """The tool ran and refused: the call is FAILED, with this message."""


# What a tool may raise to refuse a call: ``invoke`` turns each into a FAILED call with its message.
MAX_LATENCY_S = 3600
REFUSALS = (ToolFailed, SandboxError, OSError, UnicodeError)


@dataclass
class ToolContext:
    """What ``act`` may touch: the world, and ``effect`` to record each change it makes."""

    world: World
    ledger: Ledger
    tool: str
    call: str

    def effect(self, name: str) -> None:
        """Record one change to the world; call it right after making the change."""
        self.ledger.effect(name, tool=self.tool, call=self.call)


Act = Callable[[ToolContext, dict[str, Any]], Any]
Probe = Callable[[World, dict[str, Any], str], bool]


def _nothing_to_verify(world: World, args: dict[str, Any], call: str) -> bool:
    return False


@dataclass(frozen=True)
class FakeTool:
    name: str
    family: str
    schema: dict[str, Any]
    act: Act
    # Read-only: did call ``call`` with ``args`` leave its effect in ``world``?
    probe: Probe = field(default=_nothing_to_verify)


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    output: Any = None
    error: str | None = None


REGISTRY: dict[str, FakeTool] = {}


def register(tool: FakeTool) -> FakeTool:
    if tool.name in REGISTRY:
        raise ValueError(f"fake tool {tool.name!r} registered twice")
    REGISTRY[tool.name] = tool
    return tool


def fake_tool(name: str, *, family: str, schema: dict[str, Any]) -> Callable[[Act], FakeTool]:
    """Decorator: register the function as the ``act`` of a new tool (add ``probe`` with ``verifies``)."""

    def wrap(act: Act) -> FakeTool:
        return register(FakeTool(name=name, family=family, schema=schema, act=act))

    return wrap


def verifies(tool: FakeTool) -> Callable[[Probe], Probe]:
    """Decorator: attach a read-only probe to an already registered tool."""

    def wrap(probe: Probe) -> Probe:
        REGISTRY[tool.name] = FakeTool(tool.name, tool.family, tool.schema, tool.act, probe)
        return probe

    return wrap


def lookup(name: str) -> FakeTool | None:
    return REGISTRY.get(name)


def invoke(
    name: str,
    call: str,
    args: dict[str, Any],
    *,
    world: World,
    ledger: Ledger,
    rendezvous: Rendezvous | None = None,
    op: str | None = None,
    pause: Callable[[float], None] = time.sleep,
    tool: FakeTool | None = None,
    recorded: bool = False,
) -> ToolResult:
    """Run one tool call: invocation record, validation, act, then the ``after_effect`` point.

    A bad argument or a refused path is a FAILED call with the reason, never a
    crash. Every call, failed or not, passes ``after_effect`` (for a failed call:
    the tool is done and has not returned). ``pause`` waits out the tool's latency
    (``_take_time``): a server of the tools bounds it. ``tool``: the tool to run, when it is none of
    the registered ones (a tool a scenario declares); by default the one registered as ``name``. ``recorded``:
    the caller wrote the invocation record already (a server of the tools writes it when the request arrives).
    """
    if not recorded:
        ledger.invoked(name, call)
    result = _act(name, call, args, world, ledger, pause, tool or lookup(name))
    if rendezvous is not None:
        rendezvous.point(protocol.AFTER_EFFECT, call=call, op=op)
    return result


def _act(name: str, call: str, args: dict[str, Any], world: World, ledger: Ledger,
         pause: Callable[[float], None], tool: FakeTool | None) -> ToolResult:
    if tool is None:
        return ToolResult(ok=False, error=f"no fake tool named {name!r}")
    errors = schema_errors(tool.schema, args)
    if errors:
        return ToolResult(ok=False, error=f"{name}: " + "; ".join(errors))
    try:
        _take_time(world, name, pause)  # reads state/latency.json, which may be refused like any world file
        return ToolResult(ok=True, output=tool.act(ToolContext(world, ledger, name, call), args))
    except REFUSALS as refusal:
        return ToolResult(ok=False, error=f"{name}: {world.describe(refusal)}")


def _take_time(world: World, name: str, pause: Callable[[float], None]) -> None:
    """Wait as long as the world says this tool takes (state area ``latency``, seconds per tool).

    Real tools take time: a network call, an app launch. A scenario that sets
    ``[world.state.latency]`` opens a real window between a call's invocation
    and its effect, where a timed or event kill of an uninstrumented runtime
    lands reliably; the in-process fakes are otherwise too fast to hit.
    """
    latency = world.load("latency", {})
    seconds = latency.get(name, 0) if isinstance(latency, dict) else 0
    if isinstance(seconds, int | float) and seconds > 0:
        if not math.isfinite(seconds) or seconds > MAX_LATENCY_S:
            raise ToolFailed(f"state/latency.json gives {name} {seconds} seconds, not a latency a tool has "
                             f"(at most {MAX_LATENCY_S} s)")
        pause(seconds)


def verify(name: str, call: str, args: dict[str, Any], *, world: World, ledger: Ledger,
           tool: FakeTool | None = None) -> bool:
    """A VERIFY's read-only check: is this call's effect in the world? Records a probe. ``tool`` as ``invoke``'s."""
    ledger.probe("effect_present", tool=name, call=call)
    tool = tool or lookup(name)
    if tool is None or schema_errors(tool.schema, args):
        return False
    try:
        return bool(tool.probe(world, args, call))
    except (SandboxError, OSError):
        return False
