"""UI tools: a screen of buttons; tapping "submit" submits the form every time.

The screen (``state/screen.json``) maps button ids to what they do. Each
submission is stored with the call's request reference, as a real order list
shows an order number, so a probe can look for it the way an agent would.
"""

from __future__ import annotations

from typing import Any

from killpoint.fake_tools.base import ToolContext, ToolFailed, fake_tool
from killpoint.fake_tools.schema import NAME, obj
from killpoint.fake_tools.tools._areas import (
    TEXT1,
    Args,
    State,
    bounded,
    enum,
    logged_tool,
    pick,
    probe_of,
    reader,
)
from killpoint.fake_tools.world import World

DEFAULT_SCREEN: dict[str, Any] = {"buttons": {"submit": {"submits": "form"}}, "form": {}}


@fake_tool("ui_tap", family="ui", schema=obj({"target": NAME}))
def ui_tap(ctx: ToolContext, args: dict[str, Any]) -> str:
    screen = ctx.world.load("screen", DEFAULT_SCREEN)
    button = screen["buttons"].get(args["target"])
    if button is None:
        raise ToolFailed(f"no button {args['target']!r} on the screen (buttons: {sorted(screen['buttons'])})")
    if "submits" in button:
        submissions = ctx.world.load("submissions", [])
        submissions.append({"form": dict(screen.get("form", {})), "ref": ctx.call})
        ctx.world.save("submissions", submissions)
        ctx.effect("form_submitted")
        return f"submitted #{len(submissions)}"
    return "tapped"


@probe_of(ui_tap)
def _submission_listed(world: World, args: dict[str, Any], call: str) -> bool:
    return any(entry["ref"] == call for entry in world.load("submissions", []))


# Swipes and typing are logged by the input dispatcher in the screen's ``inputs``
# list, stamped with the call id: that log is how a probe tells a relative swipe
# or a typed text from one made by another call.
SCREEN: dict[str, Any] = {**DEFAULT_SCREEN, "scroll": {"x": 0, "y": 0}, "inputs": []}


def _inputs(state: State, args: Args) -> list[dict[str, Any]]:
    return state.setdefault("inputs", [])


@reader("ui_dump", family="ui", area="screen", default=SCREEN)
def ui_dump(state: State, args: Args) -> dict[str, Any]:
    """The view hierarchy: buttons, form fields and scroll position (not the input log)."""
    return {key: value for key, value in state.items() if key != "inputs"}


@logged_tool("ui_swipe", family="ui", area="screen", default=SCREEN, effect="swiped", entries=_inputs,
             schema=obj({"direction": enum("up", "down", "left", "right")}, {"distance": bounded(1, 2000)}))
def ui_swipe(state: State, args: Args) -> tuple[dict[str, Any], dict[str, int]]:
    """Scroll relative to where the screen is: up/down move the content, left/right turn a page."""
    distance = args.get("distance", 500)
    scroll = state.setdefault("scroll", {"x": 0, "y": 0})
    if args["direction"] in ("up", "down"):
        scroll["y"] = max(0, scroll.get("y", 0) + (distance if args["direction"] == "up" else -distance))
    else:
        scroll["x"] = max(0, scroll.get("x", 0) + (1 if args["direction"] == "left" else -1))
    return {"op": "swipe", "direction": args["direction"], "distance": distance}, dict(scroll)


@logged_tool("input_text", family="ui", area="screen", default=SCREEN, effect="text_typed", entries=_inputs,
             schema=obj({"field": NAME, "text": TEXT1}))
def input_text(state: State, args: Args) -> tuple[dict[str, Any], str]:
    """Type into a form field: the text goes after what the field holds, so a replay types it twice."""
    form = state.setdefault("form", {})
    current = pick(form, args["field"], "form field")
    form[args["field"]] = ("" if current is None else str(current)) + args["text"]
    return {"op": "type", "field": args["field"], "text": args["text"]}, form[args["field"]]
