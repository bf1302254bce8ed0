"""The fork server: a warm interpreter that forks one child per workload incarnation.

Started by ``killpoint.harness.backends.forkserver`` as ``_forkserver_main FD PARENT_PID``
with one end of a socketpair on descriptor FD. Requests and answers are JSON lines:

    -> {"module": "killpoint.scenarios.reference_runtime", "argv": [...], "env": {...}, "cwd": ..., "stdout": ..., "stderr": ...,
        "cgroup": "/sys/fs/cgroup/.../killpoint-PID-N" or null}
    <- {"pid": 1234}                       once the child exists
    <- {"error": "clone3 into cgroup ..."} when it could not be created
    <- {"pid": 1234, "exit_code": 0}       once it has exited (or been killed) and is reaped

Before the first fork of a workload the server imports its module and compiles
its ``__main__`` (so every child starts warm); it runs the module's top level,
never its ``__main__`` part (for a package, ``python -m PACKAGE``: the package,
then its ``__main__`` module, compiled, not run). Of what that import loaded,
the workload's own modules (killpoint's scenarios, and the project's own code
outside its installed libraries) are forgotten again, because they may read the
protocol environment when imported and the server has none: each child imports
them anew, under its own. A module that cannot even be imported without it
(``os.environ["KILLPOINT_TOOLS_URL"]`` at its top level, an SDK client made
there that wants its key) is not warmed at all: what its import loaded before
it failed stays warm, and each child imports the rest. A workload's module that sets ``__killpoint_warm__ =
True`` says it does not (it only defines) and stays warm, if its package does
too. Everything else stays warm. A child gets a clean state: its own session
and process group, no descriptor but 0, 1 and 2 (stdin /dev/null, stdout and
stderr into the run directory), the protocol environment, a reseeded ``random``,
default signal handlers, and no threads (the server has none). It is born in
the request's cgroup (``fork_into``), so not one line of it runs outside. The
server asks the kernel to SIGKILL it if the harness dies, so it never outlives it.
"""

from __future__ import annotations

import ast
import builtins
import ctypes
import functools
import importlib
import importlib.util
import json
import os
import random
import selectors
import signal
import sys
import sysconfig
import traceback
import types
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from types import CodeType
from typing import Any

PR_SET_PDEATHSIG = 1
SYS_CLONE3 = 435  # the same number on every architecture
CLONE_INTO_CGROUP = 0x200000000


class CloneArgs(ctypes.Structure):
    """``struct clone_args`` (linux/sched.h) up to its ``cgroup`` field."""

    _fields_ = [(name, ctypes.c_uint64) for name in (
        "flags", "pidfd", "child_tid", "parent_tid", "exit_signal", "stack", "stack_size", "tls",
        "set_tid", "set_tid_size", "cgroup")]


_libc = ctypes.PyDLL(None, use_errno=True)  # PyDLL: the call holds the GIL, as os.fork's fork() does
_libc.syscall.restype = ctypes.c_long


