"""Pure text tools the catalogue files under family "file", and ``code_runner``.

They are functions of their arguments (``data_analyzer`` may read a file), so
they never save anything: a replay returns the same answer and leaves the world
as it was. ``code_runner`` is the exception (UNKNOWN): it runs each line of its
code through the confined shell, never a real interpreter, and logs the run
(one that stopped at a refused line included) stamped with the call id in
``state/code_runs.json``.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Callable
from typing import Any

from killpoint.fake_tools.base import FakeTool, ToolContext, ToolFailed, fake_tool
from killpoint.fake_tools.schema import PATH, TEXT, obj
from killpoint.fake_tools.tools._areas import (
    OBJECT,
    STRINGS,
    TEXT1,
    Args,
    State,
    bounded,
    change,
    enum,
    probe_ref,
    stamp,
)
from killpoint.fake_tools.tools.shell import run_logged

TRANSFORMS = {
    "upper": str.upper,
    "lower": str.lower,
    "title": str.title,
    "reverse": lambda text: text[::-1],
    "trim": str.strip,
    "snake_case": lambda text: "_".join(re.findall(r"\w+", text.lower())),
}
LANGUAGES = ("python", "javascript", "kotlin", "sh")


def _pure(name: str, schema: dict[str, Any]) -> Callable[[Callable[[Args], Any]], FakeTool]:
    """Register a READ_ONLY tool of family "file" whose answer depends on its arguments only."""

    def wrap(function: Callable[[Args], Any]) -> FakeTool:
        return fake_tool(name, family="file", schema=schema)(lambda ctx, args: function(args))

    return wrap


@_pure("text_transform", obj({"text": TEXT, "operation": enum(*TRANSFORMS)}))
def text_transform(args: Args) -> str:
    return TRANSFORMS[args["operation"]](args["text"])


@_pure("json_format", obj({"text": TEXT1}, {"indent": bounded(0, 8), "sort_keys": {"type": "boolean"}}))
def json_format(args: Args) -> str:
    try:
        value = json.loads(args["text"])
    except (ValueError, RecursionError) as error:
        raise ToolFailed(f"json_format: text is not JSON (or nested too deep): {error}") from None
    return json.dumps(value, indent=args.get("indent", 2), sort_keys=args.get("sort_keys", False), ensure_ascii=False)


@_pure("char_count", obj({"text": TEXT}))
def char_count(args: Args) -> dict[str, int]:
    text = args["text"]
    return {"characters": len(text), "words": len(text.split()), "lines": len(text.splitlines()),
            "bytes": len(text.encode())}


@_pure("structure", obj({"text": TEXT1}))
def structure(args: Args) -> dict[str, Any]:
    """A title (the first non-empty line), the paragraphs, and the bulleted lines of a text."""
    lines = [line.strip() for line in args["text"].splitlines()]
    paragraphs = [block.strip() for block in re.split(r"\n\s*\n", args["text"]) if block.strip()]
    return {"title": next((line for line in lines if line), ""), "paragraphs": paragraphs,
            "bullets": [line[1:].strip() for line in lines if line[:1] in ("-", "*", "•")]}


@_pure("template", obj({"template": TEXT1}, {"values": OBJECT}))
def template(args: Args) -> str:
    """Fill ``{name}`` placeholders; every missing value is named at once."""
    values = args.get("values", {})
    missing = sorted({name for name in re.findall(r"\{(\w+)\}", args["template"]) if name not in values})
    if missing:
        raise ToolFailed(f"template: no value for placeholder(s) {', '.join(missing)}")
    return re.sub(r"\{(\w+)\}", lambda match: str(values[match.group(1)]), args["template"])


@_pure("connector", obj({"parts": STRINGS}, {"separator": {"type": "string", "maxLength": 20}}))
def connector(args: Args) -> str:
    return args.get("separator", " ").join(args["parts"])


@_pure("code", obj({"language": enum(*LANGUAGES), "description": TEXT1}))
def code(args: Args) -> str:
    """A code skeleton for the description; it is text, nothing runs it."""
    comment = {"python": "#", "sh": "#"}.get(args["language"], "//")
    header = "\n".join(f"{comment} {line}" for line in args["description"].splitlines() or [""])
    body = {
        "python": "def main() -> None:\n    raise NotImplementedError\n",
        "javascript": "function main() {\n  throw new Error('not implemented');\n}\n",
        "kotlin": "fun main() {\n    TODO()\n}\n",
        "sh": "set -eu\n",
    }[args["language"]]
    return f"{header}\n{body}"


@fake_tool("data_analyzer", family="file",
           schema=obj({}, {"numbers": {"type": "array", "items": {"type": "number"}}, "path": PATH}))
def data_analyzer(ctx: ToolContext, args: Args) -> dict[str, float]:
    """Summary statistics of ``numbers``, or of the numbers in a file (separated by spaces, commas or lines)."""
    if ("numbers" in args) == ("path" in args):
        raise ToolFailed("data_analyzer: give exactly one of numbers or path")
    numbers = args.get("numbers")
    if numbers is None:
        if not ctx.world.path(args["path"]).is_file():
            raise ToolFailed(f"data_analyzer: no file {args['path']!r}")
        text = ctx.world.read_bytes(args["path"]).decode(errors="replace")
        words = [word for word in re.split(r"[\s,;]+", text) if word]
        try:
            numbers = [float(word) for word in words]
        except ValueError as error:
            raise ToolFailed(f"data_analyzer: {args['path']!r} holds a non-number: {error}") from None
    try:
        finite = [float(value) for value in numbers if math.isfinite(float(value))]
        if not finite:
            raise ToolFailed("data_analyzer: no finite numbers to analyse")
        return {"count": len(finite), "sum": math.fsum(finite), "mean": statistics.fmean(finite),
                "median": statistics.median(finite), "min": min(finite), "max": max(finite),
                "stdev": statistics.pstdev(finite)}
    except (OverflowError, ValueError) as error:
        raise ToolFailed(f"data_analyzer: the numbers are out of range: {error}") from None


DEFAULT_RUNS: State = {"runs": []}


def _runs(state: State, args: Args) -> list[dict[str, Any]]:
    return state.setdefault("runs", [])


@fake_tool("code_runner", family="file", schema=obj({"code": TEXT1}, {"language": enum("sh")}))
def code_runner(ctx: ToolContext, args: Args) -> str:
    """Run each non-blank, non-comment line through the confined shell; stop at the first refusal."""
    lines = [line.strip() for line in args["code"].splitlines() if line.strip() and not line.strip().startswith("#")]
    if not lines:
        raise ToolFailed("code_runner: the code has no command to run")

    def record(output: str, failure: dict[str, str]) -> None:
        change(ctx, "code_runs", DEFAULT_RUNS,
               lambda state: stamp(_runs(state, args), ctx, {"code": args["code"], "output": output, **failure}),
               effect="code_run_logged")

    return run_logged(ctx, lines, record)


probe_ref(code_runner, "code_runs", DEFAULT_RUNS, _runs)
