"""Instrumentation for durable-execution frameworks: a framework's step as one planned call of killpoint.

A step is wrapped where its framework's users already name it::

    builder.add_node(kp.step("c3", charge_card, probe=card_charged))   # LangGraph: the node is named "c3"
    read = task(kp.step("c1", read_config))                             # LangGraph functional API
    charge = kp_dbos.step("c3", charge_card, probe=card_charged)        # DBOS (killpoint.frameworks.dbos)

The wrapper's name is the call id, so the framework stores the step under it
and killpoint's store readers find it there. Around the function it writes the
ledger and announces the step's crash points, in this order::

    [guard] -> intent marker -> ledger invoked -> step_entered -> fn -> ledger effect -> after_effect
            -> step_returned -> (the framework's saver is handed it) -> step_saving
            -> (the saver records it) -> step_recorded

``step_saving`` is announced by a framework with a saver of its own
(LangGraph's checkpointer, ``killpoint.frameworks.langgraph``), often from
the saver's thread while the next step already runs; DBOS records a step on
the step's own call, so its steps have no ``step_saving``.

The guard is the correct recovery of a NON_IDEMPOTENT (or UNKNOWN) step,
which neither framework can do alone (both re-run an interrupted step): when
this step was entered in an earlier incarnation and never recorded, and a
``probe`` is given, the probe (read-only) runs first and, if it finds the
effect, its answer is the step's result and the effect is not repeated.

A step that raises returns ``{"error": "..."}`` instead (and says so on
stderr): a raising step aborts the graph or fails the workflow, where an
agent's tool error is a result the run goes on from (and the framework then
records, so it is not re-run). A StateGraph drops an update key its state
does not declare: give the state an ``error`` key to keep the failure in it.

Outside killpoint (no ``KILLPOINT_RUN_DIR``) the wrapper only calls the function.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar, overload

from killpoint import protocol
from killpoint.fake_tools.base import invoke, verify
from killpoint.frameworks import _session
from killpoint.frameworks._session import Session

__all__ = ["fake_step", "step"]

R = TypeVar("R")
Probe = Callable[..., Any]


@overload
def step(call_id: str, fn: Callable[..., R], *, probe: Probe | None = None) -> Callable[..., R | dict[str, str]]: ...
@overload
def step(call_id: str, fn: None = None, *,
         probe: Probe | None = None) -> Callable[[Callable[..., R]], Callable[..., R | dict[str, str]]]: ...


def step(call_id: str, fn: Callable[..., Any] | None = None, *, probe: Probe | None = None) -> Any:
    """``fn`` as the step of planned call ``call_id`` (also a decorator: ``@step("c1")``).

    ``probe`` is a read-only function of the step's arguments: it returns None
    (or False) when the step's effect is not in the world, else the result the
    step returns without acting again.
    """
    if fn is None:
        return functools.partial(step, call_id, probe=probe)
    user_fn = fn

    def run_step(*args: Any, **kwargs: Any) -> Any:
        session = _session.current()
        if session is None:
            return user_fn(*args, **kwargs)
        tool = session.tool_of(call_id, user_fn.__name__)

        def check() -> Any:
            session.ledger.probe("effect_present", tool=tool, call=call_id)
            return probe(*args, **kwargs) if probe is not None else None

        def act() -> Any:
            session.ledger.invoked(tool, call_id)
            try:
                result = user_fn(*args, **kwargs)
            except Exception as failure:  # noqa: BLE001 - any tool error is the step's result
                result = {"error": f"{call_id} ({tool}): {type(failure).__name__}: {failure}"}
                print(f"killpoint.frameworks: step {result['error']}", file=sys.stderr, flush=True)
            else:
                if session.class_of(tool) != protocol.READ_ONLY:
                    session.ledger.effect(tool, tool=tool, call=call_id)
            session.point(protocol.AFTER_EFFECT, call_id)
            return result

        return _guarded(session, call_id, tool, check if probe is not None else None, act)

    return _named(run_step, call_id, user_fn)


def fake_step(call_id: str, probe: bool = False) -> Callable[..., dict[str, dict[str, Any]]]:
    """A step running killpoint's own fake tool of planned call ``call_id``, with the plan's arguments.

    Whatever the framework passes (the graph state, task arguments) is ignored.
    The step returns ``{call_id: {"ok", "output", "error"}}``, which is also a
    StateGraph update of a state keyed by call id. ``probe=True`` guards it with
    the fake tool's own read-only probe.
    """

    def run_fake_step(*_args: Any, **_kwargs: Any) -> dict[str, dict[str, Any]]:
        session = _session.current()
        if session is None:
            raise RuntimeError(f"fake_step({call_id!r}) runs a killpoint fake tool: start it with killpoint")
        call = session.calls[call_id]
        tool, args = call["tool"], call.get("args", {})

        def check() -> dict[str, dict[str, Any]] | None:
            found = verify(tool, call_id, args, world=session.world, ledger=session.ledger)
            return {call_id: {"ok": True, "output": None, "error": None, "verified": True}} if found else None

        def act() -> dict[str, dict[str, Any]]:
            result = invoke(tool, call_id, args, world=session.world, ledger=session.ledger,
                            rendezvous=session.rendezvous)
            return {call_id: {"ok": result.ok, "output": result.output, "error": result.error}}

        return _guarded(session, call_id, tool, check if probe else None, act)

    return _named(run_fake_step, call_id)


def _guarded(session: Session, call_id: str, tool: str, check: Callable[[], Any] | None,
             act: Callable[[], R]) -> Any:
    """The guard, then the intent marker, then ``act`` (invocation, effect, after_effect), then step_returned."""
    session.ran_here.add(call_id)
    if check is not None and session.needs_check(call_id, tool):
        found = check()
        if found is not None and found is not False:
            session.point(protocol.STEP_RETURNED, call_id)
            return found
    session.enter(call_id, tool)
    result = act()
    session.point(protocol.STEP_RETURNED, call_id)
    return result


def _named(wrapper: Callable[..., R], call_id: str, wrapped: Callable[..., Any] | None = None) -> Callable[..., R]:
    """Name the wrapper after the call id: the name LangGraph gives the node and DBOS the step."""
    if wrapped is not None:
        functools.update_wrapper(wrapper, wrapped)
    wrapper.__name__ = wrapper.__qualname__ = call_id
    return wrapper
