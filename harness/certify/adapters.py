"""What certification runs: a fake tool, a Python callable, or a command, behind one ``Target`` shape.

A target makes a fresh world, calls the tool uninterrupted (counting its kill
points), calls it in a child that is SIGKILLed part-way, snapshots the world
canonically, draws arguments, and names its version. Its ``spec`` is plain
JSON, so a child process (``python -m killpoint.harness.certify._child``) and
``killpoint certify --check`` rebuild the same target from a certificate.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from killpoint import protocol
from killpoint._json import strict_json
from killpoint.errors import ConfigError, InternalError
from killpoint.fake_tools.schema import TYPES
from killpoint.fake_tools.world import World, seed_world
from killpoint.harness.certify._fork_server import child_stderr, start_python
from killpoint.harness.certify.identity import command_identity, source_digest
from killpoint.harness.certify.points import (RETURN_LABEL, ChildRun, Instrumented, OnPoint, count_only, drive,
                                              start_command)

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

CALL_TIMEOUT_S = 30.0
ENV_TOOL = "KILLPOINT_TOOL"  # a command tool's own name, set beside KILLPOINT_WORLD (docs/certify.md)
CALL_ID = "c1"  # the replay is the same call again, so it carries the same id
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
Run = Callable[[Path, dict[str, Any], Path], tuple[bool, str | None]]
Arguments = Callable[[], "SearchStrategy[dict[str, Any]]"]
SUPPORTED_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "enum",
    "minimum", "maximum", "minLength", "maxLength", "items", "minItems", "maxItems", "anyOf", "oneOf",
})
# Keywords that only describe: harmless to ignore when drawing.
DESCRIPTIVE_KEYWORDS = frozenset({"title", "description", "default", "examples", "$schema", "$id", "$comment"})


class TrialError(InternalError):
    """A trial could not be carried out (a snapshot failed, a child hung): the verdict is INCONCLUSIVE."""


@dataclass(frozen=True)
class CallResult:
    ok: bool
    error: str | None
    labels: tuple[str, ...]  # the kill points the call passed, in order
    seconds: float


def directory_snapshot(world: Path) -> dict[str, str]:
    """Every file and folder under ``world``, path -> text (or a digest for binary)."""
    return World(world).snapshot()


@dataclass(frozen=True)
class PythonTarget:
    """A tool run in this interpreter (uninterrupted) or in a child interpreter (to be killed)."""

    name: str
    spec: dict[str, Any]
    run: Run
    arguments: Arguments  # a function, so a child never imports hypothesis
    seed: Callable[[Path], Path]
    snapshot: Callable[[Path], dict[str, str]]
    identity: dict[str, str]
    notes: tuple[str, ...] = ()

    timed_kills = False  # its points are exact (Instrumented); a delay would only be less reproducible
    unseen = ""  # it is given its world to keep its state in, and the world is what is snapshotted

    def fresh_world(self, folder: Path) -> Path:
        return self.seed(folder)

    def release(self) -> None:
        """Nothing outlives a call of a Python tool."""

    def close(self) -> None:
        """Nothing is kept between trials (the fork server is ``run.certify``'s)."""

    def smaller(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        """Hypothesis's shrink is the smallest there is."""
        return []

    def call_with_points(self, world: Path, args: dict[str, Any], scratch: Path, on_point: OnPoint) -> CallResult:
        started = time.monotonic()
        with Instrumented(world, on_point) as instrumented:
            try:
                ok, error = self.run(world, args, scratch)
            except Exception as error_:  # a tool's own bug is a failed call; the world is still judged
                ok, error = False, f"{type(error_).__name__}: {error_}"
            instrumented.announce(RETURN_LABEL)
        return CallResult(ok, _scrubbed(error, world), tuple(instrumented.labels), time.monotonic() - started)

    def call(self, world: Path, args: dict[str, Any], scratch: Path) -> CallResult:
        return self.call_with_points(world, args, scratch, count_only)

    def kill(self, world: Path, args: dict[str, Any], scratch: Path, *, at_point: int | None = None,
             after_s: float | None = None) -> ChildRun:
        job = {"spec": self.spec, "world": str(world), "args": args, "scratch": str(scratch)}
        run = drive(start_python(job), kill_at=at_point, kill_after_s=after_s, timeout_s=CALL_TIMEOUT_S)
        unkilled = run.killed_at is None and run.killed_after_s is None
        if unkilled and run.returncode != 0:  # the child's harness side failed: no evidence about the tool
            raise TrialError(f"{self.name}: the child running it exited {run.returncode}: "
                             f"{child_stderr(scratch).strip()[-400:]}")
        return run


@dataclass(frozen=True)
class CommandTarget:
    """A command-line tool in any language, fed its arguments as JSON (in ``{args}`` or on stdin)."""

    name: str
    spec: dict[str, Any]
    argv: tuple[str, ...]
    arguments: Arguments  # a function, so a child never imports hypothesis
    template_world: Path | None
    snapshot_argv: tuple[str, ...] | None
    identity: dict[str, str]
    notes: tuple[str, ...] = ()

    timed_kills = False  # a delay only when the command declares no points (trials.search)
    unseen = ""  # its process ends with each call: what it keeps from one call to the next is in its world

    def fresh_world(self, folder: Path) -> Path:
        return copy_world(self.template_world, folder)

    def release(self) -> None:
        """Nothing outlives a call of a command (``drive`` kills what it leaves)."""

    def close(self) -> None:
        """Nothing is kept between trials."""

    def smaller(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        """Hypothesis's shrink is the smallest there is."""
        return []

    def _invocation(self, world: Path, args: dict[str, Any]) -> tuple[list[str], str, dict[str, str]]:
        text = json.dumps(args, sort_keys=True, ensure_ascii=False)
        argv = [_fill(token, args=text, world=str(world), tool=self.name) for token in self.argv]
        stdin = "" if any("{args}" in token for token in self.argv) else text
        return argv, stdin, {**os.environ, protocol.ENV_WORLD: str(world), ENV_TOOL: self.name}

    def call(self, world: Path, args: dict[str, Any], scratch: Path) -> CallResult:
        run = self.kill(world, args, scratch)
        if run.timed_out:
            raise TrialError(f"{self.name}: the command did not finish within {CALL_TIMEOUT_S:.0f}s")
        error = None if run.returncode == 0 else _scrubbed(f"exit {run.returncode}: {run.stderr.strip()[-300:]}", world)
        return CallResult(run.returncode == 0, error, run.labels, run.seconds)

    def kill(self, world: Path, args: dict[str, Any], scratch: Path, *, at_point: int | None = None,
             after_s: float | None = None) -> ChildRun:
        argv, stdin, env = self._invocation(world, args)
        try:
            child = start_command(argv, cwd=world, env=env, stdin=stdin, scratch=scratch)
        except OSError as error:
            raise TrialError(f"{self.name}: cannot start {argv[0]!r}: {error.strerror}") from None
        return drive(child, kill_at=at_point, kill_after_s=after_s, timeout_s=CALL_TIMEOUT_S)

    def snapshot(self, world: Path) -> dict[str, str]:
        if self.snapshot_argv is None:
            return directory_snapshot(world)
        argv = [_fill(token, args="{}", world=str(world), tool=self.name) for token in self.snapshot_argv]
        try:
            done = subprocess.run(argv, cwd=world, capture_output=True, text=True, timeout=CALL_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise TrialError(f"{self.name}: the snapshot command failed: {error}") from None
        if done.returncode != 0:
            raise TrialError(f"{self.name}: the snapshot command exited {done.returncode}: {done.stderr.strip()[-300:]}")
        return canonical_snapshot(done.stdout)


class Target(Protocol):
    """What the trials need of a tool (``PythonTarget``, ``CommandTarget``, ``mcp.McpTarget``)."""

    @property
    def name(self) -> str: ...
    @property
    def spec(self) -> dict[str, Any]: ...
    @property
    def identity(self) -> dict[str, str]: ...
    @property
    def timed_kills(self) -> bool: ...  # draw seeded delays as well as points (a tool with no exact points)
    @property
    def unseen(self) -> str: ...  # where it can keep an effect no snapshot shows ("the server's memory"); "" if none

    def arguments(self) -> SearchStrategy[dict[str, Any]]: ...
    def fresh_world(self, folder: Path) -> Path: ...
    def snapshot(self, world: Path) -> dict[str, str]: ...
    def call(self, world: Path, args: dict[str, Any], scratch: Path) -> CallResult: ...
    def kill(self, world: Path, args: dict[str, Any], scratch: Path, *, at_point: int | None = None,
             after_s: float | None = None) -> ChildRun: ...
    def release(self) -> None: ...  # end whatever a trial left running (an MCP server)
    def close(self) -> None: ...  # end whatever the target keeps between trials (a spare MCP server)
    def smaller(self, args: dict[str, Any]) -> list[dict[str, Any]]: ...  # simpler arguments to try a failure with


def _drawn_from(schema: dict[str, Any]) -> Arguments:
    def arguments() -> SearchStrategy[dict[str, Any]]:
        from killpoint.harness.certify.strategies import args_for

        return args_for(schema)

    return arguments


def _scrubbed(error: str | None, world: Path) -> str | None:
    """The error with the trial's temporary world path as ``<world>``, so equal seeds give equal evidence."""
    return None if error is None else error.replace(str(world), "<world>")


def copy_world(template: Path | None, folder: Path) -> Path:
    """A fresh world in ``folder/world``: a copy of ``template``, or empty."""
    world = folder / "world"
    if template is not None:
        shutil.copytree(template, world, symlinks=True)
    else:
        world.mkdir(parents=True)
    return world


def _fill(token: str, **values: str) -> str:
    for key, value in values.items():
        token = token.replace("{" + key + "}", value)
    return token


def canonical_snapshot(value: Any) -> dict[str, str]:
    """A snapshot as ``diff_snapshots`` reads it: a JSON object of strings is kept, anything else becomes one entry."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"snapshot": value}
        return canonical_snapshot(parsed) if isinstance(parsed, dict) else {"snapshot": value}
    if isinstance(value, dict) and all(isinstance(key, str) and isinstance(item, str) for key, item in value.items()):
        return dict(value)
    return {"snapshot": json.dumps(value, sort_keys=True, indent=1, default=str)}


def fake_target(tool: str) -> PythonTarget:
    """One of the 96 fake tools, on its family's seeded world; ConfigError if there is no such tool."""
    from killpoint.fake_tools.base import invoke, lookup
    from killpoint.fake_tools.ledger import Ledger

    fake = lookup(tool)
    if fake is None:
        raise ConfigError(f"unknown tool {tool!r}: it is none of the fake tools; to certify a tool outside the "
                          f"project give --python MODULE:FUNCTION or --command 'ARGV {{args}}'")

    def run(world: Path, args: dict[str, Any], scratch: Path) -> tuple[bool, str | None]:
        ledger = Ledger(scratch / "ledger.jsonl", incarnation=0)
        try:
            result = invoke(tool, CALL_ID, args, world=World(world), ledger=ledger)
        finally:
            ledger.close()
        return result.ok, result.error

    def seed(folder: Path) -> Path:
        from killpoint.harness.certify.fake_seeds import world_of  # the parent seeds; a child never needs hypothesis

        return seed_world(folder / "world", *world_of(fake.family)).root

    def drawn() -> SearchStrategy[dict[str, Any]]:
        from killpoint.harness.certify.fake_seeds import arguments

        return arguments(tool)

    return PythonTarget(
        name=tool, spec={"adapter": "fake", "tool": tool}, run=run, arguments=drawn, seed=seed,
        snapshot=directory_snapshot,
        identity={"kind": "fake tool source", "digest": source_digest(fake.act, fake.probe, extra=fake.schema)},
    )


def resolve_callable(text: str, flag: str, cwd: str) -> Callable[..., Any]:
    """``module:function`` -> the function, importing from ``cwd`` too (as ``python -m`` does from its directory)."""
    module_name, _, attribute = text.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"{flag} {text!r}: write MODULE:FUNCTION, e.g. {flag} mytools.files:write_note")
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        value: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            value = getattr(value, part)
    except ImportError as error:
        raise ConfigError(f"{flag} {text!r}: cannot import {module_name!r} ({error})") from None
    except AttributeError:
        raise ConfigError(f"{flag} {text!r}: module {module_name!r} has no {attribute!r}") from None
    if not callable(value):
        raise ConfigError(f"{flag} {text!r}: {attribute!r} is a {type(value).__name__}, not a function")
    return value


def unsupported_keywords(schema: Any, where: str = "schema") -> list[str]:
    """The JSON path of every keyword of ``schema`` outside the supported subset (``schema.properties.p.pattern``)."""
    return [path for path, wrong in _schema_walk(schema, where, 0) if wrong is None]


def schema_problems(schema: Any, where: str = "schema") -> list[str]:
    """Every problem of ``schema`` at once, each led by the JSON path of the bad keyword.

    A keyword outside the subset, an ill-typed one (``maxLength: "x"``), bounds
    that contradict, nesting past ``DEEPEST_SCHEMA``: each would otherwise surface
    as a traceback, or as draws every call refuses, once trials are under way.
    """
    return [f"{path}: {wrong}" if wrong else f"{path}: killpoint cannot draw values for this keyword (it keeps to "
                                               f"{', '.join(sorted(SUPPORTED_KEYWORDS))}); remove it"
            for path, wrong in _schema_walk(schema, where, 0)]


DEEPEST_SCHEMA = 32  # levels of properties/items: tool arguments are never nested this deep
LONGEST_MIN_LENGTH = 1000  # drawn strings are at least minLength long, and a person reads a counterexample
# The tools' own validator's table (killpoint.fake_tools.schema), so the two never disagree on a type, and the
# null that MCP servers' nullable arguments ({"anyOf": [{"type": "string"}, {"type": "null"}]}) are written with.
SCHEMA_TYPES: dict[str, tuple[type, ...]] = {**TYPES, "null": (type(None),)}


def _schema_walk(schema: Any, where: str, depth: int) -> Iterator[tuple[str, str | None]]:
    """(JSON path, what is wrong there) for every problem; ``None`` means a keyword outside the subset."""
    if not isinstance(schema, dict):
        yield where, f"must be a schema (a JSON object), got {_json_type(schema)}"
        return
    if depth > DEEPEST_SCHEMA:
        yield where, f"nested deeper than {DEEPEST_SCHEMA} levels; killpoint draws arguments no deeper than that"
        return
    for key in sorted(schema):
        if key not in SUPPORTED_KEYWORDS and key not in DESCRIPTIVE_KEYWORDS:
            yield _path(where, key), None
    yield from _keyword_problems(schema, where)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, spec in properties.items():
            yield from _schema_walk(spec, _path(_path(where, "properties"), name), depth + 1)
    if "items" in schema:
        yield from _schema_walk(schema["items"], _path(where, "items"), depth + 1)
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _schema_walk(schema["additionalProperties"], _path(where, "additionalProperties"), depth + 1)
    for keyword in ("anyOf", "oneOf"):
        branches = schema.get(keyword)
        if keyword in schema and (not isinstance(branches, list) or not branches):
            yield _path(where, keyword), f"must be a non-empty list of schemas, got {_json_type(branches)}"
        elif isinstance(branches, list):
            for index, branch in enumerate(branches):
                yield from _schema_walk(branch, f"{_path(where, keyword)}[{index}]", depth + 1)


def _keyword_problems(schema: dict[str, Any], where: str) -> Iterator[tuple[str, str]]:
    """The supported keywords of one schema level that are ill-typed or contradict each other."""
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) and kind else [kind]
    if "type" in schema and not all(isinstance(one, str) and one in SCHEMA_TYPES for one in kinds):
        yield _path(where, "type"), (f"must be one of {', '.join(SCHEMA_TYPES)} (or a list of them), "
                                     f"got {_json_type(kind)}")
        kind = None
    elif isinstance(kind, list):
        kind = None  # a list of types: the bounds are checked against none of them
    if "properties" in schema and not isinstance(schema["properties"], dict):
        yield _path(where, "properties"), f"must be an object NAME -> schema, got {_json_type(schema['properties'])}"
    if "required" in schema:
        required, described = schema["required"], schema.get("properties")
        if not isinstance(required, (list, tuple)) or not all(isinstance(name, str) for name in required):
            yield _path(where, "required"), f"must be a list of property names, got {_json_type(required)}"
        elif isinstance(described, dict) and (missing := [name for name in required if name not in described]):
            yield _path(where, "required"), (f"names {', '.join(map(repr, missing))}, which properties does not "
                                             f"describe, so killpoint cannot draw a value for it")
    extra = schema.get("additionalProperties", False)
    if not isinstance(extra, (bool, dict)):
        yield _path(where, "additionalProperties"), f"must be true, false or a schema, got {_json_type(extra)}"
    if "enum" in schema:
        enum = schema["enum"]
        if not isinstance(enum, (list, tuple)) or not enum:
            yield _path(where, "enum"), f"must be a non-empty list of the allowed values, got {_json_type(enum)}"
        elif kind is not None and (wrong := [value for value in enum if not _is_a(kind, value)]):
            yield _path(where, "enum"), f"lists {wrong[0]!r:.40}, which is not of type {kind}"
    yield from _bound_problems(schema, where, kind, ("minimum", "maximum"), "number", ("integer", "number"))
    yield from _bound_problems(schema, where, kind, ("minLength", "maxLength"), "length", ("string",))
    yield from _bound_problems(schema, where, kind, ("minItems", "maxItems"), "length", ("array",))


def _bound_problems(schema: dict[str, Any], where: str, kind: str | None, keywords: tuple[str, str], what: str,
                    types: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """``minimum``/``maximum`` (finite numbers; whole for integers) or ``minLength``/``maxLength`` (counts), low <= high."""
    bounds = {}
    for keyword in keywords:
        if keyword not in schema:
            continue
        value, path = schema[keyword], _path(where, keyword)
        if kind is not None and kind not in types:
            yield path, f"applies to {' and '.join(types)} values, and this schema's type is {kind}"
        elif what == "length" and not (_is_a("integer", value) and 0 <= value):
            yield path, f"must be a whole number >= 0, got {_json_type(value)}"
        elif what == "length" and keyword == "minLength" and value > LONGEST_MIN_LENGTH:
            yield path, f"{value} is more than killpoint draws (strings of at most {LONGEST_MIN_LENGTH} characters)"
        elif what == "number" and not (_is_a("number", value) and math.isfinite(value)):
            yield path, f"must be a finite number, got {_json_type(value)}"
        elif what == "number" and kind == "integer" and value != int(value):
            yield path, f"must be a whole number for an integer, got {value}"
        else:
            bounds[keyword] = value
    low, high = keywords
    if low in bounds and high in bounds and bounds[low] > bounds[high]:
        yield _path(where, low), f"{bounds[low]} is above {high} {bounds[high]}; no value lies between them"


def _is_a(kind: str, value: Any) -> bool:
    """``value`` is of JSON Schema type ``kind`` (a boolean is never a number)."""
    return isinstance(value, SCHEMA_TYPES[kind]) and not (isinstance(value, bool) and kind in ("integer", "number"))


def _json_type(value: Any) -> str:
    """A value as a message shows it: its JSON type and a short repr."""
    kind = {dict: "object", list: "list", tuple: "list", str: "string", bool: "boolean", type(None): "null",
            int: "integer", float: "number"}.get(type(value), type(value).__name__)
    return f"{kind} {json.dumps(value, default=str)[:40] if kind not in ('object', 'list') else ''}".rstrip()


def _path(where: str, key: str) -> str:
    """``where.key``, or ``where["a key"]`` when the key is not a plain name."""
    return f"{where}.{key}" if re.fullmatch(r"[A-Za-z_$][\w$-]*", key) else f"{where}[{json.dumps(key)}]"


def load_schemas(path: str | None) -> dict[str, Any] | None:
    """A ``--schema`` file: one schema (it has a ``type``) or a table TOOL -> schema."""
    if path is None:
        return None
    try:
        data = strict_json(Path(path).read_bytes())
    except OSError as error:
        raise ConfigError(f"--schema {path}: cannot read it ({error.strerror})") from None
    except ValueError as error:
        raise ConfigError(f"--schema {path}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--schema {path}: give a JSON Schema object, or an object TOOL -> schema")
    return data


def schema_for(tool: str, schemas: dict[str, Any] | None, fallback: Any, where: str) -> dict[str, Any]:
    """The argument schema of ``tool``, checked whole (``schema_problems``) before anything runs."""
    root = "schema"
    if schemas is not None:
        single = "type" in schemas
        schema, root = (schemas, root) if single else (schemas.get(tool), _path(root, tool))
        if schema is None:
            raise ConfigError(f"{where}: the schema file lists no tool {tool!r}")
    else:
        schema = fallback if fallback is not None else EMPTY_SCHEMA
    problems = schema_problems(schema, root)
    if problems:
        raise ConfigError(f"{where}: the schema of {tool!r} has {len(problems)} problem(s), each named by its JSON "
                          f"path; fix them and run again", tuple(problems))
    if schema.get("type") != "object":
        raise ConfigError(f"{where}: the schema of {tool!r} must describe an object of arguments (type: object)")
    return schema


@dataclass(frozen=True)
class ExternalSpec:
    """How to run tools outside the project, as given on the command line."""

    python: str | None = None
    python_snapshot: str | None = None
    command: str | None = None
    snapshot_command: str | None = None
    world: str | None = None
    schema: str | None = None
    mcp: str | None = None                # an MCP server's command (killpoint.harness.certify.mcp)
    mcp_url: str | None = None            # its streamable-HTTP endpoint; without ``mcp``, a server the user runs
    mcp_protocol: str | None = None       # auto, handshake or stateless (mcp_http.PROTOCOLS)
    mcp_env: tuple[str, ...] = ()         # NAME=VALUE for the server, {world} filled
    world_preset: str | None = None       # an MCP world made by a recipe (mcp_worlds.PRESETS)
    allow_network: bool = False           # run MCP tools that may reach the network
    call_timeout: float | None = None     # seconds per MCP call (mcp.DEFAULT_CALL_TIMEOUT_S)
    cwd: str = field(default_factory=os.getcwd)

    @property
    def given(self) -> bool:
        return self.python is not None or self.command is not None or self.mcp is not None or self.mcp_url is not None


def external_target(tool: str, spec: ExternalSpec) -> PythonTarget | CommandTarget:
    """A Python callable or a command, acting on a copy of ``spec.world`` (empty by default); MCP is ``mcp.mcp_target``."""
    if spec.python and spec.command:
        raise ConfigError("--python and --command are exclusive: a tool is one or the other")
    world = _template_world(spec.world, spec.cwd)
    schemas = load_schemas(spec.schema and str(Path(spec.cwd, spec.schema)))
    as_json = {"tool": tool, **{key: value for key, value in spec.__dict__.items() if value not in (None, (), False)}}
    as_json.update({key: str(Path(spec.cwd, value).resolve())
                    for key, value in (("world", spec.world), ("schema", spec.schema)) if value is not None})
    if spec.command is not None:
        argv = split_command(spec.command, "--command", spec.cwd)
        snapshot_argv = split_command(spec.snapshot_command, "--snapshot-command", spec.cwd) if spec.snapshot_command else None
        schema = schema_for(tool, schemas, None, f"--schema {spec.schema}" if schemas else "--command")
        return CommandTarget(tool, {"adapter": "command", **as_json}, tuple(argv), _drawn_from(schema), world,
                             tuple(snapshot_argv) if snapshot_argv else None, command_identity(argv, snapshot_argv))
    if spec.python is None:
        raise ConfigError("give --python MODULE:FUNCTION or --command 'ARGV {args}' to run a tool outside the project")
    function = resolve_callable(spec.python, "--python", spec.cwd)
    snapshot_fn = resolve_callable(spec.python_snapshot, "--python-snapshot", spec.cwd) if spec.python_snapshot else None
    schema = schema_for(tool, schemas, getattr(function, "schema", None),
                        f"--schema {spec.schema}" if schemas else f"--python {spec.python} (its schema attribute)")
    takes_tool = "tool" in inspect.signature(function).parameters

    def run(world_dir: Path, args: dict[str, Any], scratch: Path) -> tuple[bool, str | None]:
        function(world_dir, args, **({"tool": tool} if takes_tool else {}))
        return True, None

    def snapshot(world_dir: Path) -> dict[str, str]:
        return canonical_snapshot(snapshot_fn(world_dir)) if snapshot_fn else directory_snapshot(world_dir)

    digest = source_digest(function, *([snapshot_fn] if snapshot_fn else []), extra=schema)
    return PythonTarget(tool, {"adapter": "python", **as_json}, run, _drawn_from(schema),
                        lambda folder: copy_world(world, folder), snapshot,
                        {"kind": "python source", "digest": digest})


def _template_world(path: str | None, cwd: str) -> Path | None:
    if path is None:
        return None
    world = Path(cwd, path).resolve()
    if not world.is_dir():
        raise ConfigError(f"--world {path}: no such folder; give the folder each trial's world is copied from")
    return world


def split_command(template: str, flag: str, cwd: str) -> list[str]:
    """The argv of a template; words naming a file (relative to ``cwd``) become absolute, as the tool runs in its world."""
    try:
        words = shlex.split(template)
    except ValueError as error:
        raise ConfigError(f"{flag} {template!r}: cannot split it into words ({error})") from None
    if not words:
        raise ConfigError(f"{flag}: empty command; e.g. {flag} 'sh tools/mytool.sh {{args}}'")
    # abspath, not resolve: a venv's bin/python is a symlink, and resolving it would leave the venv
    return [os.path.abspath(os.path.join(cwd, word)) if "{" not in word and Path(cwd, word).is_file() else word
            for word in words]


def target_from_spec(spec: dict[str, Any]) -> PythonTarget | CommandTarget:
    """Rebuild a target from the JSON ``spec`` a certificate (or a child's job) carries (MCP: ``mcp.mcp_target``)."""
    if spec.get("adapter") == "fake":
        return fake_target(spec["tool"])
    if spec.get("adapter") not in ("python", "command"):
        raise ConfigError(f"{spec.get('tool')!r} was certified with no way to run it (adapter {spec.get('adapter')!r})")
    fields: dict[str, Any] = {key: spec.get(key) for key in ExternalSpec.__dataclass_fields__ if key != "cwd"}
    fields.update(mcp_env=tuple(spec.get("mcp_env") or ()), allow_network=bool(spec.get("allow_network")))
    return external_target(spec["tool"], ExternalSpec(**fields, cwd=spec.get("cwd") or os.getcwd()))
