"""The classification catalogue: tool id -> idempotency class, as project data.

Users edit it as TOML (``fake_tools/catalogue.toml`` is the reference agent's);
workloads receive the protocol's JSON form. ``catalogue_problems`` is the one
check of both forms: ``load_catalogue`` (so ``run`` and ``certify``) and
``catalogue check`` report every problem it finds at once, each naming its line
(TOML) or field (JSON) and the fix.

Line numbers come from one pass over the text (``_KeyLines``), not a search of
the whole text per tool, so a check takes time in proportion to the file.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from killpoint import _toml, protocol
from killpoint._input_files import DOCUMENT_LIMIT_BYTES, read_input
from killpoint._json import strict_json
from killpoint.errors import ConfigError

REFERENCE_CATALOGUE = Path(__file__).with_name("fake_tools") / "catalogue.toml"
_TOP_LEVEL_KEYS = ("default", "interactive", "tools")
_TOOL_KEYS = ("class", "family", "why")
_JSON_SHAPE = '{"default": ..., "interactive": [...], "tools": {TOOL: CLASS}}'
CATALOGUE_FIX = "give a catalogue file: TOML (as fake_tools/catalogue.toml) or the protocol's JSON"

_KEY = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\\n]|\\.)*"|'[^'\n]*')"""  # bare, basic-string or literal-string key
_DOTTED_KEY = rf"{_KEY}(?:[ \t]*\.[ \t]*{_KEY})*"
_KEY_LINE = re.compile(rf"[ \t]*({_DOTTED_KEY})[ \t]*=")
_HEADER = re.compile(rf"[ \t]*\[\[?[ \t]*({_DOTTED_KEY})[ \t]*\]")
_STRING_OR_COMMENT = re.compile(r'"""|\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#')
_KEY_PART = re.compile(_KEY)
_TOML_POSITION = re.compile(r" \(at [^()]*\)$")


@dataclass(frozen=True)
class Catalogue:
    """Classes by tool id; a tool it does not list has class ``default``."""

    tools: dict[str, str]
    default: str = protocol.UNKNOWN
    interactive: frozenset[str] = frozenset()
    families: dict[str, str] = field(default_factory=dict, compare=False)
    reasons: dict[str, str] = field(default_factory=dict, compare=False)

    def class_of(self, tool: str) -> str:
        return self.tools.get(tool, self.default)

    def is_interactive(self, tool: str) -> bool:
        return tool in self.interactive

    def to_protocol(self) -> dict[str, Any]:
        """The JSON form handed to workloads (protocol v1, "Catalogue")."""
        return {"default": self.default, "interactive": sorted(self.interactive), "tools": dict(self.tools)}

    def with_class(self, tool: str, tool_class: str) -> Catalogue:
        return Catalogue({**self.tools, tool: tool_class}, self.default, self.interactive,
                         self.families, self.reasons)


def load_catalogue(path: str | Path) -> Catalogue:
    """Read a catalogue from TOML (the editable form) or JSON (the protocol form), or raise every problem."""
    path = Path(path)
    data, problems = _checked(path, read_text(path, "the catalogue", CATALOGUE_FIX))
    if problems:
        raise ConfigError(f"{path}: the catalogue has {len(problems)} problem(s); fix them and run again",
                          tuple(problems))
    tools = data.get("tools", {})
    return Catalogue(
        tools={name: entry["class"] for name, entry in tools.items()},
        default=data.get("default", protocol.UNKNOWN),
        interactive=frozenset(data.get("interactive", ())),
        families={name: entry.get("family", "") for name, entry in tools.items()},
        reasons={name: entry.get("why", "") for name, entry in tools.items()},
    )


def read_text(path: Path, what: str, fix: str) -> str:
    """The file as UTF-8 text, or a ConfigError saying why it cannot be read (``_input_files.read_input``)."""
    data = read_input(path, what, limit=DOCUMENT_LIMIT_BYTES, fix=fix)
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: {what} is not UTF-8 text") from None


def catalogue_problems(path: Path, text: str) -> list[str]:
    """Every problem of a catalogue (JSON by its ``.json`` suffix, else TOML), sorted by line."""
    return _checked(path, text)[1]


def _checked(path: Path, text: str) -> tuple[dict[str, Any], list[str]]:
    """The catalogue's data, its tools as tables of ``class``, ``family``, ``why``; and its problems."""
    data, problems = _from_json(path, text) if path.suffix == ".json" else _from_toml(path, text)
    return data, sorted(problems, key=lambda problem: _line_number(path, problem))


def _line_number(path: Path, problem: str) -> int:
    """The line a problem names (``FILE:LINE: ...``); 0 for one that names none."""
    number = problem.removeprefix(f"{path}:").split(":", 1)[0]
    return int(number) if number.isdigit() else 0


