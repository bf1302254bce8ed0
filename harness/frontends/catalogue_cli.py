"""``killpoint catalogue``: print, check and generate classification catalogues.

- ``killpoint catalogue [--class CLASS] [--family FAMILY] [--file FILE]`` prints
  a catalogue as a table (default: the reference ``fake_tools/catalogue.toml``).
- ``killpoint catalogue check FILE`` reports every problem of a user's catalogue
  at once, each with its line, and exits 2; a good one prints ``ok: N tools``.
- ``killpoint catalogue from-mcp TOOLS.json`` turns an MCP ``tools/list`` result
  into a catalogue, one class per tool from its annotations.

The gotcha of ``from-mcp``: MCP annotations are hints a server gives about
itself, not guarantees. The generated file says so, and each tool's ``why``
names the hint that decided its class, so a reviewer (or ``killpoint certify``,
which runs the tools) knows what to check.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any, TextIO

from killpoint import protocol
from killpoint._json import strict_json
from killpoint.catalogue import REFERENCE_CATALOGUE, Catalogue, load_catalogue, read_text, tool_name_problem
from killpoint.errors import ConfigError
from killpoint.fake_tools.base import REGISTRY
from killpoint.harness.config import limits
from killpoint.harness.frontends._command import killpoint_command

# The MCP ToolAnnotations hints that bear on a class; each must be a JSON boolean.
HINTS = ("readOnlyHint", "idempotentHint", "destructiveHint", "openWorldHint")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ENVELOPES = ('{"tools": [...]}', '{"result": {"tools": [...]}}', "[...]")
MCP_LIST_FIX = f"give the server's tools/list result saved as JSON: {', '.join(_ENVELOPES)}"


def add_catalogue_parser(commands: argparse._SubParsersAction) -> None:
    """Register ``catalogue`` and its ``check`` and ``from-mcp`` subcommands."""
    catalogue = commands.add_parser("catalogue", help="print a classification catalogue (no action), check one "
                                    "(check), make one from an MCP server's tools (from-mcp), or print the fake "
                                    "tools' arguments (args)",
                                    description="Without an action: print the catalogue as a table.")
    catalogue.add_argument("--class", dest="tool_class", type=str.upper, choices=protocol.CLASSES,
                           help="only tools of this class")
    catalogue.add_argument("--family", type=limits.text, help="only tools of this family (file, browser, github, ...)")
    catalogue.add_argument("--file", dest="catalogue_file", type=limits.path, metavar="FILE",
                           help="the catalogue to print (TOML or protocol JSON; default: the reference one)")
    actions = catalogue.add_subparsers(dest="catalogue_action", metavar="ACTION")
    check = actions.add_parser("check", help="report every problem of a catalogue, each with its line")
    check.add_argument("check_file", type=limits.path, metavar="FILE")
    from_mcp = actions.add_parser("from-mcp", help="a catalogue from an MCP tools/list result (annotations -> classes)")
    from_mcp.add_argument("mcp_file", type=limits.path, metavar="TOOLS.json",
                          help=f"the tools/list result: {', '.join(_ENVELOPES)}")
    from_mcp.add_argument("--out", type=limits.path, metavar="FILE", help="write the TOML here instead of printing it")
    from_mcp.add_argument("--family", type=limits.text, dest="mcp_family", default="mcp", metavar="NAME",
                          help="the family given to every tool (default mcp; the server's name reads well)")
    arguments = actions.add_parser("args", help="the arguments each fake tool takes (its JSON Schema, one line a tool)")
    arguments.add_argument("tools", nargs="*", type=limits.text, metavar="TOOL",
                           help="only these tools (default: all 96)")


def command_catalogue(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``killpoint catalogue ...``; bad input raises ConfigError (the CLI exits 2)."""
    if args.catalogue_action == "check":
        return check_command(args.check_file, out)
    if args.catalogue_action == "from-mcp":
        return from_mcp_command(args.mcp_file, args.out, args.mcp_family, out)
    if args.catalogue_action == "args":
        return write_arguments(args.tools, out)
    path = args.catalogue_file or REFERENCE_CATALOGUE
    source = str(path) if args.catalogue_file else "the reference catalogue (fake_tools/catalogue.toml)"
    write_table(load_catalogue(path), out, tool_class=args.tool_class, family=args.family, source=source)
    return 0


# -- printing ------------------------------------------------------------------


