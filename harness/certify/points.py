"""Kill points inside a tool, and the pipe protocol that stops a child exactly at one of them.

Why points and not a timer: a SIGKILL after a seeded delay lands wherever the
scheduler happens to be, so the same seed would not give the same
certificate. Instead the child announces each point over a pipe and waits for
the parent's "go"; the parent answers every point but the chosen one, where it
SIGKILLs the child's process group and whole process tree (the nemesis's
``kill_tree``) while the child is blocked there, reaps it, and confirms
every other member dead before it goes on. The world is then exactly "every
write before point K done, none after".

A Python tool gets its points without cooperating: ``Instrumented`` wraps the
write primitives (``open`` for writing and each ``write`` on it, ``os.replace``,
``os.rename``, ``os.unlink``, ``os.mkdir``, ...) and announces a point before
each one that touches the world, plus one at return. A command declares its own
points by running ``"$KILLPOINT_POINT" LABEL`` (a script this module writes);
a command that declares none is killed after a seeded delay instead.

Gotcha: buffered file data reaches the disk only at flush or close, so a kill
before a later ``write`` loses earlier unflushed writes, as a real SIGKILL does.
"""

from __future__ import annotations

import builtins
import io
import os
import selectors
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from killpoint.harness.execute._process_tree import CONFIRM_TIMEOUT_S, KillFailed, kill_stragglers, kill_tree

OnPoint = Callable[[str], None]
ENV_POINT_SCRIPT = "KILLPOINT_POINT"
ENV_POINT_FDS = "KILLPOINT_POINT_FDS"
RETURN_LABEL = "return"
_WRITE_MODES = set("wax+")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# (os function, how many leading arguments are paths)
_PATH_PRIMITIVES = (("replace", 2), ("rename", 2), ("unlink", 1), ("remove", 1), ("mkdir", 1), ("rmdir", 1),
                    ("symlink", 2), ("link", 2), ("truncate", 1), ("utime", 1))


