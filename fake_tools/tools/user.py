"""User-interaction tools: questions answered from the world's scripted user.

Asking changes nothing in the world (the user sees a prompt, that is all), so
no effect is recorded; the ledger's invocation record still shows each asking.
"""

from __future__ import annotations

from typing import Any

from fake_tools.base import ToolContext, fake_tool
from fake_tools.schema import TEXT, obj


@fake_tool("ask_user", family="user", schema=obj({"question": TEXT}))
def ask_user(ctx: ToolContext, args: dict[str, Any]) -> str:
    user = ctx.world.load("user", {})
    return user.get("answers", {}).get(args["question"], user.get("default_answer", "yes"))
