"""A stdio MCP server whose process we own: start it, speak JSON-RPC to it, SIGKILL its whole tree part-way.

Why not the SDK's ``stdio_client``: it spawns the server itself and never gives
out the pid, so nothing could SIGKILL the server part-way through a
``tools/call``, nor prove its tree dead; and its shutdown is SIGTERM first.
Why not bridge our pipes into the SDK's ``ClientSession``: it is anyio, and the
trials are synchronous; a portal thread and its cancellation paths would stand
between the moment a world file changes and the kill. The client side of MCP
over stdio is small (newline-delimited JSON-RPC: ``initialize``, the
``initialized`` notification, ``tools/list`` with its cursor, ``tools/call``),
so it is spoken here in one ``select`` loop that also watches the world
(``world_events``), which holds the server at its next open or write there
until the loop has decided whether the change it waits for has come: the kill
lands there, not when the scheduler lets the loop run. The SDK's own types
(``mcp_types``) still check what the server answers.

Every path ends in ``close``. Each server starts in a cgroup of its own, as a
run's incarnations do (``backends._cgroup``): every process it forks is born
there, so a ``git`` that GitPython spawned, or a grandchild that double-forked
and called ``setsid``, dies with it when the cgroup is killed, and the cgroup is
confirmed empty. Where there are no cgroups (said once on stderr), the server's
process group and every descendant are SIGKILLed, reaped and confirmed dead
(``_process_tree.kill_tree``), which misses what left the tree.

The server is untrusted, so nothing it does can hang the client or crash it:
its stdin is written without blocking (what it has not read waits in an outbox,
bounded, flushed by the same ``select`` that reads its answers), so every read
and write falls under the call's deadline; a line, the nesting of a message,
the pages of ``tools/list`` and the number of tools are bounded, each with a
``ServerError`` that says which bound and why.
"""

from __future__ import annotations

import functools
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from killpoint.errors import InternalError
from killpoint.harness.backends._cgroup import IncarnationCgroup, preexec_joiner
from killpoint.harness.certify import npx
from killpoint.harness.certify.world_events import WorldEvents
from killpoint.harness.execute._process_tree import CONFIRM_TIMEOUT_S, KillFailed, kill_stragglers, kill_tree

PROTOCOL_VERSION = "2025-11-25"  # what we offer; the server answers with the version it speaks
METHOD_NOT_FOUND = -32601
MAX_LINE_BYTES = 64 << 20  # one message: a 4 MiB file read back, JSON-escaped, fits several times
MAX_UNREAD_BYTES = 16 << 20  # written, not yet read by the server: a 4 MiB request and answers to its requests
MAX_DEPTH = 100  # nesting of one message; real servers' schemas nest a few dozen levels at most
MAX_PAGES = 100  # of one tools/list
MAX_TOOLS = 1000  # of one server


class ServerError(InternalError):
    """The server did not start, did not answer, printed something that is not JSON-RPC, or died."""


@dataclass(frozen=True)
class ServerInfo:
    name: str
    version: str
    protocol: str


@dataclass(frozen=True)
class McpCall:
    """One ``tools/call``: how it ended, and the kill points it passed (each change it made in the world)."""

    labels: tuple[str, ...]
    ok: bool
    error: str | None
    seconds: float
    killed_at: int | None = None        # 1-based point at which the server was SIGKILLed
    killed_after_s: float | None = None  # a timed kill
    timed_out: bool = False
    returncode: int | None = None        # the server's, once it was killed
    text: str | None = None              # what a call that ended answered (``answer_text``): a read tool's view