def write_table(catalogue: Catalogue, out: TextIO, *, tool_class: str | None = None, family: str | None = None,
                source: Path | str = "") -> None:
    """The catalogue as aligned columns tool, class, family, why, in file order, then a summary line."""
    families = sorted({name for name in catalogue.families.values() if name})
    if family is not None and family not in families:
        raise ConfigError(f"--family {family!r}: no tool of {source} has that family; "
                          f"its families are {', '.join(families) or 'none (a JSON catalogue has none)'}")
    rows = [(tool, klass, catalogue.families.get(tool, ""), catalogue.reasons.get(tool, ""))
            for tool, klass in catalogue.tools.items()
            if tool_class in (None, klass) and family in (None, catalogue.families.get(tool))]
    header = ("tool", "class", "family", "why")
    widths = [max(len(row[column]) for row in (header, *rows)) for column in range(3)]
    out.writelines("  ".join([*(cell.ljust(width) for cell, width in zip(row, widths)), row[3]]).rstrip() + "\n" for row in (header, *rows))
    shown = [f"class {tool_class}"] * (tool_class is not None) + [f"family {family}"] * (family is not None)
    interactive = ", ".join(sorted(catalogue.interactive)) or "none"
    out.write(f"{len(rows)} of {len(catalogue.tools)} tools{' (' + ', '.join(shown) + ')' if shown else ''} in "
              f"{source}; a tool not listed is {catalogue.default}; asked again when interrupted: {interactive}\n")


# -- checking ------------------------------------------------------------------


def check_command(path: Path, out: TextIO) -> int:
    """``catalogue check FILE``: ok and 0, or a ConfigError listing every problem (the check ``run`` makes too)."""
    catalogue = load_catalogue(path)
    out.write(f"ok: {len(catalogue.tools)} tools in {path}; a tool not listed is {catalogue.default}\n")
    return 0


# -- from MCP annotations ------------------------------------------------------


def from_mcp_command(path: Path, out_path: Path | None, family: str, out: TextIO) -> int:
    classified = classify_mcp_tools(path, read_text(path, "the MCP tool list", MCP_LIST_FIX))
    text = catalogue_toml(classified, family=family, source=path)
    if out_path is None:
        out.write(text)
        return 0
    try:
        out_path.write_text(text)
    except OSError as error:
        raise ConfigError(f"--out {out_path}: cannot write the catalogue ({error.strerror})") from None
    out.write(f"wrote {len(classified)} tools to {out_path}; review their classes, then "
              f"run `{killpoint_command()} catalogue check {out_path}`\n")
    return 0


def mcp_tool_list(path: Path, text: str) -> list[Any]:
    """The list of tools in a tools/list result, its JSON-RPC envelope, or a bare list."""
    try:
        data = strict_json(text.encode())
    except ValueError as error:
        raise ConfigError(f"{path}: not valid JSON: {error}") from None
    if isinstance(data, dict) and isinstance(data.get("result"), dict):
        data = data["result"]
    if isinstance(data, dict) and "tools" in data:
        data = data["tools"]
    if not isinstance(data, list):
        raise ConfigError(f"{path}: no tool list found; give a tools/list result: {', '.join(_ENVELOPES)}")
    if not data:
        raise ConfigError(f"{path}: the tool list is empty; there is nothing to classify")
    return data


def classify(annotations: dict[str, Any] | None) -> tuple[str, str]:
    """(class, why) from a tool's MCP annotations (None: it has none), hints already checked to be booleans.

    A missing hint takes MCP's default (readOnlyHint false, idempotentHint false,
    destructiveHint true); annotations without any behaviour hint (a title only)
    say nothing about behaviour, so they count as none.
    """
    given = annotations or {}
    hints = {hint: given[hint] for hint in HINTS if hint in given}
    if not hints:
        return protocol.UNKNOWN, ("no annotations" if annotations is None else "annotations without a behaviour hint")
    if hints.get("readOnlyHint") is True:
        return protocol.READ_ONLY, "readOnlyHint: true"
    if hints.get("idempotentHint") is True:
        return protocol.IDEMPOTENT_WRITE, "idempotentHint: true, readOnlyHint not true"
    destructive = {True: "destructiveHint: true", False: "destructiveHint: false",
                   None: "destructiveHint absent (MCP default: true)"}[hints.get("destructiveHint")]
    return protocol.NON_IDEMPOTENT, f"readOnlyHint and idempotentHint not true; {destructive}"


