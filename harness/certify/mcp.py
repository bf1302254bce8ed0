"""Certify a live MCP server's tools: one ``McpTarget`` per tool, each trial on a fresh world and server.

``killpoint certify --mcp 'CMD {world}'`` starts the server once to list its
tools (``initialize``, ``tools/list``: name, ``inputSchema``, annotations), then
certifies each tool like any other target: the trials in ``trials`` run
unchanged. What is particular to MCP:

- The server is the unit that runs and dies. ``call`` reuses the world's live
  server (a replay trial costs one start); ``kill`` starts a fresh one, SIGKILLs
  its whole tree part-way through the call, and the replay that follows starts
  another: the restart. ``release`` ends the live one (``trials.search`` calls
  it when a trial is done), so no server outlives its trial.
- Kill points are the changes the call makes in the world (``world_events``),
  plus seeded delays within one call's duration (``timed_kills``; 0 ms is "the
  request written, nothing done"). A kill at a change holds the server at its
  next open or write in the world (fanotify) until the certifier has decided,
  so it lands there whatever the load; the certificate's ``adapter`` says so
  (``kills_at_changes``), or that it was best-effort where fanotify is refused.
- The claim is what the hints map to (``catalogue_cli.classify``), and its
  ``why`` names them, so the verdict says which hint the evidence contradicts.
- Arguments are drawn from the tool's ``inputSchema`` with the world's names for
  path-, ref- and text-like properties (``world_hook``). ``{world}`` in an
  argument is the trial's world (``repo_path`` draws it); ``{4MiB}`` is 4 MiB of
  text, so a write takes long enough for a kill to land part-way (a small one is
  done before the signal arrives), while the counterexample stays readable.
- A snapshot holds the world and what the server's read tools return
  (``mcp_state``: ``readOnlyHint`` true, no required argument, answering the same
  twice): an effect kept in the server's memory that such a read shows is
  compared like a file. The rest of its memory is not seen (``unseen``): a tool
  whose calls changed nothing seen may still have changed a setting held there,
  so such calls establish no class but a READ_ONLY claim (``certificate.judge``).
- A tool that acts only on what another tool made (an observation added to an
  entity) is given a state built by the server's creator tools first
  (``trials.StateBuilder``: ``creators``, ``arguments_for``, ``build``).
- Network: a tool whose ``openWorldHint`` is true, or that takes a URL, is skipped
  unless ``--allow-network``, with the reason.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from killpoint.errors import ConfigError, InternalError
from killpoint.harness.certify.adapters import CallResult, ExternalSpec, TrialError, schema_problems, split_command
from killpoint.harness.certify.certificate import AFTER, MAX_TOOL_NAME, shown_name
from killpoint.harness.certify.identity import command_identity
from killpoint.harness.certify.janitor import drain, remove_later
from killpoint.harness.certify.mcp_client import McpCall, McpClient, McpServer, ServerError, ServerInfo
from killpoint.harness.certify.mcp_http import PROTOCOLS, HttpMcp, HttpMcpServer, parse_url
from killpoint.harness.certify.mcp_state import READ_KEY, creator_order, is_creator, is_read, names_in, shown_view
from killpoint.harness.certify.mcp_worlds import (GIT_ENV, PRESETS, Vocabulary, make_world, reset_world, settle, snapshot,
                                                  user_world, vocabulary)
from killpoint.harness.certify.points import ChildRun
from killpoint.harness.certify.trials import TEMPORARY_NAME, Setup
from killpoint.harness.certify.world_events import WorldEvents, kills_at_changes
from killpoint.harness.execute.leftovers import owner_prefix
from killpoint.harness.frontends.catalogue_cli import classify

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

DEFAULT_CALL_TIMEOUT_S = 30.0
WORLD = "{world}"
PORT = "{port}"  # in --mcp and --mcp-url: a free port, chosen for each server killpoint starts
LARGE = "{4MiB}"
MEMORY = "the server's memory"  # where a server keeps what no snapshot of its world shows
LARGE_TEXT = ("killpoint certify: 4 MiB to write, in parts a kill can land between\n" * (1 << 16))[:1 << 22]
_URL_NAMES = re.compile(r"(url|uri|href|endpoint|link)s?$", re.IGNORECASE)
_URL_FORMATS = {"uri", "url", "iri", "uri-reference", "iri-reference"}
_REPO_NAMES = re.compile(r"repo", re.IGNORECASE)
_PATH_NAMES = re.compile(r"path|file|source|destination|dir|folder", re.IGNORECASE)
_REF_NAMES = re.compile(r"branch|revision|target|^ref|commit|contains", re.IGNORECASE)
_PATTERN_NAMES = re.compile(r"pattern|glob", re.IGNORECASE)
_OLD_TEXT_NAMES = re.compile(r"^old|search|find", re.IGNORECASE)
_NEW_TEXT_NAMES = re.compile(r"^new|replace", re.IGNORECASE)
_DESTINATION_NAMES = re.compile(r"dest|^to$|^new", re.IGNORECASE)
_CONTENT_NAMES = re.compile(r"content|text|data|body", re.IGNORECASE)
PATTERNS = ("*.txt", "a", "**/*", "")
# What MCP says a tool name should be (1 to 128 of these characters); its certificate is a file named after it.
TOOL_NAME = re.compile(rf"[A-Za-z0-9_.-]{{1,{MAX_TOOL_NAME}}}")


@dataclass(frozen=True)
class ServerCommand:
    """How to reach the server on a world: the argv and env templates (``{world}``, ``{port}`` filled), the world's recipe.

    Over stdio (``url`` None) or streamable HTTP at ``url`` (``{port}`` filled
    with a free port for each server killpoint starts). With no argv, the
    server is one the user runs at ``url`` on the folder ``fixed_world``,
    reset to ``template`` (its contents when certify began) for every trial.
    """

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    preset: str
    template: Path | None
    call_timeout_s: float
    url: str | None = None
    protocol: str = "auto"
    fixed_world: Path | None = None

    def fresh_world(self, folder: Path) -> Path:
        if self.fixed_world is not None:
            assert self.template is not None
            return reset_world(self.fixed_world, self.template)
        return make_world(folder, self.preset, self.template)

    def start(self, world: Path, scratch: Path) -> McpClient:
        """A server on ``world``, initialized; ServerError (it is then dead and reaped) if it would not start."""
        server = self.spawn(world, scratch)
        try:
            server.initialize()
        except BaseException:
            server.close()
            raise
        return server

    def spawn(self, world: Path, scratch: Path) -> McpClient:
        """A server on ``world``, asked to initialize but not waited for (``McpClient.initialize`` finishes it)."""
        if not self.argv:  # the user's server: nothing to start
            assert self.url is not None
            return HttpMcp(parse_url(self.url), call_timeout_s=self.call_timeout_s, protocol=self.protocol)
        port = str(free_port()) if self.url is not None else ""

        def filled_in(word: str) -> str:
            return word.replace(WORLD, str(world)).replace(PORT, port)

        argv = [filled_in(word) for word in self.argv]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch), "LANG": "C.UTF-8",
               **(GIT_ENV if (world / ".git").is_dir() else {}),
               **{name: filled_in(value) for name, value in self.env}}
        stderr = scratch / f"server-{len(list(scratch.glob('server-*.stderr')))}.stderr"
        server: McpClient
        if self.url is not None:
            server = HttpMcpServer(argv, parse_url(filled_in(self.url)), cwd=world, env=env, stderr_path=stderr,
                                   call_timeout_s=self.call_timeout_s, protocol=self.protocol)
        else:
            server = McpServer(argv, cwd=world, env=env, stderr_path=stderr, call_timeout_s=self.call_timeout_s)
        try:
            server.send_initialize()
        except BaseException:
            server.close()
            raise
        return server


@dataclass(frozen=True)
class Listing:
    info: ServerInfo
    tools: tuple[dict[str, Any], ...]
    vocabulary: Vocabulary
    reads: tuple[str, ...]  # the read tools every snapshot asks (``stable_reads``)


_LISTINGS: dict[ServerCommand, Listing] = {}


def listing(command: ServerCommand, shown: str) -> Listing:
    """The server's tools (one start on a fresh world), once per command; ConfigError if it cannot say."""
    if command not in _LISTINGS:
        folder = Path(tempfile.mkdtemp(prefix=owner_prefix("killpoint-mcp-list-")))
        try:
            world = command.fresh_world(folder)
            names = vocabulary(world)
            server = command.start(world, folder)
            try:
                info, tools = server.initialize(), tuple(server.list_tools())
                views = _views(server, world, read_candidates(tools), calls=2)
            finally:
                server.close()
        except ServerError as error:
            raise ConfigError(f"{shown}: {error}") from None
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if not tools:
            raise ConfigError(f"{shown}: the server ({info.name} {info.version}) lists no tools to certify")
        _LISTINGS[command] = Listing(info, tools, names, stable_reads(command, views))
    return _LISTINGS[command]