class McpClient:
    """The client side of MCP, whatever carries it: a transport gives the hooks, this speaks the protocol.

    The hooks: ``_begin`` sends a request (its id), ``_select`` waits for the
    transport (and for what ``selector`` watches besides, labelled ``events``)
    while moving the bytes of the request, ``_answer`` is the answer to the
    request once it has come, ``_delivered`` says the request is all sent,
    ``_unsent_note`` says how much is not, ``kill`` ends the call the hard way.
    ``initialize`` is the transport's too: the stdio handshake and the HTTP
    negotiation differ. What they share is here, so the bounds, the pages and
    the kill points are one code: ``list_tools`` and ``call_tool``.
    """

    call_timeout_s: float
    info: ServerInfo | None
    used: bool  # a tool was called: it is no longer a fresh server for a kill trial
    returncode: int | None

    def send_initialize(self) -> None:
        """Start the handshake without waiting, where the transport can (stdio); else nothing."""

    def initialize(self) -> ServerInfo:
        raise NotImplementedError

    def _begin(self, method: str, params: dict[str, Any]) -> int:
        raise NotImplementedError

    def _select(self, selector: selectors.BaseSelector, timeout: float) -> set[str]:
        raise NotImplementedError

    def _answer(self, ready: set[str], request_id: int, what: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def _delivered(self) -> bool:
        raise NotImplementedError

    def _unsent_note(self) -> str:
        raise NotImplementedError

    def _abandon(self) -> None:
        """A request got no answer in time: what the transport does about it (nothing, over stdio)."""

    def kill(self) -> int | None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    @property
    def alive(self) -> bool:
        raise NotImplementedError

    def stderr_tail(self) -> str:
        raise NotImplementedError

    @property
    def session_pid(self) -> int | None:
        """The server's process (its session leader), when killpoint started it; fanotify holds that session."""
        return None

    def _request(self, request_id: int, timeout_s: float, what: str) -> dict[str, Any]:
        """The result of request ``request_id`` (``_begin``); ServerError if it errs, dies or says nothing in time."""
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as selector:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    unsent = self._unsent_note()
                    self._abandon()
                    raise ServerError(f"it did not answer {what} within {self.call_timeout_s:g}s{unsent}")
                answer = self._answer(self._select(selector, left), request_id, what)
                if answer is not None:
                    if "error" in answer:
                        raise ServerError(f"it answered {what} with an error: {error_text(answer['error'])}")
                    result = answer.get("result")
                    if not isinstance(result, dict):
                        raise ServerError(f"its {what} result is not an object: {json.dumps(result)[:200]}")
                    return result

    def list_tools(self) -> list[dict[str, Any]]:
        """Every tool of ``tools/list`` (following ``nextCursor``), as the server wrote it (camelCase JSON).

        Every page within one call timeout, at most MAX_PAGES pages and
        MAX_TOOLS tools: a server whose every page has a ``nextCursor`` would
        be listed forever.
        """
        import mcp_types

        tools: list[dict[str, Any]] = []
        cursor = None
        deadline = time.monotonic() + self.call_timeout_s
        for _ in range(MAX_PAGES):
            result = self._request(self._begin("tools/list", {"cursor": cursor} if cursor else {}),
                                   deadline - time.monotonic(), "tools/list")
            try:
                mcp_types.ListToolsResult.model_validate(result)
            except ValueError as error:
                raise ServerError(f"its tools/list result is not MCP's: {str(error)[:300]}") from None
            tools += result.get("tools", [])
            if len(tools) > MAX_TOOLS:
                raise ServerError(f"it lists more than {MAX_TOOLS} tools; killpoint certifies at most {MAX_TOOLS} "
                                  f"tools of one server")
            cursor = result.get("nextCursor")
            if not cursor:
                return tools
        raise ServerError(f"its tools/list has a nextCursor on each of {MAX_PAGES} pages ({len(tools)} tools so far); "
                          f"killpoint reads at most {MAX_PAGES} pages of tools")

    def call_tool(self, name: str, arguments: dict[str, Any], *, events: WorldEvents | None = None,
                  kill_at: int | None = None, kill_after_s: float | None = None) -> McpCall:
        """Call a tool; kill (``kill``) at point ``kill_at`` or ``kill_after_s`` after dispatch, if it gets that far.

        Points: each change ``events`` reports in the world, in order, a repeat of
        the one before counting once (the kernel merges repeats it has not yet
        handed out, so counting them would make the number depend on timing).
        Changes queued when the answer comes still count (they happened before
        it), so an uninterrupted call's labels are all its points. "During the
        call, before any change" is a delay of 0 ms. Where ``events`` holds the
        server, it is released only once the changes read say the point has not
        come yet, so the kill at a point comes before its next open or write.
        """
        started = time.monotonic()
        labels: list[str] = []
        self.used = True
        request_id = self._begin("tools/call", {"name": name, "arguments": arguments})

        def ended(**how: Any) -> McpCall:
            fields: dict[str, Any] = {"ok": False, "error": None, **how}
            return McpCall(tuple(labels), seconds=time.monotonic() - started, **fields)

        def note(changes: list[str]) -> bool:
            """Add the changes as points; True when point ``kill_at`` is reached."""
            for label in changes:
                if labels and labels[-1] == label:
                    continue
                labels.append(label)
                if len(labels) == kill_at:
                    return True
            return False

        deadline = started + self.call_timeout_s
        with selectors.DefaultSelector() as selector:
            for fd in events.fds if events is not None else ():
                selector.register(fd, selectors.EVENT_READ, "events")
            while True:
                now = time.monotonic()
                # a kill after 0 ms is "the request written, nothing done": it waits for the request to be sent
                if kill_after_s is not None and now - started >= kill_after_s and (kill_after_s > 0 or self._delivered()):
                    return ended(killed_after_s=now - started, returncode=self.kill())
                if now >= deadline:
                    unsent = self._unsent_note()
                    return ended(timed_out=True, returncode=self.kill(),
                                 error=f"no answer within {self.call_timeout_s:g}s{unsent}")
                wake = deadline if kill_after_s is None else min(deadline, started + kill_after_s)
                ready = self._select(selector, max(0.0, wake - now))
                if "events" in ready and events is not None:
                    if note(events.read()):
                        return ended(killed_at=kill_at, returncode=self.kill())
                    events.release()
                answer = self._answer(ready, request_id, f"tools/call {name}")
                if answer is not None:
                    if events is not None:
                        note(events.read())
                        events.release()
                    ok, error = _outcome(answer)
                    return ended(ok=ok, error=error, text=answer_text(answer))


def server_info(result: dict[str, Any], what: str) -> ServerInfo:
    """The server's name, version and protocol from an ``initialize`` result; ServerError if it is not MCP's."""
    import mcp_types

    try:
        parsed = mcp_types.InitializeResult.model_validate(result)
    except ValueError as error:
        raise ServerError(f"its {what} result is not MCP's: {str(error)[:300]}") from None
    return ServerInfo(parsed.server_info.name, parsed.server_info.version, parsed.protocol_version)


class ServerProcess:
    """One server process in its own session and cgroup; its stderr goes to ``stderr_path`` (its tail explains a death).

    With ``stdio`` its stdin and stdout are pipes (the stdio transport);
    without, its stdout goes where its stderr goes (it is reached over HTTP).
    """

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str], stderr_path: Path, stdio: bool) -> None:
        self.argv, self.stderr_path = argv, stderr_path
        # ``npx PACKAGE ...``: the bin npx would run, resolved once per session (``npx``), not at every start
        self.started_argv, env = npx.started(argv, cwd, env)
        self.cgroup = IncarnationCgroup.create()
        if self.cgroup is None:
            _say_no_cgroups()
        self.returncode: int | None = None
        try:
            with stderr_path.open("wb") as stderr, preexec_joiner(self.cgroup) as join_cgroup:
                self.process = subprocess.Popen(self.started_argv, cwd=cwd, env=env,
                                                stdin=subprocess.PIPE if stdio else subprocess.DEVNULL,
                                                stdout=subprocess.PIPE if stdio else stderr, stderr=stderr,
                                                start_new_session=True, preexec_fn=join_cgroup)
        except (OSError, subprocess.SubprocessError) as error:  # only the cgroup's preexec_fn raises the latter
            if self.cgroup is not None:
                self.cgroup.discard()
            why = error.strerror if isinstance(error, OSError) else "it could not join its cgroup"
            raise ServerError(f"cannot start {self.started_argv[0]!r}: {why or error}") from None

    @property
    def session_pid(self) -> int | None:
        return self.process.pid

    def _death(self, when: str) -> str:
        try:
            code = self.process.wait(timeout=2.0)
            how = f"exited with code {code}" if code >= 0 else f"was killed by signal {-code}"
        except subprocess.TimeoutExpired:
            how = "closed its stdout"
        tail = self.stderr_tail()
        return f"the server {how} {when}" + (f"; its stderr ends: {tail}" if tail else "")

    def stderr_tail(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace").strip()[-400:]
        except OSError:
            return ""

    def kill(self) -> int | None:
        """SIGKILL everything the server started now, reap the server, confirm the rest dead; its return code.

        With a cgroup, one write kills every process in it at once. Without, the
        group is stopped first (one signal, no ``/proc`` walk before it), so the
        server writes nothing more while ``kill_tree`` finds every member.
        """
        if self.returncode is None and self.cgroup is not None:
            self.cgroup.signal(expected=lambda pid: True)
            self.returncode = self._reap()
            self.cgroup.confirm_empty()
        elif self.returncode is None:
            try:
                os.killpg(self.process.pid, signal.SIGSTOP)
            except (ProcessLookupError, PermissionError):
                pass
            self.returncode = kill_tree(self.process.pid, self._reap)
        return self.returncode

    def _reap(self) -> int:
        try:
            return self.process.wait(timeout=CONFIRM_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise KillFailed(f"MCP server pid {self.process.pid} was not reaped {CONFIRM_TIMEOUT_S}s after SIGKILL") from None

    def close(self) -> None:
        """End the server on every path: killed with its tree if it runs, its group swept if it exited."""
        try:
            if self.process.poll() is None:
                self.kill()
            else:
                self.returncode = self.process.returncode
                if self.cgroup is not None:
                    self.cgroup.discard()
                else:
                    kill_stragglers(self.process.pid)
        finally:
            for pipe in (self.process.stdin, self.process.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass

    @property
    def alive(self) -> bool:
        return self.returncode is None and self.process.poll() is None


class McpServer(ServerProcess, McpClient):
    """A stdio server: newline-delimited JSON-RPC on its stdin and stdout."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str], stderr_path: Path,
                 call_timeout_s: float) -> None:
        super().__init__(argv, cwd=cwd, env=env, stderr_path=stderr_path, stdio=True)
        self.call_timeout_s = call_timeout_s
        assert self.process.stdin is not None and self.process.stdout is not None
        self._stdin, self._stdout = self.process.stdin.fileno(), self.process.stdout.fileno()
        os.set_blocking(self._stdin, False)  # a server that stops reading must not block the client (the outbox)
        self._outbox = bytearray()
        self._pending = b""
        self._next_id = 0
        self.info: ServerInfo | None = None  # set by initialize
        self._initialize_id: int | None = None
        self.used = False

    # ------------------------------------------------------------------ the protocol
    def send_initialize(self) -> None:
        """Ask the server to initialize, without waiting: a spare server starts while a trial runs."""
        if self._initialize_id is None:
            self._initialize_id = self._begin("initialize", {
                "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                "clientInfo": {"name": "killpoint-certify", "version": "1"}})

    def initialize(self) -> ServerInfo:
        """Finish the handshake (``initialize``, then ``notifications/initialized``); once."""
        if self.info is not None:
            return self.info
        self.send_initialize()
        assert self._initialize_id is not None
        result = self._request(self._initialize_id, self.call_timeout_s, "initialize")
        info = server_info(result, "initialize")
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.info = info
        return info

    # ------------------------------------------------------------------ JSON-RPC over the pipes
    def _send(self, message: dict[str, Any]) -> None:
        """Queue the message in the outbox and write what the server's stdin takes now, never waiting for it."""
        data = (json.dumps(message, ensure_ascii=False) + "\n").encode()
        if len(self._outbox) + len(data) > MAX_UNREAD_BYTES:
            raise ServerError(f"it does not read its stdin: {len(self._outbox)} bytes sent to it wait unread "
                              f"(at most {MAX_UNREAD_BYTES >> 20} MiB may)")
        self._outbox += data
        self._flush()

    def _flush(self) -> None:
        try:
            while self._outbox:
                del self._outbox[:os.write(self._stdin, self._outbox)]
        except BlockingIOError:  # the pipe is full: the rest goes when ``_select`` finds it writable
            pass
        except OSError:
            raise ServerError(self._death("before it read the request")) from None

    def _select(self, selector: selectors.BaseSelector, timeout: float) -> set[str]:
        """Wait up to ``timeout`` for stdout and what ``selector`` watches, writing the outbox as the server reads."""
        watching = selector.get_map()
        if self._stdout not in watching:
            selector.register(self._stdout, selectors.EVENT_READ, "stdout")
        if self._outbox and self._stdin not in watching:
            selector.register(self._stdin, selectors.EVENT_WRITE, "stdin")
        elif self._stdin in watching and not self._outbox:
            selector.unregister(self._stdin)
        ready = {key.data for key, _ in selector.select(timeout=timeout)}
        if "stdin" in ready:
            self._flush()
        return ready

    def _begin(self, method: str, params: dict[str, Any]) -> int:
        self._next_id += 1
        self._send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def _delivered(self) -> bool:
        return not self._outbox

    def _unsent_note(self) -> str:
        return f" (and it had not read {len(self._outbox)} bytes sent to it)" if self._outbox else ""

    def _answer(self, ready: set[str], request_id: int, what: str) -> dict[str, Any] | None:
        return self._read_answer(request_id, what) if "stdout" in ready else None

    def _read_answer(self, request_id: int, what: str) -> dict[str, Any] | None:
        """Read what stdout holds; the answer to ``request_id`` if it came (requests to us are refused)."""
        chunk = os.read(self._stdout, 1 << 20)
        if not chunk:
            raise ServerError(self._death(f"before it answered {what}"))
        self._pending += chunk
        if b"\n" not in chunk:
            if len(self._pending) > MAX_LINE_BYTES:
                raise ServerError(f"it printed a line of more than {MAX_LINE_BYTES >> 20} MiB on stdout while "
                                  f"killpoint waited for its answer to {what}")
            return None
        *lines, self._pending = self._pending.split(b"\n")
        answer = None
        for line in filter(bytes.strip, lines):
            message = parse_message(line)
            if "method" in message and "id" in message:  # a request to the client: we offer no capabilities
                self._send({"jsonrpc": "2.0", "id": message["id"],
                            "error": {"code": METHOD_NOT_FOUND, "message": "killpoint certify offers no client features"}})
            elif message.get("id") == request_id:
                answer = message
        return answer


def parse_message(line: bytes, where: str = "a line that is not JSON-RPC on stdout (an MCP stdio server writes only "
                                       "messages there)") -> dict[str, Any]:
    """One line of the server's stdout (or one HTTP answer) as a JSON-RPC message; ServerError for anything else.

    ``where`` says what was printed where, when it is not JSON: the transport's words.
    """
    try:
        message = json.loads(line)
    except RecursionError:  # the C decoder counts its nesting against the recursion limit
        raise ServerError(f"it printed a message nested deeper than {MAX_DEPTH} levels (too deep to parse): "
                          f"{line[:60].decode(errors='replace')!r}...") from None
    except ValueError:
        raise ServerError(f"it printed {where}: {line[:200].decode(errors='replace')!r}") from None
    if not isinstance(message, dict):
        raise ServerError(f"it printed a JSON-RPC message that is not an object: {line[:200]!r}")
    if _nesting(message) > MAX_DEPTH:
        raise ServerError(f"it printed a message nested deeper than {MAX_DEPTH} levels: "
                          f"{line[:60].decode(errors='replace')!r}...")
    return message


def _nesting(value: Any) -> int:
    """How deep lists and objects nest in ``value``, counted without recursion, stopping once past MAX_DEPTH."""
    deepest, stack = 0, [(value, 1)]
    while stack and deepest <= MAX_DEPTH:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack += [(child, depth + 1) for child in children if isinstance(child, (dict, list))]
    return deepest


@functools.cache
def _say_no_cgroups() -> None:
    """Once per process, where servers cannot have cgroups: what the fallback misses."""
    print("killpoint certify: no cgroup per MCP server (see above); a server's processes are found by walking its "
          "process tree and its process group, so one that double-forks and calls setsid can outlive certify",
          file=sys.stderr)


def _outcome(answer: dict[str, Any]) -> tuple[bool, str | None]:
    """(ok, error) of a ``tools/call`` answer: a JSON-RPC error or ``isError: true`` is a refused call."""
    if "error" in answer:
        return False, error_text(answer["error"])
    result = answer.get("result") or {}
    if not result.get("isError"):
        return True, None
    texts = [item.get("text", "") for item in result.get("content", []) if isinstance(item, dict)]
    return False, (" ".join(texts).strip() or "isError: true")[:300]


def answer_text(answer: dict[str, Any]) -> str:
    """A ``tools/call`` answer's content as one text: its ``structuredContent`` as JSON if any, else its texts."""
    result = answer.get("result") or {}
    if "structuredContent" in result:
        return json.dumps(result["structuredContent"], sort_keys=True, ensure_ascii=False)
    return "\n".join(str(item.get("text", "")) for item in result.get("content") or [] if isinstance(item, dict))


def error_text(error: Any) -> str:
    if isinstance(error, dict):
        return f"{error.get('code')}: {str(error.get('message'))[:300]}"
    return json.dumps(error)[:300]