def fork_into(cgroup: str | None) -> int:
    """``os.fork()``, the child born in ``cgroup`` (a directory of the cgroup v2 hierarchy) when one is given.

    Moving a running child into a cgroup waits for an RCU grace period (milliseconds, every
    time); clone3 with CLONE_INTO_CGROUP puts it there as it is created, for a few tens of
    microseconds more than a fork. Around the raw syscall the interpreter does what os.fork
    does (PyOS_BeforeFork, PyOS_AfterFork_Child/Parent: locks, at-fork hooks, threads); glibc's
    own fork handlers do not run, which a single-threaded server does not need.
    """
    if cgroup is None:
        return os.fork()
    directory = os.open(cgroup, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    args = CloneArgs(flags=CLONE_INTO_CGROUP, exit_signal=signal.SIGCHLD, cgroup=directory)
    ctypes.pythonapi.PyOS_BeforeFork()
    pid = _libc.syscall(ctypes.c_long(SYS_CLONE3), ctypes.byref(args), ctypes.c_size_t(ctypes.sizeof(args)))
    error = ctypes.get_errno()
    if pid == 0:
        ctypes.pythonapi.PyOS_AfterFork_Child()
    else:
        ctypes.pythonapi.PyOS_AfterFork_Parent()
    os.close(directory)
    if pid < 0:
        raise OSError(error, f"clone3 into cgroup {cgroup}: {os.strerror(error)}")
    return pid


@dataclass(frozen=True)
class Program:
    """A workload's ``__main__``, compiled once in the server and run by every child.

    Without a valid bytecode cache (PYTHONDONTWRITEBYTECODE, a read-only tree)
    ``runpy`` would compile the module in every child: 2-3 ms of a ~10 ms incarnation.
    """

    code: CodeType
    file: str
    spec: ModuleSpec | None


@functools.cache
def program(module: str | None, script: str | None) -> Program:
    """The compiled ``__main__`` of ``module``, else of ``script`` (a request names one of them)."""
    if module is not None:
        loaded_before = set(sys.modules)
        try:
            importlib.import_module(module)  # its imports, warm in every fork
        except Exception:  # noqa: BLE001 - it wants its environment at import: each child imports it, cold
            if importlib.util.find_spec(module) is None:  # no such module: the child says so, as python would
                raise
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations is not None:  # a package runs its __main__
            module = f"{module}.__main__"
            spec = importlib.util.find_spec(module)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "get_code"):
            raise ImportError(f"no module named {module!r} that can run as __main__")
        code = spec.loader.get_code(module)
        _forget_the_workloads_own(loaded_before)
        _warm_first_use(code)
        return Program(code, spec.origin or module, spec)
    if script is None:
        raise ValueError("a fork request names neither a module nor a script")
    with open(script, "rb") as source:
        tree = ast.parse(source.read(), script)
    _warm_libraries(tree)
    code = compile(tree, script, "exec")
    _warm_first_use(code)
    return Program(code, script, None)


