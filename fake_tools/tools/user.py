"""User-interaction tools: questions answered from the world's scripted user.

Asking changes nothing in the world (the user sees a prompt, that is all), so
no effect is recorded; the ledger's invocation record still shows each asking.
The scripted user (``state/user.json``) holds ``answers`` by question and a
``default_answer``; a choice question gets the scripted answer when it is one
of the choices, else the first choice.
"""

from __future__ import annotations

from typing import Any

from killpoint.fake_tools.base import ToolContext, ToolFailed, fake_tool
from killpoint.fake_tools.schema import TEXT, obj
from killpoint.fake_tools.tools._areas import STRINGS


@fake_tool("ask_user", family="user", schema=obj({"question": TEXT}))
def ask_user(ctx: ToolContext, args: dict[str, Any]) -> str:
    user = ctx.world.load("user", {})
    return user.get("answers", {}).get(args["question"], user.get("default_answer", "yes"))


@fake_tool("ask_user_choice", family="user", schema=obj({"question": TEXT, "choices": STRINGS}))
def ask_user_choice(ctx: ToolContext, args: dict[str, Any]) -> str:
    if not args["choices"]:
        raise ToolFailed("ask_user_choice: args.choices is empty; give the user at least one choice")
    answer = ctx.world.load("user", {}).get("answers", {}).get(args["question"])
    return answer if answer in args["choices"] else args["choices"][0]