def read_candidates(tools: tuple[dict[str, Any], ...]) -> list[str]:
    """The read tools (``mcp_state.is_read``) that may be called without asking: none that may reach the network."""
    return [str(entry["name"]) for entry in tools if is_read(entry) and not network_reason(entry)
            and not schema_problems(entry.get("inputSchema") or {"type": "object"}, "inputSchema")]


def _views(server: McpClient, world: Path, names: list[str], *, calls: int) -> dict[str, str]:
    """What each read answers on ``server`` (``shown_view``), if its ``calls`` calls answered alike.

    A read that refuses, answers two ways, or changes the world is no view of
    the state; the first that does not answer (a dead server, a timeout) ends
    the list, so a hostile server costs one call timeout here at most.
    """
    views = {}
    for name in names:
        before = snapshot(world)
        try:
            outcomes = [server.call_tool(name, {}) for _ in range(calls)]
        except ServerError:
            break
        if any(outcome.timed_out for outcome in outcomes):
            break
        texts = {shown_view(_scrubbed(outcome.text, world) or "") for outcome in outcomes}
        if all(outcome.ok for outcome in outcomes) and len(texts) == 1 and snapshot(world) == before:
            views[name] = texts.pop()
    return views


def stable_reads(command: ServerCommand, views: dict[str, str]) -> tuple[str, ...]:
    """The reads whose answer on a second server, on another fresh world, is the one ``views`` holds.

    An answer that names the server's process or the time it started differs
    between the server of a kill and its restart, so it is no view of state.
    A second server that will not start leaves no read: the trials will say why.
    """
    if not views:
        return ()
    folder = Path(tempfile.mkdtemp(prefix=owner_prefix("killpoint-mcp-reads-")))
    try:
        world = command.fresh_world(folder)
        server = command.start(world, folder)
        try:
            again = _views(server, world, list(views), calls=1)
        finally:
            server.close()
    except ServerError:
        return ()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return tuple(name for name, view in views.items() if again.get(name) == view)


