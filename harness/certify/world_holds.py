"""Hold a process tree in the kernel at each open and write it makes in a world (Linux fanotify permission events).

Why: inotify reports a change only after it happened, and a SIGKILL sent on
reading it lands when the scheduler lets the certifier run; a server that
creates ``a.txt.<hex>.tmp``, writes it and renames it over ``a.txt`` in well
under a millisecond has done all three by then on a loaded machine. A
permission event is different: the opener (or writer) sleeps in the kernel
until the group answers, so the certifier can read every change queued before
it, decide to kill, and kill while the server cannot go on.

The group is ``FAN_CLASS_PRE_CONTENT`` with ``FAN_OPEN_PERM | FAN_PRE_ACCESS``
where the kernel has it (6.14+; ``FAN_PRE_ACCESS`` comes before every read and
write of a file's content, on file systems that allow it), else
``FAN_CLASS_CONTENT`` with ``FAN_OPEN_PERM`` only. The marks are inode marks on
each folder of the world with ``FAN_EVENT_ON_CHILD``: nothing outside the world
is ever held. Only the tree's events are held (the processes of the server's
session); any other process's are allowed at once, and closing the group allows
whatever is still held, so nothing can hang on it; but the certifier must not
open a world file itself while a group is live, since its open would wait for
the read its own thread is to make. Needs ``CAP_SYS_ADMIN``;
``available()`` says whether this process has it (an unprivileged run falls back
to inotify alone, and its certificates say the kills at a change were best-effort).
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from collections.abc import Callable
from functools import cache
from pathlib import Path

FAN_CLOEXEC, FAN_NONBLOCK = 0x1, 0x2
FAN_CLASS_CONTENT, FAN_CLASS_PRE_CONTENT = 0x4, 0x8
FAN_MARK_ADD, FAN_MARK_DONT_FOLLOW, FAN_MARK_ONLYDIR = 0x1, 0x4, 0x8
FAN_OPEN_PERM, FAN_PRE_ACCESS, FAN_Q_OVERFLOW, FAN_EVENT_ON_CHILD = 0x10000, 0x100000, 0x4000, 0x08000000
FAN_ALLOW, FAN_NOFD, FANOTIFY_METADATA_VERSION = 0x1, -1, 3
AT_FDCWD = -100
_METADATA = struct.Struct("=IBBHQii")  # struct fanotify_event_metadata: event_len, vers, reserved, metadata_len, mask, fd, pid
_RESPONSE = struct.Struct("=iI")       # struct fanotify_response: fd, response
# The kinds tried, strongest first: (fanotify_init class, the events marked, how a certificate names it).
KINDS = ((FAN_CLASS_PRE_CONTENT, FAN_OPEN_PERM | FAN_PRE_ACCESS, "fanotify FAN_OPEN_PERM and FAN_PRE_ACCESS"),
         (FAN_CLASS_CONTENT, FAN_OPEN_PERM, "fanotify FAN_OPEN_PERM"))


@cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
    libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]
    return libc


def _group(kind: tuple[int, int, str]) -> int:
    """A new fanotify group of ``kind``'s class, non-blocking; OSError if the kernel refuses it."""
    fd = _libc().fanotify_init(kind[0] | FAN_CLOEXEC | FAN_NONBLOCK,
                               os.O_RDONLY | os.O_CLOEXEC | os.O_LARGEFILE | os.O_NONBLOCK)
    if fd < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"fanotify_init: {os.strerror(error)}")
    return fd


def _mark(group: int, mask: int, folder: Path | int) -> int:
    """Mark ``folder`` (never through a symlink; a folder's open descriptor: the folder it is); 0, or the errno the
    kernel refused it with."""
    flags = FAN_MARK_ADD | FAN_MARK_DONT_FOLLOW | FAN_MARK_ONLYDIR
    where, path = (folder, None) if isinstance(folder, int) else (AT_FDCWD, os.fsencode(folder))
    if _libc().fanotify_mark(group, flags, mask | FAN_EVENT_ON_CHILD, where, path) == 0:
        return 0
    return ctypes.get_errno()


@cache
def _kind() -> tuple[int, int, str] | None:
    """The strongest kind of hold this kernel and this process allow, on a folder of this machine's temp file system."""
    import tempfile

    probe = Path(tempfile.mkdtemp(prefix="killpoint-holds-"))
    try:
        for kind in KINDS:
            try:
                group = _group(kind)
            except OSError:
                continue
            try:
                if _mark(group, kind[1], probe) == 0:
                    return kind
            finally:
                os.close(group)
        return None
    finally:
        probe.rmdir()


def available() -> str | None:
    """How a tree can be held here (the certificate's words), or None when fanotify is refused."""
    kind = _kind()
    return None if kind is None else kind[2]


class Holds:
    """A fanotify group holding the opens (and writes, where it can) that session ``session`` makes in marked folders
    (or, given ``holding``, the processes it says yes to).

    ``read()`` takes what is queued: the session's events stay held (their
    processes asleep in the kernel) until ``release()``; every other event is
    allowed before ``read`` returns. ``close()`` ends the group, which allows
    anything still held.
    """

    def __init__(self, session: int, holding: Callable[[int], bool] | None = None) -> None:
        kind = _kind()
        if kind is None:
            raise OSError(errno.EPERM, "fanotify is refused here")
        self.session, self.mask = session, kind[1]
        self.holding = holding or self._in_session
        self.fd = _group(kind)
        self.held: list[int] = []  # the event fds of the held events, answered by ``release``

    def mark(self, folder: Path | int) -> None:
        """Hold opens of the files in ``folder`` (a path, or an open folder's descriptor) too (a folder already
        gone, or a symlink, is not marked); opens alone on a file system that refuses FAN_PRE_ACCESS (tmpfs,
        where a run's scratch folders are)."""
        if _mark(self.fd, self.mask, folder) == errno.EOPNOTSUPP and self.mask != FAN_OPEN_PERM:
            _mark(self.fd, FAN_OPEN_PERM, folder)

    def read(self, batches: int = 16) -> int:
        """Take the queued events, ``batches`` reads of them at most (the rest wait for the next call): hold the
        session's, allow the rest; how many are held now."""
        for _ in range(batches):
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return len(self.held)
            offset = 0
            while offset + _METADATA.size <= len(data):
                length, version, _, _, mask, fd, pid = _METADATA.unpack_from(data, offset)
                offset += max(length, _METADATA.size)
                if version != FANOTIFY_METADATA_VERSION or fd == FAN_NOFD or mask & FAN_Q_OVERFLOW:
                    continue
                if self.holding(pid):
                    self.held.append(fd)
                else:
                    self._answer(fd)
        return len(self.held)

    def held_path(self, index: int) -> str | None:
        """The path of the ``index``th held event's file, as the kernel names it; None when it cannot be read."""
        try:
            return os.readlink(f"/proc/self/fd/{self.held[index]}")
        except (OSError, IndexError):
            return None

    def release(self) -> None:
        """Let every held opener and writer go on."""
        while self.held:
            self._answer(self.held.pop(0))

    def close(self) -> None:
        """End the group: what is still held is allowed by the kernel (or was killed meanwhile)."""
        while self.held:
            os.close(self.held.pop())
        os.close(self.fd)

    def _in_session(self, pid: int) -> bool:
        try:
            return os.getsid(pid) == self.session
        except OSError:  # gone already: nothing to hold
            return False

    def _answer(self, fd: int) -> None:
        try:
            os.write(self.fd, _RESPONSE.pack(fd, FAN_ALLOW))
        except OSError:  # its process was killed while it waited: the kernel dropped the event
            pass
        finally:
            os.close(fd)
