"""UI tools: a screen of buttons; tapping "submit" submits the form every time.

The screen (``state/screen.json``) maps button ids to what they do. Each
submission is stored with the call's request reference, as a real order list
shows an order number, so a probe can look for it the way an agent would.
"""

from __future__ import annotations

from typing import Any

from fake_tools.base import ToolContext, ToolFailed, fake_tool, verifies
from fake_tools.schema import NAME, obj
from fake_tools.world import World

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


@verifies(ui_tap)
def _submission_listed(world: World, args: dict[str, Any], call: str) -> bool:
    return any(entry["ref"] == call for entry in world.load("submissions", []))
