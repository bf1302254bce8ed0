"""Running one store read in a child process: a deadline kept from outside, no privileges, a JSON answer.

Reading a SQLite store hands the workload's bytes to SQLite, which acts on
them: it plays a hot rollback journal back (writing and deleting files), and
whatever it does takes as long as the bytes make it take. So the read runs in
a child forked from the harness, which

- is killed at ``READ_SECONDS`` and reaped, whatever it is blocked in: the
  harness waits on a pipe with a timeout, never on SQLite;
- runs as ``nobody`` (when the harness is root), in the private folder it is
  handed and owns, with no new privileges: a file SQLite is made to write or
  delete can only be one of the private copy's (or one anybody may change);
- has its memory and file sizes bounded, holds none of the harness's files,
  and dies with the harness (``PR_SET_PDEATHSIG``);
- answers with the durable state as JSON, never a pickle: the harness takes
  nothing from the child but that shape, checked.

The gotcha: as nobody, the child may be unable to read the harness's own
installation (a Python under /root), so a read imports nothing: what it needs
is imported before the fork (``_langgraph.msgpack_module``).

Forked, not started afresh: the child inherits the reader and the plan as
they are (nothing to send). Measured on a loaded 2-core machine, a read costs
about 20 ms this way (7 ms of it the fork of a harness-sized process), where
it cost 1 ms in the harness, and a new interpreter importing the readers
costs 2 s. A session forks about twice a run (the copy at the kill, the final
one; ``_sqlite_copy`` keeps clean reads): langgraph_graph_sync --exhaustive
forked 34 reads, 0.7 s of its 4 to 6 s.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

from killpoint.harness._safe_files import remove_tree
from killpoint.harness.judge.stores._store_file import StoreUnreadable
from killpoint.harness.model import DurableState, StepRecord

# The whole read (copy written, journal played back, every query): past this the child is killed.
READ_SECONDS = 20.0
# The user and group the child reads as when the harness is root: nobody/nogroup, who own nothing.
NOBODY = 65534
# What the child may allocate beyond the harness's own address space, and the largest file it may write.
MEMORY_LIMIT_BYTES = 1 << 30
FILE_LIMIT_BYTES = 256 * 1024 * 1024
# An answer is a state whose quotes are cut short: past this it is not read.
ANSWER_LIMIT_BYTES = 8 * 1024 * 1024
PRIVATE_PREFIX = "killpoint-store-"
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38


@contextlib.contextmanager
def private_folder() -> Iterator[Path]:
    """A new folder for one read's private copy; removed when done, whatever the child left in it."""
    parent = Path(tempfile.gettempdir())
    if os.geteuid() == 0 and not all(os.stat(part).st_mode & stat.S_IXOTH for part in (parent, *parent.parents)):
        raise StoreUnreadable(f"the temporary folder {parent} is closed to nobody, the user the store's reader "
                              "runs as; set TMPDIR to a folder anybody may pass through, such as /tmp")
    # Imported here: reading a scenario loads the store readers, and must load no process machinery (psutil).
    from killpoint.harness.execute.leftovers import owner_prefix

    try:  # named with its owner, so `killpoint clean` removes it once a SIGKILLed harness is gone, and only then
        folder = Path(tempfile.mkdtemp(prefix=owner_prefix(PRIVATE_PREFIX), dir=parent))
    except OSError as error:
        raise StoreUnreadable(f"no private folder to copy the store into ({error})") from None
    try:
        yield folder
    finally:
        remove_tree(folder)


def read_in_child(folder: Path, read: Callable[[], DurableState], records_start: bool) -> DurableState:
    """``read()`` run in a confined child that owns ``folder``; its state, or why there is none (unreadable)."""
    if os.geteuid() == 0:
        for path in (folder, *folder.iterdir()):  # the harness's own fresh copy: nothing there to follow
            os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    answer_end, child_end = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(answer_end)
        _child(child_end, folder, parent, read)
    os.close(child_end)
    deadline = time.monotonic() + READ_SECONDS
    try:
        answer, why = _collect(answer_end, deadline)
        status = _reap(pid, deadline)
    finally:
        os.close(answer_end)
        _kill(pid)
    if answer is None:
        return DurableState.unreadable(records_start, why or f"the store's reader {_ended(status)} with no answer")
    return _decoded(answer, records_start)