def _warm_libraries(tree: ast.Module) -> None:
    """Import here the installed libraries a script imports (LangGraph, DBOS, an agents SDK: a second of every
    incarnation), never the script's own modules.

    A script cannot be imported without running it, so its ``import`` statements
    are read instead. Only a library whose top-level package is installed (the
    interpreter's own or site-packages, or killpoint's) is imported: a module of the
    user's project may act when imported, under an environment the server does not
    have. One that fails to import here is left for each child to import.
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            if name not in sys.modules and _installed(name.partition(".")[0]):
                _import_warm(name)


# The HTTP stack under httpx2, which a model SDK's client loads at its first request. LangGraph loads httpx2
# too, but sends nothing: the stack is warmed for the model SDKs only.
HTTP_STACK = ("httpcore2", "h11", "truststore", "anyio._backends._asyncio", "anyio.streams.tls")
# What an installed library imports only once it is used, by the library: the model provider a Pydantic AI
# ``Agent("openai:...")`` names and its price table, the OpenAI client's resources and streams at its first
# request, the HTTP stack under a model SDK, DBOS's SQLite system database. A child would import them in every
# incarnation (0.8 s of one that builds a Pydantic AI OpenAI model, 1 s for Anthropic's; 0.2 s of an OpenAI
# Agents SDK's), so the server imports them once their library is warm (``_warm_first_use``): the libraries
# killpoint's extras pin (pyproject.toml). In order: a library's entry comes before those of the libraries
# its own imports load (Pydantic AI's provider modules load openai or anthropic).
FIRST_USE_IMPORTS: dict[str, tuple[str, ...]] = {
    "pydantic_ai": ("genai_prices.data",),
    "openai": ("openai.resources.responses.responses", "openai.resources.chat.completions.completions",
               "openai.lib.streaming.responses", "openai.lib.streaming.chat", "openai.pagination", *HTTP_STACK),
    "anthropic": HTTP_STACK,
    "dbos": ("dbos._sys_db_sqlite", "sqlalchemy.dialects.sqlite"),
}
# Pydantic AI's model providers, by the prefix of the model string that makes ``Agent`` import them. Each
# costs the server its import (Anthropic's SDK 1 s, its thousands of modules), so only the providers the
# workload's code names are imported.
MODEL_PROVIDERS: dict[str, tuple[str, ...]] = {
    "openai:": ("pydantic_ai.models.openai", "pydantic_ai.providers.openai"),
    "anthropic:": ("pydantic_ai.models.anthropic", "pydantic_ai.providers.anthropic"),
}


def _warm_first_use(code: CodeType) -> None:
    """Import here what the warm libraries will import at their first use: the model providers the workload's
    ``__main__`` (``code``) names, then ``FIRST_USE_IMPORTS``; one that is not installed or fails to import is
    left for each child, as before."""
    if "pydantic_ai" in sys.modules:
        strings = _strings(code)
        for prefix, modules in MODEL_PROVIDERS.items():
            if any(string.startswith(prefix) for string in strings):
                _import_all_warm(modules)
    for library, modules in FIRST_USE_IMPORTS.items():
        if library in sys.modules:
            _import_all_warm(modules)


def _strings(code: CodeType) -> set[str]:
    """The string constants of ``code`` and of every function and class body in it."""
    strings = {constant for constant in code.co_consts if isinstance(constant, str)}
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            strings |= _strings(constant)
    return strings


def _import_all_warm(modules: tuple[str, ...]) -> None:
    """``_import_warm`` each of ``modules`` not imported yet."""
    for name in modules:
        if name not in sys.modules:
            _import_warm(name)


def _import_warm(name: str) -> None:
    """Import installed library ``name`` so every fork inherits it, keeping of what it loads only what may stay
    warm; one that fails to import (it wants its environment, or is not installed) is left for each child."""
    loaded_before = set(sys.modules)
    try:
        importlib.import_module(name)
    except Exception:  # noqa: BLE001 - it wants its environment at import: each child imports it, cold
        pass
    _forget_the_workloads_own(loaded_before)


def _forget_the_workloads_own(loaded_before: set[str]) -> None:
    """Unimport what was imported since ``loaded_before`` that may not stay warm (``_stays_warm``), and every
    module of a package forgotten so."""
    forgotten: set[str] = set()
    for name in sorted(set(sys.modules) - loaded_before):  # a package before its modules
        if name.rpartition(".")[0] in forgotten or not _stays_warm(name, sys.modules[name]):
            forgotten.add(name)
    for name in forgotten:
        _forget(name)


def _installed(package: str) -> bool:
    """Whether top-level ``package`` is an installed library (or killpoint's own), found without importing it."""
    if package == "killpoint":
        return True
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return False
    if spec is None or spec.origin is None:  # not found, or a namespace package (its parts may be anywhere)
        return False
    return spec.origin in ("built-in", "frozen") or os.path.realpath(spec.origin).startswith(_INSTALLED)


_INSTALLED = tuple({os.path.realpath(sysconfig.get_path(kind)) + os.sep
                    for kind in ("stdlib", "platstdlib", "purelib", "platlib")})


def _stays_warm(name: str, module: types.ModuleType | None) -> bool:
    """A module a child may inherit imported: all but the workload's own (killpoint's scenarios, and what the
    project the harness runs in holds outside its installed libraries) that do not declare ``__killpoint_warm__``.

    A workload's own module may read ``os.environ`` at import, which in the
    server is not the protocol environment. Every other module stays warm: a
    library imported twice in one process (a C extension that refuses a second
    initialisation, or classes that exist twice) would break the workload.
    """
    if getattr(module, "__killpoint_warm__", False) is True:
        return True
    if name.startswith("killpoint."):
        return not name.startswith("killpoint.scenarios")
    where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", ())), None)
    if where is None:  # built into the interpreter
        return True
    where = os.path.realpath(where)
    return where.startswith(_INSTALLED) or not where.startswith(os.path.realpath(os.getcwd()) + os.sep)


def _forget(name: str) -> None:
    """Unimport ``name``: out of ``sys.modules``, and off its package, whose attribute ``from`` would find."""
    del sys.modules[name]
    package, _, leaf = name.rpartition(".")
    if package in sys.modules and getattr(sys.modules[package], leaf, None) is not None:
        delattr(sys.modules[package], leaf)


def _run_as_main(target: Program) -> None:
    """What ``python -m MODULE`` / ``python SCRIPT`` do with a compiled ``__main__``."""
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=target.file, __builtins__=builtins, __spec__=target.spec,
                         __loader__=target.spec.loader if target.spec else None,
                         __package__=target.spec.parent if target.spec else None)
    sys.modules["__main__"] = main
    sys.argv[0] = target.file
    exec(target.code, main.__dict__)