SPARES_AHEAD = 2  # a kill trial takes one (and starts a restart): the trial after it still finds one up


class Spares:
    """Fresh worlds of one command, each with a server starting on it that no call has reached: the trials' next.

    A server's start (node loading server-memory: 0.2 to 0.5 s) is most of a
    trial, so ``SPARES_AHEAD`` start while the trials before them run, made on
    a thread of the pool's own: the trial does not wait for a world to be
    written or a server to be forked and join its cgroup (28 ms a start, on the
    trial's path before). A spare serves any tool of its command: its world is
    the preset's (or ``--world``'s) as made, its server the command's, asked
    only to initialize, so which tool's trial takes it changes nothing the
    trial sees. So the pool is the command's, not a tool's (``spares_of``):
    each tool's first trial takes a server already started, and no tool's last
    spares are killed unused. A user's server at ``--mcp-url`` acts on its one
    folder, which a spare's world cannot be while a trial uses it: there none
    is made ahead. ``close_spares`` ends them all when certify ends.
    """

    def __init__(self, command: ServerCommand) -> None:
        self.command = command
        self.ahead = SPARES_AHEAD if command.fixed_world is None else 0
        self.ready: list[Future[tuple[Path, McpClient]]] = []  # started first, first
        self.folder = Path(tempfile.mkdtemp(prefix=owner_prefix("killpoint-mcp-")))  # every world of the pool
        self.starter = ThreadPoolExecutor(1, "killpoint-certify-spares") if self.ahead else None

    def take(self) -> tuple[Path, McpClient]:
        """The spare started first (or one started now, if none is), and ``ahead`` more starting again.

        SpareFailed if its server would not start: the trial that takes it says why.
        """
        taken = self.ready.pop(0).result() if self.ready else self._spawned()
        while self.starter is not None and len(self.ready) < self.ahead:
            self.ready.append(self.starter.submit(self._spawned))
        return taken

    def _spawned(self) -> tuple[Path, McpClient]:
        folder = Path(tempfile.mkdtemp(prefix="trial-", dir=self.folder))
        world = self.command.fresh_world(folder)
        try:
            return world, self.command.spawn(world, folder)
        except ServerError as error:
            raise SpareFailed(str(error), world) from None

    def close(self) -> None:
        """End every spare (killed with its tree, reaped) and remove every world of the pool."""
        while self.ready:
            try:
                self.ready.pop().result()[1].close()
            except Exception:  # noqa: BLE001 - its start failed, and ``spawn`` closed what it had started
                pass
        if self.starter is not None:
            self.starter.shutdown()
        drain()
        shutil.rmtree(self.folder, ignore_errors=True)


class SpareFailed(InternalError):
    """A spare's server would not start: the error, and the world it was for (its path is scrubbed from the error by
    the trial that takes it)."""

    def __init__(self, message: str, world: Path) -> None:
        super().__init__(message, world)
        self.message, self.world = message, world


_SPARES: dict[ServerCommand, Spares] = {}


def spares_of(command: ServerCommand) -> Spares:
    """The command's pool of spares, made on first use and shared by every tool of it."""
    if command not in _SPARES:
        _SPARES[command] = Spares(command)
    return _SPARES[command]


@atexit.register  # also at exit: a caller that never calls it leaves no server running
def close_spares() -> None:
    """End every pool's spares and remove their worlds: when a certification is done."""
    while _SPARES:
        _SPARES.popitem()[1].close()


