"""The classification catalogue: tool id -> idempotency class, as project data.

Users edit it as TOML (``fake_tools/catalogue.toml`` is the reference agent's);
workloads receive the protocol's JSON form. Loading checks everything and
reports every problem at once, each with its line number.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import protocol
from harness.errors import ConfigError

REFERENCE_CATALOGUE = Path(__file__).with_name("catalogue.toml")
_TOP_LEVEL_KEYS = {"default", "interactive", "tools"}
_TOOL_KEYS = {"class", "family", "why"}


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
    """Read a catalogue from TOML (the editable form) or JSON (the protocol form)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the catalogue ({error.strerror})") from None
    if path.suffix == ".json":
        return _from_json(path, text)
    return _from_toml(path, text)


def catalogue_problems(path: Path, text: str) -> list[str]:
    """Every problem of a TOML catalogue, each prefixed with ``file:line``."""
    problems = _duplicate_tools(path, text)
    if problems:
        return problems
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        return [f"{path}: not valid TOML: {error}"]
    return _structure_problems(path, text, data)


def _from_toml(path: Path, text: str) -> Catalogue:
    problems = catalogue_problems(path, text)
    if problems:
        raise ConfigError(f"{path}: the catalogue has {len(problems)} problem(s); fix them and run again", tuple(problems))
    data = tomllib.loads(text)
    tools = data.get("tools", {})
    return Catalogue(
        tools={name: entry["class"] for name, entry in tools.items()},
        default=data.get("default", protocol.UNKNOWN),
        interactive=frozenset(data.get("interactive", ())),
        families={name: entry.get("family", "") for name, entry in tools.items()},
        reasons={name: entry.get("why", "") for name, entry in tools.items()},
    )


def _from_json(path: Path, text: str) -> Catalogue:
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ConfigError(f"{path}: not valid JSON: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tools"), dict):
        raise ConfigError(f'{path}: a JSON catalogue is {{"default": ..., "interactive": [...], "tools": {{TOOL: CLASS}}}}')
    problems = [
        f"{path}: tools.{name}: unknown class {tool_class!r}; use one of {', '.join(protocol.CLASSES)}"
        for name, tool_class in data["tools"].items()
        if tool_class not in protocol.CLASSES
    ]
    if data.get("default", protocol.UNKNOWN) not in protocol.CLASSES:
        problems.append(f"{path}: default: unknown class {data['default']!r}; use one of {', '.join(protocol.CLASSES)}")
    if problems:
        raise ConfigError(f"{path}: the catalogue has {len(problems)} problem(s)", tuple(problems))
    return Catalogue(dict(data["tools"]), data.get("default", protocol.UNKNOWN), frozenset(data.get("interactive", ())))


def _line_of(text: str, key: str) -> int:
    pattern = re.compile(rf'^[ \t]*"?{re.escape(key)}"?[ \t]*=', re.MULTILINE)  # not \s: it spans blank lines
    match = pattern.search(text)
    return text.count("\n", 0, match.start()) + 1 if match else 0


def _duplicate_tools(path: Path, text: str) -> list[str]:
    seen: dict[str, int] = {}
    problems = []
    section = ""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped
            continue
        match = re.match(r'^"?([A-Za-z0-9_.\-]+)"?\s*=', stripped)
        if section == "[tools]" and match:
            name = match.group(1)
            if name in seen:
                problems.append(f"{path}:{number}: tool {name!r} listed twice (first at line {seen[name]}); keep one")
            seen.setdefault(name, number)
    return problems


def _structure_problems(path: Path, text: str, data: dict[str, Any]) -> list[str]:
    problems = []
    classes = ", ".join(protocol.CLASSES)
    for key in sorted(set(data) - _TOP_LEVEL_KEYS):
        problems.append(f"{path}:{_line_of(text, key)}: unknown key {key!r}; a catalogue has {', '.join(sorted(_TOP_LEVEL_KEYS))}")
    if data.get("default", protocol.UNKNOWN) not in protocol.CLASSES:
        problems.append(f"{path}:{_line_of(text, 'default')}: default: unknown class {data['default']!r}; use one of {classes}")
    interactive = data.get("interactive", [])
    if not isinstance(interactive, list) or not all(isinstance(name, str) for name in interactive):
        problems.append(f"{path}:{_line_of(text, 'interactive')}: interactive must be a list of tool ids")
    tools = data.get("tools", {})
    if not isinstance(tools, dict):
        return problems + [f"{path}:{_line_of(text, 'tools')}: tools must be a table of TOOL = {{ class = ... }}"]
    for name, entry in tools.items():
        where = f"{path}:{_line_of(text, name)}: tool {name!r}"
        if not isinstance(entry, dict):
            problems.append(f'{where}: write it as {name} = {{ class = "READ_ONLY" }}')
            continue
        if entry.get("class") not in protocol.CLASSES:
            problems.append(f"{where}: unknown class {entry.get('class')!r}; use one of {classes}")
        problems += [f"{where}: unknown key {key!r}; a tool has {', '.join(sorted(_TOOL_KEYS))}"
                     for key in sorted(set(entry) - _TOOL_KEYS)]
    return problems