class _PointedFile:
    """A file opened for writing in the world: a point before each ``write``."""

    def __init__(self, raw: Any, relative: str, announce: OnPoint) -> None:
        self._raw, self._relative, self._announce = raw, relative, announce

    def write(self, data: Any) -> Any:
        self._announce(f"write {self._relative}")
        return self._raw.write(data)

    def writelines(self, lines: Any) -> None:
        self._announce(f"write {self._relative}")
        self._raw.writelines(lines)

    def __enter__(self) -> _PointedFile:
        return self

    def __exit__(self, *exc_info: object) -> Any:
        return self._raw.__exit__(*exc_info)

    def __iter__(self) -> Any:
        return iter(self._raw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class Instrumented:
    """Context manager: while inside, every write primitive under ``world`` first calls ``on_point(label)``.

    Not thread-safe (it patches ``os``, ``io.open`` and ``builtins.open``
    process-wide); certification runs one tool call at a time.
    """

    def __init__(self, world: Path, on_point: OnPoint) -> None:
        self.root = os.path.abspath(world)
        self.on_point = on_point
        self.labels: list[str] = []
        self._saved: list[tuple[Any, str, Any]] = []
        self._fds: set[int] = set()

    def announce(self, label: str) -> None:
        self.labels.append(label)
        self.on_point(label)

    def _relative(self, path: Any, dir_fd: int | None = None) -> str | None:
        """``path`` relative to the world when inside it, else None; a ``dir_fd`` path is read from that folder."""
        if isinstance(path, int):
            return None
        try:
            name = os.fsdecode(os.fspath(path))
        except TypeError:
            return None
        if dir_fd is not None:  # the fake world opens folder by folder (fake_tools/world.py): name is in dir_fd
            name = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), name)
        absolute = os.path.abspath(name)
        if absolute == self.root or absolute.startswith(self.root + os.sep):
            return os.path.relpath(absolute, self.root)
        return None

    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        self._saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)

    def _path_primitive(self, name: str, paths: int) -> Callable[..., Any]:
        real = getattr(os, name)

        def primitive(*args: Any, **kwargs: Any) -> Any:
            folders = [kwargs.get("src_dir_fd", kwargs.get("dir_fd")), kwargs.get("dst_dir_fd", kwargs.get("dir_fd"))]
            touched = [rel for rel in map(self._relative, args[:paths], folders) if rel is not None]
            if touched:
                self.announce(f"{name} {' -> '.join(touched)}")
            return real(*args, **kwargs)

        return primitive

    def __enter__(self) -> Instrumented:
        for name, paths in _PATH_PRIMITIVES:
            self._patch(os, name, self._path_primitive(name, paths))
        real_os_open, real_write, real_close, real_open = os.open, os.write, os.close, io.open

        def os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            relative = self._relative(path, kwargs.get("dir_fd")) if flags & _WRITE_FLAGS else None
            if relative is not None:
                self.announce(f"open {relative}")
            fd = real_os_open(path, flags, *args, **kwargs)
            if relative is not None:
                self._fds.add(fd)
            return fd

        def os_write(fd: int, data: Any) -> int:
            if fd in self._fds:
                self.announce(f"write fd {fd}")
            return real_write(fd, data)

        def os_close(fd: int) -> None:
            self._fds.discard(fd)
            real_close(fd)

        def open_(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            relative = self._relative(file) if _WRITE_MODES & set(mode) else None
            if relative is None:
                return real_open(file, mode, *args, **kwargs)
            self.announce(f"open({mode}) {relative}")
            return _PointedFile(real_open(file, mode, *args, **kwargs), relative, self.announce)

        for owner, name, replacement in ((os, "open", os_open), (os, "write", os_write), (os, "close", os_close),
                                         (io, "open", open_), (builtins, "open", open_)):
            self._patch(owner, name, replacement)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for owner, name, real in reversed(self._saved):
            setattr(owner, name, real)
        self._saved.clear()


def count_only(label: str) -> None:
    """An ``on_point`` that never stops: for an uninterrupted reference call, which only counts its points."""


class PipePoints:
    """The child's side: announce a point on one pipe, then wait for "go" on the other."""

    def __init__(self, out_fd: int, in_fd: int) -> None:
        self.out_fd, self.in_fd = out_fd, in_fd

    @classmethod
    def from_environ(cls) -> PipePoints:
        out_fd, in_fd = (int(fd) for fd in os.environ[ENV_POINT_FDS].split(","))
        return cls(out_fd, in_fd)

    def __call__(self, label: str) -> None:
        os.write(self.out_fd, (label.replace("\n", " ") + "\n").encode())
        os.read(self.in_fd, 3)  # "go\n"; a kill ends us here


@dataclass(frozen=True)
class ChildRun:
    """What happened to one child: where it was killed (if it was), or how it ended."""

    labels: tuple[str, ...]       # every point it announced, in order
    killed_at: int | None         # 1-based point at which it was killed; None if it was not
    killed_after_s: float | None  # for a timed kill
    returncode: int | None
    seconds: float
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False


@dataclass(frozen=True)
class Child:
    """A started child as ``drive`` sees it: its pid (a session leader), its point pipe ends, what to watch."""

    pid: int
    points_in: int                           # the parent reads announcements here
    points_out: int                          # and answers "go" here
    watch: dict[str, int]                    # output name -> fd to collect; "exit" -> an fd readable once it ended
    reap: Callable[[float], int | None]      # wait up to that long; the return code, None if still alive (call once)
    close: Callable[[], None]                # release the parent's ends


def point_script(folder: Path, out_fd: int, in_fd: int) -> Path:
    """A POSIX sh script a command runs at each point: ``"$KILLPOINT_POINT" LABEL``.

    It uses ``/dev/fd/N`` because dash cannot redirect to a descriptor above 9.
    """
    script = folder / "killpoint-point.sh"
    script.write_text("#!/bin/sh\n# killpoint certify: announce a kill point, then wait for the word to go on.\n"
                      f"printf '%s\\n' \"${{*:-point}}\" > /dev/fd/{out_fd}\n"
                      f"read -r killpoint_reply < /dev/fd/{in_fd}\n")
    script.chmod(0o755)
    return script


def start_command(argv: list[str], *, cwd: Path, env: dict[str, str], stdin: str, scratch: Path) -> Child:
    """Start ``argv`` in a new session with the point pipes and ``$KILLPOINT_POINT``; feed it ``stdin``."""
    up_read, up_write = os.pipe()
    down_read, down_write = os.pipe()
    script = point_script(scratch, up_write, down_read)
    child_env = {**env, ENV_POINT_SCRIPT: str(script), ENV_POINT_FDS: f"{up_write},{down_read}"}
    try:
        process = subprocess.Popen(argv, cwd=cwd, env=child_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, pass_fds=(up_write, down_read), start_new_session=True)
    except OSError:
        for fd in (up_read, up_write, down_read, down_write):
            os.close(fd)
        raise
    os.close(up_write)
    os.close(down_read)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    try:
        process.stdin.write(stdin.encode())
        process.stdin.close()
    except BrokenPipeError:
        pass  # a child that never reads its stdin

    def reap(seconds: float) -> int | None:
        try:
            return process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None

    def close() -> None:
        os.close(up_read)
        os.close(down_write)
        process.stdout.close()  # type: ignore[union-attr]
        process.stderr.close()  # type: ignore[union-attr]

    return Child(process.pid, up_read, down_write, {"stdout": process.stdout.fileno(), "stderr": process.stderr.fileno()},
                 reap, close)


def drive(child: Child, *, kill_at: int | None = None, kill_after_s: float | None = None,
          timeout_s: float = 30.0) -> ChildRun:
    """Answer the child's points; SIGKILL its tree at point ``kill_at``, after ``kill_after_s`` or past ``timeout_s``.

    On every path the child is reaped when this returns, and after a kill every
    process of its tree is dead too (a child left blocked at a point would be
    released by the closing pipe and run on). A child that ends on its own has
    whatever it left in its process group killed, as the run backends do.
    Raises ``KillFailed`` when a kill cannot be confirmed.
    """
    started = time.monotonic()
    labels: list[str] = []
    outputs: dict[str, bytes] = {name: b"" for name in child.watch if name != "exit"}
    killed_at: int | None = None
    killed_after: float | None = None
    returncode: int | None = None
    timed_out = False
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(child.points_in, selectors.EVENT_READ, "points")
            for name, fd in child.watch.items():
                selector.register(fd, selectors.EVENT_READ, name)
            pending, ended = b"", False
            while selector.get_map() and not ended and killed_at is None and killed_after is None and not timed_out:
                elapsed = time.monotonic() - started
                if kill_after_s is not None and elapsed >= kill_after_s:
                    returncode = _kill(child)
                    killed_after = elapsed
                    break
                timed_out = elapsed > timeout_s
                wake = min(timeout_s, timeout_s if kill_after_s is None else kill_after_s)
                for key, _ in selector.select(timeout=max(0.0, wake - elapsed)):
                    chunk = b"" if key.data == "exit" else os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fd)
                        ended = ended or key.data == "exit"  # it is gone: nothing more will come
                    elif key.data != "points":
                        outputs[key.data] += chunk
                    else:
                        pending += chunk
                        while b"\n" in pending and killed_at is None:
                            line, pending = pending.split(b"\n", 1)
                            labels.append(line.decode(errors="replace"))
                            if len(labels) == kill_at:
                                returncode = _kill(child)
                                killed_at = len(labels)
                            else:
                                os.write(child.points_out, b"go\n")
        if returncode is None and not timed_out:  # it ended on its own (or closed everything we watch)
            returncode = child.reap(timeout_s)
            timed_out = returncode is None
            if returncode is not None:
                kill_stragglers(child.pid)
        if returncode is None:
            returncode = _kill(child)
    except KillFailed:
        raise  # the kill did all a kill can; killing again could only reach a reused pid
    except BaseException:
        if returncode is None:
            _kill(child)
        raise
    finally:
        child.close()
    return ChildRun(tuple(labels), killed_at, killed_after, returncode, time.monotonic() - started,
                    outputs.get("stdout", b"").decode(errors="replace"),
                    outputs.get("stderr", b"").decode(errors="replace"), timed_out)


def _kill(child: Child) -> int:
    """SIGKILL the child's process group and whole tree, reap it, confirm the rest dead; its return code.

    The kill is the nemesis's own (``_process_tree.kill_tree``); the leader is
    proved dead by its reap (ours, or the fork server's report).
    """

    def reap() -> int:
        returncode = child.reap(CONFIRM_TIMEOUT_S)
        if returncode is None:
            raise KillFailed(f"pid {child.pid} was not reaped {CONFIRM_TIMEOUT_S}s after SIGKILL")
        return returncode

    return kill_tree(child.pid, reap)
