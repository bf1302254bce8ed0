"""The few ways a fake tool reads, changes and probes a service area, shared by every family.

Each simulated service keeps its state in one area (``state/AREA.json``). A tool
that changes a service loads the area, changes it in memory, saves it once
(atomically) and records its effect right after, so a kill leaves the old or the
new area and at most the effect record missing. A request a replay would repeat
is stamped with the call id as ``ref`` (the order number or issue number a real
service would show), so a probe finds it from the world alone, the way an agent
would list alarms or search issue titles.

Gotcha: ``World.load`` hands back its ``default`` object itself when an area was
never written; ``load_area`` copies it, so a tool can never mutate a module default.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from killpoint.fake_tools.base import (
    FakeTool,
    Probe,
    ToolContext,
    ToolFailed,
    fake_tool,
    verifies,
)
from killpoint.fake_tools.schema import obj
from killpoint.fake_tools.world import World

NO_ARGS: dict[str, Any] = obj({})
SHORT: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 200}
TEXT1: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 4096}
OBJECT: dict[str, Any] = {"type": "object"}
STRINGS: dict[str, Any] = {"type": "array", "items": {"type": "string", "maxLength": 200}}

State = dict[str, Any]
Args = dict[str, Any]
View = Callable[[State, Args], Any]
Apply = Callable[[State, Args], tuple[dict[str, Any], Any]]
Locate = Callable[[State, Args], tuple[dict[str, Any], str, Any]]
Entries = Callable[[State, Args], list[dict[str, Any]]]


def enum(*values: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


def bounded(low: int, high: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": low, "maximum": high}


class Refused(ToolFailed):
    """A refusal the service logs in its area: the thing to act on is gone (a replay's signature).

    A real service logs such a request too ("uninstall: unknown package"); here
    the log is also what makes a blind replay of a removal visible in the world,
    and what tells a probe that this call has run (``refusal_logged``).
    """

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.fields = fields


def load_area(world: World, area: str, default: State) -> State:
    """The area's state laid over a fresh copy of ``default``: keys a seed left out take their default."""
    state = copy.deepcopy(default)
    stored = world.load(area, None)
    if stored is None:
        return state
    if not isinstance(stored, dict):
        raise ToolFailed(f"state/{area}.json holds {type(stored).__name__}, not an object: reseed the world")
    state.update(stored)
    return state


def change(ctx: ToolContext, area: str, default: State, mutate: Callable[[State], Any], *, effect: str) -> Any:
    """Apply ``mutate`` to the area and save it once, then record ``effect``; return what mutate returned.

    Nothing is saved or recorded when ``mutate`` left the state as it was.
    A ``ToolFailed`` from ``mutate`` saves nothing, except a ``Refused``, whose
    entry alone is appended to the area's ``log`` (the partly mutated state is dropped).
    """
    state = load_area(ctx.world, area, default)
    before = copy.deepcopy(state)
    try:
        result = mutate(state)
    except Refused as refusal:
        state = load_area(ctx.world, area, default)
        stamp(state.setdefault("log", []), ctx, {**refusal.fields, "refused": str(refusal)})
        ctx.world.save(area, state)
        ctx.effect("refusal_logged")
        raise
    if state != before:  # a put of the value already there is no change, and records none
        ctx.world.save(area, state)
        ctx.effect(effect)
    return result


def stamp(entries: list[dict[str, Any]], ctx: ToolContext, entry: dict[str, Any]) -> dict[str, Any]:
    """Append ``entry`` stamped with this call's id as ``ref`` and return it."""
    stamped = {**entry, "ref": ctx.call}
    entries.append(stamped)
    return stamped


def has_ref(entries: Any, call: str) -> bool:
    """Does an entry of ``entries`` carry ``call`` as its ref?"""
    return isinstance(entries, list) and any(isinstance(entry, dict) and entry.get("ref") == call for entry in entries)


def refusal_logged(state: State, call: str) -> bool:
    """Does the area's ``log`` hold an entry of ``call``: its refusal (see ``Refused``), or its own log entry?

    A logged refusal means the call has run and its outcome is in the world: a
    redo would only be refused and logged again, doubling the log, so a probe
    reads it as "done".
    """
    return has_ref(state.get("log"), call)


def log_of(state: State, args: Args) -> list[dict[str, Any]]:
    """The area's own request log (the default place for stamped entries)."""
    return state.setdefault("log", [])


def reader(name: str, *, family: str, area: str, default: State,
           schema: dict[str, Any] = NO_ARGS) -> Callable[[View], FakeTool]:
    """Decorator: register a READ_ONLY tool answering ``view(state, args)`` from one area; it never saves."""

    def wrap(view: View) -> FakeTool:
        def act(ctx: ToolContext, args: Args) -> Any:
            return view(load_area(ctx.world, area, default), args)

        return fake_tool(name, family=family, schema=schema)(act)

    return wrap


def area_view(name: str, *, family: str, area: str, default: State) -> FakeTool:
    """Register a READ_ONLY tool without arguments that returns its whole area (device facts, sensors)."""
    return reader(name, family=family, area=area, default=default)(lambda state, args: state)


def logged_tool(name: str, *, family: str, schema: dict[str, Any], area: str, default: State, effect: str,
                entries: Entries = log_of) -> Callable[[Apply], FakeTool]:
    """Decorator: register a tool whose every call changes ``area`` and leaves one entry stamped with its ref.

    ``apply(state, args)`` changes the state and returns (entry, output); the
    entry goes to ``entries(state, args)`` in the same save. The probe looks for
    that ref, so it tells this call from every other one, replays included.
    """

    def wrap(apply: Apply) -> FakeTool:
        def act(ctx: ToolContext, args: Args) -> Any:
            def mutate(state: State) -> Any:
                entry, output = apply(state, args)
                stamp(entries(state, args), ctx, entry)
                return output

            return change(ctx, area, default, mutate, effect=effect)

        tool = fake_tool(name, family=family, schema=schema)(act)
        probe_ref(tool, area, default, entries)
        return tool

    return wrap


def probe_of(tool: FakeTool) -> Callable[[Probe], Probe]:
    """Like ``verifies``; a world the probe cannot read (an unknown target, a malformed seed) reads as no effect.

    ``verify`` only turns sandbox and OS errors into False; a probe must never
    crash the recovering runtime, and "not there" makes it redo, the safe side.
    """

    def wrap(probe: Probe) -> Probe:
        def guarded(world: World, args: Args, call: str) -> bool:
            try:
                return bool(probe(world, args, call))
            except (ToolFailed, LookupError, TypeError, AttributeError, UnicodeError):
                return False

        verifies(tool)(guarded)
        return probe

    return wrap


def probe_ref(tool: FakeTool, area: str, default: State, entries: Entries = log_of) -> None:
    """Attach the probe "an entry of ``entries(state, args)`` carries this call's ref, or its refusal is logged"."""

    def probe(world: World, args: Args, call: str) -> bool:
        state = load_area(world, area, default)
        return refusal_logged(state, call) or has_ref(entries(state, args), call)

    probe_of(tool)(probe)


def setter(name: str, *, family: str, schema: dict[str, Any], area: str, default: State,
           effect: str) -> Callable[[Locate], FakeTool]:
    """Decorator: register an IDEMPOTENT_WRITE that puts one value (put semantics) and its probe.

    ``locate(state, args)`` returns (container, key, value), raising ToolFailed
    for an unknown target; the act stores ``container[key] = value`` and the probe
    answers whether the value is there, so a second call changes nothing.
    """

    def wrap(locate: Locate) -> FakeTool:
        def act(ctx: ToolContext, args: Args) -> Any:
            def put(state: State) -> Any:
                container, key, value = locate(state, args)
                container[key] = value
                return value

            return change(ctx, area, default, put, effect=effect)

        tool = fake_tool(name, family=family, schema=schema)(act)

        @probe_of(tool)
        def probe(world: World, args: Args, call: str) -> bool:
            container, key, value = locate(load_area(world, area, default), args)
            return key in container and container[key] == value

        return tool

    return wrap


def pick(mapping: dict[str, Any], key: str, what: str) -> Any:
    """``mapping[key]``, or a ToolFailed that names what exists (the agent's next step)."""
    if key not in mapping:
        known = ", ".join(sorted(mapping)[:20]) or "none"
        raise ToolFailed(f"no {what} {key!r} (known: {known})")
    return mapping[key]


def matches(query: str, *texts: Any) -> bool:
    """Case-insensitive: does every word of ``query`` occur in one of ``texts``?"""
    haystack = " ".join(str(text) for text in texts).lower()
    return all(word in haystack for word in query.lower().split())