# -- the JSON form -------------------------------------------------------------


def _from_json(path: Path, text: str) -> tuple[dict[str, Any], list[str]]:

    try:
        data = strict_json(text.encode())
    except ValueError as error:
        return {}, [f"{path}: not valid JSON: {error}"]
    if not isinstance(data, dict):
        return {}, [f"{path}: a JSON catalogue is {_JSON_SHAPE}"]
    if "tools" not in data:
        return {}, [f"{path}: tools: missing; a JSON catalogue is {_JSON_SHAPE}"]
    if isinstance(data["tools"], dict):  # TOOL: CLASS, checked as the TOML form's TOOL = { class = CLASS }
        data = {**data, "tools": {name: {"class": tool_class} for name, tool_class in data["tools"].items()}}
    places = _Places(path, key_line=lambda key: 0, tool_line=None)
    return data, _structure_problems(data, places, tools_shape='an object of TOOL: CLASS, like {"read_file": "READ_ONLY"}')


# -- the TOML form -------------------------------------------------------------


def _from_toml(path: Path, text: str) -> tuple[dict[str, Any], list[str]]:
    """Parse and check; a key given twice (which TOML cannot parse) is reported, left out, and checked alone."""
    lines = _KeyLines.of(text)
    try:
        data = _toml.loads(text)
    except tomllib.TOMLDecodeError as error:
        if not lines.repeats:
            return {}, [f"{path}: not valid TOML: {error}"]
    else:
        return data, _structure_problems(data, _Places(path, lines.key, lines.tool))
    problems: list[str] = []
    for repeat in lines.repeats:
        named = f"tool {repeat.key!r}" if repeat.header else f"key {repeat.key!r}"
        problems.append(f"{path}:{repeat.number}: {named} listed twice (first at line {repeat.first}); keep one")
        problems += _alone_problems(path, repeat)
    text_lines = text.split("\n")
    for repeat in lines.repeats:
        text_lines[repeat.number - 1] = ""
    try:
        data = _toml.loads("\n".join(text_lines))
    except tomllib.TOMLDecodeError as error:
        return {}, [f"{path}: not valid TOML: {error}", *problems]
    return data, problems + _structure_problems(data, _Places(path, lines.key, lines.tool))


def _alone_problems(path: Path, repeat: _Repeat) -> list[str]:
    """The problems of a repeated line on its own, every one at that line."""
    try:
        data = _toml.loads(f"{repeat.header}\n{repeat.line}")
    except tomllib.TOMLDecodeError as error:
        return [f"{path}:{repeat.number}: not valid TOML: {_TOML_POSITION.sub('', str(error))}"]
    at_repeat: Callable[[str], int] = lambda name: repeat.number
    return _structure_problems(data, _Places(path, at_repeat, at_repeat))


@dataclass(frozen=True)
class _Repeat:
    """A line that sets a key already set in its table: top-level (header "") or ``[tools]``."""

    number: int
    first: int
    header: str
    key: str
    line: str


@dataclass(frozen=True)
class _KeyLines:
    """The first line of each top-level key and of each tool, and the lines that repeat one."""

    keys: dict[str, int]
    tools: dict[str, int]
    repeats: tuple[_Repeat, ...]

    def key(self, key: str) -> int:
        return self.keys.get(key, 0)

    def tool(self, name: str) -> int:
        return self.tools.get(name, 0)

    @classmethod
    def of(cls, text: str) -> _KeyLines:
        """One pass over the lines (split at "\\n" alone, as TOML counts them), skipping multi-line strings."""
        keys: dict[str, int] = {}
        tools: dict[str, int] = {}
        repeats: list[_Repeat] = []
        section: tuple[str, ...] = ()
        closing = ""  # the delimiter that ends the multi-line string the line is in
        for number, line in enumerate(text.split("\n"), start=1):
            if closing:
                end = line.find(closing)
                if end >= 0:
                    closing = _opened_string(line, end + 3)
                continue
            header, key_line = _HEADER.match(line), _KEY_LINE.match(line)
            matched = header or key_line
            if matched:
                parts = tuple(_unquoted(part) for part in _KEY_PART.findall(matched.group(1)))
                full = parts if header else section + parts
                section = parts if header else section
                if key_line and len(parts) == 1 and full in ((parts[0],), ("tools", parts[0])):
                    table = keys if len(full) == 1 else tools
                    if parts[0] in table:
                        repeats.append(_Repeat(number, table[parts[0]], "[tools]" if len(full) == 2 else "",
                                               parts[0], line.removesuffix("\r")))
                keys.setdefault(full[0], number)
                if full[0] == "tools" and len(full) > 1:
                    tools.setdefault(full[1], number)
            closing = _opened_string(line)
        return cls(keys, tools, tuple(repeats))