def _become_environment(wanted: dict[str, str]) -> None:
    """Make ``os.environ`` (and the C environment) exactly ``wanted``, touching only what differs.

    A child inherits the server's environment, which is the harness's: most of
    ``wanted``. Clearing and refilling it costs a putenv per variable, about a
    millisecond of every incarnation.
    """
    for name in [name for name in os.environ if name not in wanted]:
        del os.environ[name]
    for name, value in wanted.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


def _child(request: dict[str, Any], target: Program | BaseException) -> None:
    """Become the workload; never returns."""
    code = 1
    try:
        os.setsid()
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(signum, signal.SIG_DFL)
        stdin = os.open(os.devnull, os.O_RDONLY)
        # Made fresh by the harness; never followed if swapped for a link since (O_NOFOLLOW fails on one).
        stdout = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        stderr = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        for opened, standard in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(opened, standard)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.chdir(request["cwd"])
        _become_environment(request["env"])
        random.seed()
        sys.argv = list(request["argv"])
        if isinstance(target, OSError) and request.get("script"):  # python's own words and status
            print(f"{sys.executable}: can't open file {request['script']!r}: [Errno {target.errno}] "
                  f"{target.strerror}", file=sys.stderr)
            code = 2
        elif isinstance(target, BaseException):  # the interpreter's own words before running anything
            print(f"{sys.executable}: " + "".join(traceback.format_exception_only(target)).strip(), file=sys.stderr)
        else:
            _run_as_main(target)
            code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if exit_.code is not None and not isinstance(exit_.code, int):
            print(exit_.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - the workload's crash is its exit status, as in a real process
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def serve(control: Any) -> None:
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ, None)
    reader = control.makefile("rb")
    children: dict[int, int] = {}  # pidfd -> pid
    while True:
        for key, _ in selector.select():
            if key.data is None:
                line = reader.readline()
                if not line:
                    return
                request = json.loads(line)
                target: Program | Exception
                try:
                    target = program(request.get("module"), request.get("script"))  # warm: the fork inherits it
                except Exception as error:  # noqa: BLE001 - the child reports it and exits 1, as python would
                    target = error
                sys.stdout.flush()
                sys.stderr.flush()
                try:
                    pid = fork_into(request.get("cgroup"))
                except OSError as error:
                    control.sendall(json.dumps({"error": str(error)}).encode() + b"\n")
                    continue
                if pid == 0:
                    _child(request, target)
                pidfd = os.pidfd_open(pid)
                children[pidfd] = pid
                selector.register(pidfd, selectors.EVENT_READ, pid)
                control.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            else:
                selector.unregister(key.fd)
                os.close(key.fd)
                pid = children.pop(key.fd)
                _, status = os.waitpid(pid, 0)
                control.sendall(json.dumps({"pid": pid, "exit_code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies; exit now if the parent already has.

    A harness SIGKILLed mid-session cannot stop its helpers, and they would live
    on with ppid 1. The death signal is armed first, then the parent checked:
    a parent gone between this process's start and the arming is caught too.
    """
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(0)


def main() -> None:
    die_with_parent(int(sys.argv[2]))
    # A Ctrl-C reaches the terminal's whole process group; the harness process that started this
    # server handles it and stops the server by closing its socket (or by its own death).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import socket

    serve(socket.socket(fileno=int(sys.argv[1])))


if __name__ == "__main__":
    main()