def classify_mcp_tools(path: Path, text: str) -> dict[str, tuple[str, str]]:
    """(class, why) per tool name of an MCP tool list; every bad entry is reported at once."""
    problems: list[str] = []
    classified: dict[str, tuple[str, str]] = {}
    seen: set[str] = set()
    for index, tool in enumerate(mcp_tool_list(path, text)):
        where = f"{path}: tools[{index}]"
        if not isinstance(tool, dict):
            problems.append(f'{where}: must be an object with a "name", got {json.dumps(tool)[:60]}')
            continue
        name, annotations = tool.get("name"), tool.get("annotations")
        if not isinstance(name, str) or not name.strip():
            problems.append(f'{where}: no "name" (a non-empty, printable string); every MCP tool has one')
            continue
        if (wrong := tool_name_problem(name)) is not None:
            problems.append(f'{where}: "name": {wrong}')
            continue
        where += f" ({name})"
        if name in seen:
            problems.append(f"{where}: tool {name!r} is listed twice; a server lists each tool once")
        seen.add(name)
        if annotations is not None and not isinstance(annotations, dict):
            problems.append(f'{where}: "annotations" must be an object, got {json.dumps(annotations)[:60]}')
            continue
        given = annotations or {}
        bad = [f"{where}: annotations.{hint} must be true or false, got {json.dumps(given[hint])[:60]}"
               for hint in HINTS if hint in given and not isinstance(given[hint], bool)]
        problems += bad
        if not bad:
            classified.setdefault(name, classify(annotations))
    if problems:
        raise ConfigError(f"{path}: the MCP tool list has {len(problems)} problem(s); no catalogue written",
                          tuple(problems))
    return classified


def catalogue_toml(classified: dict[str, tuple[str, str]], *, family: str = "mcp", source: Path) -> str:
    """The TOML catalogue, in the format of fake_tools/catalogue.toml, of classified MCP tools."""
    keys = {name: name if _BARE_KEY.fullmatch(name) else _toml_string(name) for name in classified}
    width = max(len(key) for key in keys.values())
    lines = [
        f"# Generated by `killpoint catalogue from-mcp {source.name}` from the server's tool annotations.",
        "# MCP annotations are hints, not guarantees: a server may mislabel a tool. Review every",
        "# class, certify it by running the tools (`killpoint certify`), and check this file with",
        "# `killpoint catalogue check FILE`. Classes: READ_ONLY, IDEMPOTENT_WRITE, NON_IDEMPOTENT, UNKNOWN.",
        "",
        f'default = "{protocol.UNKNOWN}"',
        "interactive = []",
        "",
        "[tools]",
    ]
    lines += [f"{keys[name].ljust(width)} = {{ class = {_toml_string(tool_class)}, family = {_toml_string(family)}, "
              f"why = {_toml_string(why)} }}" for name, (tool_class, why) in classified.items()]
    return "\n".join(lines) + "\n"


def _toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, except that TOML also escapes DEL."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


# -- the fake tools' arguments -------------------------------------------------


def write_arguments(tools: list[str], out: TextIO) -> int:
    """One line a fake tool: each argument with its type and limits, ``?`` after an optional one."""
    unknown = [name for name in tools if name not in REGISTRY]
    if unknown:
        raise ConfigError(f"catalogue args: {', '.join(map(repr, unknown))} is no fake tool; "
                          "`killpoint catalogue args` lists them all")
    names = tools or list(REGISTRY)
    width = max(map(len, names))
    for name in names:
        schema = REGISTRY[name].schema
        required = set(schema.get("required", ()))
        fields = [f"{key}{'' if key in required else '?'}: {describe_schema(value)}"
                  for key, value in schema.get("properties", {}).items()]
        out.write(f"{name:<{width}}  {', '.join(fields) or '(no arguments)'}\n")
    return 0


def describe_schema(schema: dict[str, Any]) -> str:
    """``string (1..200 chars)``, ``integer (0..59)``, ``one of 'on' | 'off'``, ``array of string``: for a reader."""
    if "enum" in schema:
        return "one of " + " | ".join(json.dumps(value) for value in schema["enum"])
    kind = str(schema.get("type", "any"))
    if kind == "array":
        return f"array of {describe_schema(schema.get('items', {}))}"
    low, high = (schema.get("minLength"), schema.get("maxLength")) if kind == "string" else (
        schema.get("minimum"), schema.get("maximum"))
    if low is None and high is None:
        return kind
    unit = " chars" if kind == "string" else ""
    return f"{kind} ({'' if low is None else low}..{'' if high is None else high}{unit})"