def _child(answer: int, folder: Path, parent: int, read: Callable[[], DurableState]) -> NoReturn:
    """The child's whole life: confine itself, read, write the answer, exit (never back to the caller); a child
    that cannot confine itself reads nothing and exits with 1."""
    code = 1
    try:
        _confine(answer, folder, parent)
        try:
            state = read()
        except MemoryError:
            state = DurableState.unreadable(False, f"the store's reader ran out of its "
                                                   f"{MEMORY_LIMIT_BYTES >> 20} MiB memory limit")
        except Exception as error:  # noqa: BLE001 - whatever went wrong is said, as the store being unreadable
            state = DurableState.unreadable(False, f"the store's reader failed: {type(error).__name__}: {error}")
        _write_all(answer, _encoded(state))
        code = 0
    finally:
        os._exit(code)


def _confine(answer: int, folder: Path, parent: int) -> None:
    """Leave the harness's signal handlers and files, bound memory and file sizes, and become nobody in
    ``folder``; exit if the harness is already gone."""
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)
    os.closerange(3, answer)
    os.closerange(answer + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    address_space = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (address_space + MEMORY_LIMIT_BYTES,) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT_BYTES,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.chdir(folder)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # after setuid, which clears it
    if os.getppid() != parent:
        os._exit(1)


def _collect(answer: int, deadline: float) -> tuple[bytes | None, str | None]:
    """The child's whole answer, read until it closes its end; None and why when it runs past the deadline
    or says too much."""
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([answer], [], [], left)[0]:
            return None, (f"the store's reader ran past {READ_SECONDS:g} s and was killed "
                          "(SQLite was kept busy or blocked by what the store holds)")
        chunk = os.read(answer, 1 << 16)
        if not chunk:
            return b"".join(chunks) or None, None
        chunks.append(chunk)
        size += len(chunk)
        if size > ANSWER_LIMIT_BYTES:
            return None, f"the store's reader answered over {ANSWER_LIMIT_BYTES} bytes; it was not read"


def _reap(pid: int, deadline: float) -> int | None:
    """The child's wait status once it exits, or None if it is still alive at the deadline."""
    pause = 0.0005
    while True:
        reaped, status = os.waitpid(pid, os.WNOHANG)
        if reaped:
            return status
        if time.monotonic() > deadline:
            return None
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _kill(pid: int) -> None:
    """Kill and reap the child if it is still there (a child already reaped is left alone)."""
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _ended(status: int | None) -> str:
    if status is None:
        return "was still running at its deadline, was killed,"
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with {os.waitstatus_to_exitcode(status)}"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _encoded(state: DurableState) -> bytes:
    return json.dumps({"records": [[step.call, step.status, step.quote] for step in state.records.values()],
                       "records_start": state.records_start, "completed": state.completed,
                       "problems": list(state.problems), "notes": list(state.notes)}).encode()


def _decoded(answer: bytes, records_start: bool) -> DurableState:
    """The state the child answered; unreadable when the answer is not one (a child made to say anything else)."""
    try:
        data: Any = json.loads(answer)
        records = {call: StepRecord(call, status, quote) for call, status, quote in data["records"]
                   if all(isinstance(value, str) for value in (call, status, quote))}
        completed = data["completed"]
        problems, notes = tuple(data["problems"]), tuple(data["notes"])
        if (len(records) != len(data["records"]) or completed not in (True, False, None)
                or not all(isinstance(text, str) for text in problems + notes)):
            raise TypeError("a field of the wrong type")
    except (ValueError, TypeError, KeyError) as error:
        return DurableState.unreadable(records_start, f"the store's reader gave no state ({error})")
    if problems:
        return DurableState.unreadable(records_start, *problems)
    return DurableState(records, records_start, completed, notes=notes)