def _opened_string(line: str, start: int = 0) -> str:
    """The delimiter of a multi-line string the line opens (from ``start``) and does not close, else ""."""
    position = start
    while token := _STRING_OR_COMMENT.search(line, position):
        if token.group() == "#":
            return ""
        if token.group() in ('"""', "'''"):
            end = line.find(token.group(), token.end())
            if end < 0:
                return token.group()
            position = end + 3
        else:
            position = token.end()
    return ""


def _unquoted(key: str) -> str:
    if key.startswith('"'):
        try:
            return json.loads(key)  # TOML's basic-string escapes are JSON's (but \U and \e)
        except ValueError:
            return key[1:-1]
    return key[1:-1] if key.startswith("'") else key


# -- the checks of both forms --------------------------------------------------


@dataclass(frozen=True)
class _Places:
    """How a problem names its place: ``file:line`` (TOML) or ``file`` and field (JSON, which has no lines)."""

    path: Path
    key_line: Callable[[str], int]
    tool_line: Callable[[str], int] | None  # None: the JSON form, whose tools are named tools.NAME

    def key(self, key: str) -> str:
        line = self.key_line(key)
        return f"{self.path}:{line}:" if line else f"{self.path}:"

    def tool(self, name: str) -> str:
        if self.tool_line is None:
            return f"{self.path}: tools.{name}:"
        line = self.tool_line(name)
        return f"{self.path}:{line}: tool {name!r}:" if line else f"{self.path}: tool {name!r}:"


def _structure_problems(data: dict[str, Any], places: _Places,
                        tools_shape: str = "a table of TOOL = { class = ... }") -> list[str]:
    classes = ", ".join(protocol.CLASSES)
    problems = [f"{places.key(key)} unknown key {key!r}; a catalogue has {', '.join(_TOP_LEVEL_KEYS)}"
                for key in sorted(set(data) - set(_TOP_LEVEL_KEYS))]
    default = data.get("default", protocol.UNKNOWN)
    if not _is_class(default):
        problems.append(f"{places.key('default')} default: unknown class {default!r}; use one of {classes}")
    interactive = data.get("interactive", [])
    if not isinstance(interactive, list) or not all(isinstance(name, str) for name in interactive):
        problems.append(f'{places.key("interactive")} interactive: must be a list of tool ids, like ["ask_user"]; '
                        f"got {_shown(interactive)}")
    tools = data.get("tools", {})
    if not isinstance(tools, dict):
        return problems + [f"{places.key('tools')} tools: must be {tools_shape}"]
    for name, entry in tools.items():
        where = places.tool(name)
        if (wrong := tool_name_problem(name)) is not None:
            problems.append(f"{where} {wrong}")
        if not isinstance(entry, dict):
            problems.append(f'{where} write it as {name} = {{ class = "READ_ONLY" }}')
            continue
        if not _is_class(entry.get("class")):
            problems.append(f"{where} unknown class {entry.get('class')!r}; use one of {classes}")
        problems += [f'{where} {key} must be a string, like {key} = "{example}"; got {_shown(entry[key])}'
                     for key, example in (("family", "file"), ("why", "reads a file"))
                     if key in entry and not isinstance(entry[key], str)]
        problems += [f"{where} unknown key {key!r}; a tool has {', '.join(_TOOL_KEYS)}"
                     for key in sorted(set(entry) - set(_TOOL_KEYS))]
    return problems


MAX_TOOL_NAME = 128  # MCP's bound; a certificate is a file named after its tool


def tool_name_problem(name: Any) -> str | None:
    """What is wrong with ``name`` as a tool's name, or None: a name is printed in every report and may name a
    file, so it is 1 to MAX_TOOL_NAME printable characters of real Unicode text."""
    if not isinstance(name, str) or not name.strip():
        return "a tool name must be a non-empty string"
    if len(name) > MAX_TOOL_NAME:
        return f"the tool name is {len(name)} characters long; a tool name has at most {MAX_TOOL_NAME}"
    try:
        name.encode()
    except UnicodeEncodeError:
        return f"the tool name {name[:60]!r} is not Unicode text (it holds a lone surrogate)"
    if not name.isprintable():
        return f"the tool name {name[:60]!r} holds a control or other unprintable character"
    return None


def _is_class(value: Any) -> bool:
    return isinstance(value, str) and value in protocol.CLASSES


def _shown(value: Any) -> str:
    """A value as the user would write it, cut short (TOML dates and times shown as text)."""
    return json.dumps(value, default=str)[:60]