@dataclass(frozen=True)
class McpTarget:
    """One tool of a live MCP server.

    Its worlds come from its command's ``Spares``, each beside the scratch
    folder of its servers (stderr, HOME): a world and a server started on it
    ahead, which nothing has called. ``live`` is the current world's server,
    reused between a call and its replay; ``release`` ends it and drops its
    world after each trial, ``close`` after the last.
    """

    name: str
    spec: dict[str, Any]
    command: ServerCommand
    schema: dict[str, Any]
    vocabulary: Vocabulary
    identity: dict[str, str]
    notes: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()  # the server's read tools each snapshot asks (``Listing.reads``)
    creator_schemas: dict[str, dict[str, Any]] = field(default_factory=dict)  # creator tool -> its inputSchema
    timed_kills = True  # no instrumented points inside a server: seeded delays too (trials.search)
    live: dict[Path, McpClient] = field(default_factory=dict, compare=False)

    @property
    def unseen(self) -> str:
        """The server lives from a call to its replay: its memory is seen only as far as its read tools show it."""
        return f"{MEMORY} (beyond what its read tools, {', '.join(self.reads)}, show)" if self.reads else MEMORY

    @property
    def creators(self) -> tuple[str, ...]:
        return tuple(self.creator_schemas)

    def arguments(self) -> SearchStrategy[dict[str, Any]]:
        from killpoint.harness.certify.strategies import args_for

        return args_for(self.schema, world_hook(self.vocabulary, self.name))

    def arguments_for(self, tool: str, setup: Setup) -> SearchStrategy[dict[str, Any]]:
        """Arguments for ``tool`` (this one or a creator) whose free strings name what ``setup`` named.

        Half the draws take a name given to a name-like key (an entity's
        ``name``), the rest any string the setup was given; a creator may also
        draw one of the world's words, a new name, where this tool acts only on
        what exists.
        """
        from hypothesis import strategies as st

        from killpoint.harness.certify.strategies import args_for

        named, every = names_in(setup)
        words = () if tool == self.name else self.vocabulary.texts
        free = st.sampled_from(tuple(dict.fromkeys((*every, *words))) or self.vocabulary.texts)
        schema = self.schema if tool == self.name else self.creator_schemas[tool]
        names = st.sampled_from(named) | free if named else free
        return args_for(schema, world_hook(self.vocabulary, tool, free=names))

    def build(self, world: Path, setup: Setup, scratch: Path) -> Setup:
        """Run each setup call on the world's server; each step as it ended (a refused one built nothing)."""
        ran = []
        for step in setup:
            result = self._call_live(world, step["tool"], step["args"])
            ran.append({**step, "ok": result.ok, **({"error": result.error} if result.error else {})})
        return tuple(ran)

    def restart(self, world: Path) -> None:
        """End the world's server: the next call or snapshot starts one on what the world kept (the restart)."""
        server = self.live.pop(world, None)
        if server is not None:
            server.close()

    def fresh_world(self, folder: Path) -> Path:
        """A fresh world with a server starting on it (``folder``, the trial's, is not used: worlds live apart)."""
        self.release()
        try:
            world, server = spares_of(self.command).take()
        except SpareFailed as failed:
            raise TrialError(f"{self.name}: {_scrubbed(failed.message, failed.world)}") from None
        self.live[world] = server
        return world

    def snapshot(self, world: Path) -> dict[str, str]:
        """The world, then what each read tool returns on the world's server (started if none runs: the restart)."""
        state = snapshot(world)
        if not self.reads:
            return state
        server = self._live(world)
        for read in self.reads:
            outcome = self._call(server, world, read, {}, watched=False)
            text = _scrubbed(outcome.text if outcome.ok else f"refused: {outcome.error}", world) or ""
            state[READ_KEY + read] = shown_view(text)
        return state

    def smaller(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        """The arguments with each ``{4MiB}`` as a short word, if there is one (drawn first, it shrinks no further)."""
        if LARGE not in json.dumps(args):
            return []
        text = json.dumps(args).replace(json.dumps(LARGE), json.dumps(self.vocabulary.texts[0]))
        return [json.loads(text)]

    def call(self, world: Path, args: dict[str, Any], scratch: Path) -> CallResult:
        return self._call_live(world, self.name, args)

    def _call_live(self, world: Path, tool: str, args: dict[str, Any]) -> CallResult:
        """``tool`` called on the world's server; TrialError if it had no answer within --call-timeout."""
        outcome = self._call(self._live(world), world, tool, args)
        if outcome.timed_out:
            self.release()
            raise TrialError(f"{tool}: the call had {outcome.error} (--call-timeout; the server was killed)")
        return CallResult(outcome.ok, _scrubbed(outcome.error, world), outcome.labels, outcome.seconds)

    def _live(self, world: Path) -> McpClient:
        """The world's server: the one it started with, or (after a kill or ``restart``) a new one on it."""
        server = self.live.get(world)
        if server is not None and server.used and not server.alive:
            raise TrialError(f"{self.name}: the server died between calls ({server.stderr_tail() or 'no stderr'})")
        if server is None:
            server = self.live[world] = self._started(world)
        return server

    def kill(self, world: Path, args: dict[str, Any], scratch: Path, *, at_point: int | None = None,
             after_s: float | None = None) -> ChildRun:
        """The call on the world's server (holding what a setup built, if one ran), SIGKILLed part-way."""
        server = self._live(world)
        del self.live[world]
        try:
            outcome = self._call(server, world, self.name, args, kill_at=at_point, kill_after_s=after_s)
        finally:
            server.close()
        if self.command.fixed_world is not None:  # the user's server may finish the call the client died in
            settle(world, self.command.call_timeout_s)
        return ChildRun(outcome.labels, outcome.killed_at, outcome.killed_after_s, server.returncode,
                        outcome.seconds, timed_out=outcome.timed_out)

    def release(self) -> None:
        """End the current world's server (killed with its whole tree, reaped) and drop that world."""
        while self.live:
            world, server = self.live.popitem()
            server.close()
            if self.command.fixed_world is None:  # the user's folder stays; its scratch goes with ``close_spares``
                remove_later(world.parent)  # its server is dead and reaped: only files are left to remove

    def close(self) -> None:
        """End this tool's server and remove its worlds (once the janitor is done); the spares serve the next tool."""
        self.release()
        drain()

    def _started(self, world: Path) -> McpClient:
        try:
            return self.command.start(world, world.parent)
        except ServerError as error:
            raise TrialError(f"{self.name}: {_scrubbed(str(error), world)}") from None

    def _call(self, server: McpClient, world: Path, tool: str, args: dict[str, Any], *, kill_at: int | None = None,
              kill_after_s: float | None = None, watched: bool = True) -> McpCall:
        """The call, watched; a kill at a point holds the server at each open and write (``world_events``).

        The watch starts once the server has initialized: a hold nobody reads
        would stall a server that opens world files while it starts. A read a
        snapshot asks is not ``watched``: only its answer is kept, never the
        changes it made (``stable_reads`` kept only reads that make none), and a
        watch costs its folders' marks, made and freed, on every snapshot.
        """
        try:
            server.initialize()
            events = WorldEvents(world, session=server.session_pid if kill_at is not None else None) if watched else None
            try:
                outcome = server.call_tool(tool, filled(args, world), events=events, kill_at=kill_at,
                                           kill_after_s=kill_after_s)
            finally:
                if events is not None:
                    events.close()
        except ServerError as error:
            server.close()
            raise TrialError(f"{tool}: {_scrubbed(str(error), world)}") from None
        return McpCall(tuple(AFTER + TEMPORARY_NAME.sub("<hex>", label) for label in outcome.labels), outcome.ok,
                       outcome.error, outcome.seconds, outcome.killed_at, outcome.killed_after_s, outcome.timed_out,
                       outcome.returncode, outcome.text)


def filled(args: dict[str, Any], world: Path) -> dict[str, Any]:
    """The arguments as the server gets them: ``{world}`` is the world's path, ``{4MiB}`` 4 MiB of text."""
    def fill(value: Any) -> Any:
        if isinstance(value, str):
            return LARGE_TEXT if value == LARGE else value.replace(WORLD, str(world))
        if isinstance(value, list):
            return [fill(item) for item in value]
        if isinstance(value, dict):
            return {key: fill(item) for key, item in value.items()}
        return value

    return {key: fill(value) for key, value in args.items()}


def _scrubbed(error: str | None, world: Path) -> str | None:
    """The error with the world's path as ``<world>`` and temporary hex names as ``<hex>``: equal seeds, equal evidence."""
    if error is None:
        return None
    return TEMPORARY_NAME.sub("<hex>", error.replace(str(world.resolve()), "<world>").replace(str(world), "<world>"))


def world_hook(names: Vocabulary, tool: str, free: SearchStrategy[str] | None = None) -> Any:
    """The ``strategies`` hook: path-, ref-, pattern- and text-like string properties draw from the world's names.

    With ``free`` (what a setup named, ``McpTarget.arguments_for``), every
    other string draws from it, at any depth: a draw (and a shrink) names
    something that exists, where random text would name nothing twice.

    Each list is ordered so the first draw (the one Hypothesis tries first, and
    shrinks toward) is a call likely to do something: a fresh name for a
    destination or for a tool that creates, a folder for one that lists, else
    a file; ``oldText`` draws a word the files hold, ``newText`` one that
    contains it (the edit a replay repeats); a description that quotes two or
    more words (``'local'``, ``'remote'``) draws one of them.
    """
    from hypothesis import strategies as st

    from killpoint.harness.certify.strategies import array_of, from_schema

    creates = re.search(r"create|make|mkdir|new|init", tool, re.IGNORECASE)
    lists = re.search(r"dir|list|tree|search|find", tool, re.IGNORECASE)

    def strings(name: str, description: str, *, large: bool = True) -> SearchStrategy[str] | None:
        fresh_first = creates or _DESTINATION_NAMES.search(name)
        quoted = list(dict.fromkeys(re.findall(r"'([\w-]+)'", description)))
        if len(quoted) >= 2:  # "Whether to list local branches ('local'), remote branches ('remote') or ..."
            return st.sampled_from(quoted)
        if _REPO_NAMES.search(name):
            return st.just(WORLD)
        if _REF_NAMES.search(name) and names.refs:
            return st.sampled_from((*names.fresh_refs, *names.refs) if fresh_first and not re.search(
                "base", name, re.IGNORECASE) else (*names.refs, *names.fresh_refs))
        if _PATTERN_NAMES.search(name):
            return st.sampled_from(PATTERNS)
        if _PATH_NAMES.search(name):
            order = ((names.fresh, names.files, names.folders) if fresh_first else
                     (names.folders, names.files, names.fresh) if lists else (names.files, names.folders, names.fresh))
            return st.sampled_from([path for group in order for path in group])
        if _NEW_TEXT_NAMES.search(name):
            return st.sampled_from(sorted(names.texts, key=lambda text: " " not in text))
        if _OLD_TEXT_NAMES.search(name):
            return st.sampled_from(names.texts)
        if _CONTENT_NAMES.search(name):  # large first: only a write in parts can be torn (``smaller`` reads it)
            return st.just(LARGE) | st.sampled_from(names.texts) if large else st.sampled_from(names.texts)
        return free

    def hook(name: str, spec: dict[str, Any]) -> SearchStrategy[Any] | None:
        branches = spec.get("anyOf", spec.get("oneOf"))
        description = str(spec.get("description", ""))
        if isinstance(branches, list) and {"type": "null"} in branches:
            kinds = [branch.get("type") for branch in branches if isinstance(branch, dict)]
            drawn = strings(name, description) if "string" in kinds and "enum" not in spec else None
            return None if drawn is None else st.none() | drawn
        if spec.get("type") == "string" and "enum" not in spec:
            return strings(name, description)
        items = spec.get("items")
        if spec.get("type") == "array" and isinstance(items, dict) and items.get("type") == "string":
            # no 4 MiB item: four would be a request larger than a server's stdin may hold unread
            item = strings(name, description, large=False)
            return None if item is None else array_of(spec, item)
        if spec.get("type") == "array" and isinstance(items, dict) and items.get("type") == "object":
            # a list of edits: the empty one does nothing, so draw at least one
            return array_of({**spec, "minItems": max(1, spec.get("minItems", 0))}, from_schema(items, hook))
        return None

    return hook


def refuse_bad_names(listed: Listing, shown: str, names: list[Any]) -> None:
    """ConfigError naming each of ``names`` that cannot be certified: not an MCP tool name, or listed twice.

    A name becomes a file name (the certificate's) and a line of the output, so
    it must be a name MCP allows; two tools of one name would share a certificate,
    the second overwriting the first.
    """
    counts = Counter(entry.get("name") for entry in listed.tools)
    problems = []
    for name in dict.fromkeys(names):
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            problems.append(f"{shown_name(name)}: not an MCP tool name (1 to {MAX_TOOL_NAME} characters, each a letter, a digit, "
                            f"'_', '-' or '.'), and its certificate would be a file of that name")
        elif counts[name] > 1:
            problems.append(f"{name!r}: listed {counts[name]} times; one certificate cannot be about two tools")
    if problems:
        raise ConfigError(f"{shown}: the server ({listed.info.name} {listed.info.version}) lists tools "
                          f"killpoint cannot certify; certify its other tools one at a time with --tool NAME",
                          tuple(problems))


def _listed_name(name: Any) -> str:
    """A name in a list of the server's tools: as it is when it is an MCP name, else as ``shown_name`` shows it."""
    return name if isinstance(name, str) and TOOL_NAME.fullmatch(name) else shown_name(name)


def hints_text(annotations: dict[str, Any] | None) -> str:
    """The behaviour hints in a table cell: ``ro idem destr open`` for each true one, ``!x`` for false, nothing absent."""
    words = []
    for hint, short in (("readOnlyHint", "ro"), ("idempotentHint", "idem"), ("destructiveHint", "destr"),
                        ("openWorldHint", "open")):
        value = (annotations or {}).get(hint)
        if isinstance(value, bool):
            words.append(short if value else "!" + short)
    return " ".join(words) or "-"


def network_reason(tool: dict[str, Any]) -> str | None:
    """Why running this tool may reach the network (its openWorldHint, a URL argument); None if nothing says so."""
    if (tool.get("annotations") or {}).get("openWorldHint") is True:
        return "openWorldHint: true (it may reach the network)"
    urls = sorted(_url_properties(tool.get("inputSchema") or {}))
    return f"it takes a URL ({', '.join(urls)})" if urls else None


def _url_properties(schema: Any, where: str = "") -> set[str]:
    if not isinstance(schema, dict):
        return set()
    found = set()
    for name, spec in (schema.get("properties") or {}).items():
        path = f"{where}{name}"
        if _URL_NAMES.search(name) or (isinstance(spec, dict) and spec.get("format") in _URL_FORMATS):
            found.add(path)
        found |= _url_properties(spec, path + ".")
    for keyword in ("items", "anyOf", "oneOf"):
        value = schema.get(keyword)
        for branch in value if isinstance(value, list) else [value]:
            found |= _url_properties(branch, where)
    return found


def free_port() -> int:
    """A TCP port nothing listens on now, for a server killpoint starts (``{port}``); the kernel's choice."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def shown_server(spec: ExternalSpec) -> str:
    """The flag that names the server, as error messages quote it."""
    return f"--mcp {spec.mcp!r}" if spec.mcp is not None else f"--mcp-url {spec.mcp_url!r}"


def external_from_json(spec: dict[str, Any]) -> ExternalSpec:
    """The ``--mcp``/``--mcp-url`` flags an ``mcp`` adapter spec (a certificate's ``adapter``) was made from."""
    return ExternalSpec(mcp=spec.get("mcp"), mcp_url=spec.get("mcp_url"), mcp_protocol=spec.get("mcp_protocol"),
                        mcp_env=tuple(spec.get("mcp_env") or ()), world_preset=spec.get("world_preset"),
                        world=spec.get("world"), allow_network=bool(spec.get("allow_network")),
                        call_timeout=spec.get("call_timeout"), cwd=spec.get("cwd") or os.getcwd())


def server_command(spec: ExternalSpec) -> ServerCommand:
    """The ``--mcp``/``--mcp-url`` flags as a server to reach; ConfigError naming the flag for anything wrong."""
    assert spec.mcp is not None or spec.mcp_url is not None
    if spec.python or spec.command:
        raise ConfigError(f"{'--mcp' if spec.mcp else '--mcp-url'}, --python and --command are exclusive: a tool is "
                          f"run one way")
    protocol = spec.mcp_protocol or "auto"
    if protocol not in PROTOCOLS:
        raise ConfigError(f"--mcp-protocol {protocol!r}: unknown; use one of {', '.join(PROTOCOLS)}")
    if spec.mcp_url is not None:
        parse_url(spec.mcp_url.replace(PORT, "1"))
        if spec.mcp is not None and (PORT not in spec.mcp_url or not any(
                PORT in word for word in (spec.mcp, *spec.mcp_env))):
            raise ConfigError(f"--mcp-url {spec.mcp_url!r} with --mcp: write {PORT} in both, e.g. --mcp 'CMD {{world}} "
                              f"--port {{port}}' --mcp-url 'http://127.0.0.1:{{port}}/mcp'; each server killpoint "
                              f"starts gets a free port")
    if spec.mcp is None:
        return _user_server(spec, protocol)
    preset = spec.world_preset or "files"
    if preset not in PRESETS:
        raise ConfigError(f"--world-preset {preset!r}: unknown; use one of {', '.join(PRESETS)}")
    if spec.world and spec.world_preset:
        raise ConfigError("--world and --world-preset are exclusive: a world is copied from DIR or made by a preset")
    template = None
    if spec.world is not None:
        template = Path(spec.cwd, spec.world).resolve()
        if not template.is_dir():
            raise ConfigError(f"--world {spec.world}: no such folder; give the folder each trial's world is copied from")
    env = []
    for item in spec.mcp_env:
        name, equals, value = item.partition("=")
        if not equals or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ConfigError(f"--mcp-env {item!r}: write NAME=VALUE, e.g. --mcp-env STATE_FILE={{world}}/state.json")
        env.append((name, value))
    timeout = spec.call_timeout if spec.call_timeout is not None else DEFAULT_CALL_TIMEOUT_S
    if timeout <= 0:
        raise ConfigError(f"--call-timeout {timeout:g}: give a positive number of seconds")
    return ServerCommand(tuple(split_command(spec.mcp, "--mcp", spec.cwd)), tuple(env), preset, template, timeout,
                         spec.mcp_url, protocol)


def _user_server(spec: ExternalSpec, protocol: str) -> ServerCommand:
    """A server the user runs at ``--mcp-url``, on the folder ``--world`` names (saved now, reset for each trial)."""
    flags = [flag for flag, used in (("--world-preset", spec.world_preset), ("--mcp-env", spec.mcp_env)) if used]
    if flags:
        raise ConfigError(f"{', '.join(flags)} with --mcp-url alone: they describe a server killpoint starts; the "
                          f"server you run acts on the folder --world DIR names")
    if spec.world is None:
        raise ConfigError("--mcp-url without --mcp: give --world DIR, the folder the server acts on (killpoint saves "
                          "its contents, resets it to them before each trial, and leaves them there at the end)")
    folder, template = user_world(Path(spec.cwd, spec.world))
    timeout = spec.call_timeout if spec.call_timeout is not None else DEFAULT_CALL_TIMEOUT_S
    if timeout <= 0:
        raise ConfigError(f"--call-timeout {timeout:g}: give a positive number of seconds")
    assert spec.mcp_url is not None
    return ServerCommand((), (), "files", template, timeout, spec.mcp_url, protocol, folder)


def tool_listing(spec: ExternalSpec) -> tuple[ServerCommand, Listing]:
    command = server_command(spec)
    return command, listing(command, shown_server(spec))


def mcp_target(tool: str, spec: ExternalSpec) -> McpTarget:
    """The target of one tool of the ``--mcp`` server; ConfigError if the server does not list it (or lists it twice)."""
    command, listed = tool_listing(spec)
    found = next((entry for entry in listed.tools if entry.get("name") == tool), None)
    if found is None:
        raise ConfigError(f"{shown_server(spec)}: the server ({listed.info.name} {listed.info.version}) lists no tool "
                          f"{tool!r}; it lists {', '.join(sorted(_listed_name(entry.get('name')) for entry in listed.tools))}")
    refuse_bad_names(listed, shown_server(spec), [tool])
    world = command.fixed_world or command.template
    as_json = {"adapter": "mcp", "tool": tool, "mcp": spec.mcp, "mcp_url": spec.mcp_url,
               "mcp_protocol": spec.mcp_protocol, "mcp_env": list(spec.mcp_env),
               "world_preset": spec.world_preset, "world": str(world) if world else None,
               "allow_network": spec.allow_network, "call_timeout": spec.call_timeout, "cwd": spec.cwd,
               "annotations": found.get("annotations"), "kills_at_changes": kills_at_changes(),
               "reads": list(listed.reads)}
    described = {key: found.get(key) for key in ("name", "inputSchema", "annotations")}
    base = (command_identity(list(command.argv), None) if command.argv else
            {"digest": "sha256:" + hashlib.sha256(str(command.url).encode()).hexdigest()})
    digest = hashlib.sha256(json.dumps([base["digest"], dict(command.env), command.preset, described,
                                        listed.info.name, listed.info.version], sort_keys=True).encode())
    identity = {"kind": "mcp server", "name": listed.info.name, "version": listed.info.version,
                "protocol": listed.info.protocol, "digest": "sha256:" + digest.hexdigest()}
    if "files" in base:
        identity["files"] = base["files"]
    schema = found.get("inputSchema") or {"type": "object", "properties": {}}
    return McpTarget(tool, as_json, command, schema, listed.vocabulary, identity, reads=listed.reads,
                     creator_schemas=creators(listed, tool, allow_network=spec.allow_network))


def creators(listed: Listing, tool: str, *, allow_network: bool) -> dict[str, dict[str, Any]]:
    """The server's creator tools but ``tool`` (``mcp_state.is_creator``), those that create first: name -> schema.

    Only tools certify could run itself: none that may reach the network
    without --allow-network, none whose schema it cannot draw from.
    """
    found = {}
    for entry in sorted(listed.tools, key=lambda entry: creator_order(str(entry.get("name")))):
        schema = entry.get("inputSchema") or {"type": "object", "properties": {}}
        if (entry.get("name") != tool and is_creator(entry) and (allow_network or not network_reason(entry))
                and not schema_problems(schema, "inputSchema")):
            found[str(entry["name"])] = schema
    return found


@dataclass(frozen=True)
class ListedTool:
    name: str
    tool_class: str
    why: str
    skip: str  # why it is not run ("" when it is)


def listed_tools(spec: ExternalSpec, only: str | None) -> tuple[ServerInfo, list[ListedTool]]:
    """Each tool of the server (or just ``only``) with the class its hints map to, and why it would be skipped."""
    _, listed = tool_listing(spec)
    tools = [entry for entry in listed.tools if only is None or entry.get("name") == only]
    if only is not None and not tools:
        mcp_target(only, spec)  # raises, naming the tools the server does list
    refuse_bad_names(listed, shown_server(spec), [entry.get("name") for entry in tools])
    out = []
    for entry in sorted(tools, key=lambda entry: str(entry.get("name"))):
        annotations = entry.get("annotations")
        hints = {key: value for key, value in (annotations or {}).items() if isinstance(value, bool)}
        tool_class, why = classify(hints if annotations is not None else None)
        skip = "" if spec.allow_network else network_reason(entry) or ""
        if skip:
            skip += "; give --allow-network to run it"
        problems = schema_problems(entry.get("inputSchema") or {"type": "object"}, "inputSchema")
        if problems and not skip:
            skip = f"its inputSchema has what killpoint cannot draw arguments for: {'; '.join(problems)[:300]}"
        out.append(ListedTool(str(entry.get("name")), tool_class, why, skip))
    return listed.info, out
