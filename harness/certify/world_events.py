"""Changes to a world folder as they happen (Linux inotify), and the server held at each open and write it makes.

Why inotify: an MCP server in Node or Python cannot be instrumented the way
``points.Instrumented`` patches a Python tool, but every write it makes to the
world is a kernel event. A watcher readable in the same ``select`` loop as the
server's stdout gives the kill points: each change, in order.

Why holds too (``world_holds``): inotify says what changed only after the fact,
and the kill it prompts lands when the scheduler lets it. With a hold, the
server's next open or write in the world sleeps in the kernel until ``read``'s
caller has seen every change queued before it and called ``release`` (or killed
the server instead). So a kill at a change lands before the server's next open
or write in the world, whatever the load: exact when that is what follows the
change (a file created by ``open(O_CREAT)`` is killed at its creation, empty;
a write in parts between two parts), and still "at or just after" when a
rename, unlink or mkdir follows with no open or write between.
"""

from __future__ import annotations

import ctypes
import os
import struct
from pathlib import Path

from killpoint.harness.certify.janitor import close_later
from killpoint.harness.certify.world_holds import Holds, available

IN_MODIFY, IN_ATTRIB, IN_MOVED_FROM, IN_MOVED_TO = 0x2, 0x4, 0x40, 0x80
IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_ISDIR = 0x100, 0x200, 0x400, 0x40000000
WATCHED = IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then len bytes of name)
_NAMES = ((IN_CREATE, "create"), (IN_MODIFY, "modify"), (IN_MOVED_FROM, "move from"), (IN_MOVED_TO, "move to"),
          (IN_DELETE, "delete"))
BEST_EFFORT = ("best-effort: fanotify is refused here (it needs CAP_SYS_ADMIN), so a kill at a change was sent on "
               "reading inotify's event and may have landed after the server went further")


def kills_at_changes() -> str:
    """How a kill at a change lands on this machine, in the words a certificate records."""
    how = available()
    if how is None:
        return BEST_EFFORT
    return f"held ({how}): before the server's next open or write in the world"


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


class WorldEvents:
    """Recursive watches on a folder; ``read()`` returns the labels of the changes since the last read.

    With ``session`` (the server's, a session leader's pid) and fanotify allowed,
    that session's opens and writes in the world are held until ``release()``:
    the caller reads, decides whether the point it waits for has come, and
    either kills the server or releases it. New folders get a watch and a mark
    as soon as their creation is read, so changes inside them count too (a
    change racing ahead of that read is missed, and is not held).
    """

    def __init__(self, root: Path, session: int | None = None) -> None:
        self.root = root
        self.fd = _libc().inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.holds = Holds(session) if session is not None and available() else None
        self._folders: dict[int, str] = {}
        self._watch(root)
        for folder in sorted(path for path in root.rglob("*") if path.is_dir() and not path.is_symlink()):
            self._watch(folder)

    @property
    def fds(self) -> tuple[int, ...]:
        """What to ``select`` on: inotify's fd, and the hold's."""
        return (self.fd,) if self.holds is None else (self.fd, self.holds.fd)

    @property
    def held(self) -> bool:
        """Does the server wait for ``release`` at its opens and writes (else a kill is best-effort)?"""
        return self.holds is not None

    def _watch(self, folder: Path) -> None:
        wd = _libc().inotify_add_watch(self.fd, os.fsencode(folder), WATCHED)
        if wd >= 0:
            relative = folder.relative_to(self.root).as_posix()
            self._folders[wd] = "" if relative == "." else relative + "/"
            if self.holds is not None:
                self.holds.mark(folder)

    def read(self) -> list[str]:
        """Every change queued so far, as ``"create a.txt"``, ``"modify sub/b.txt"``, ...; [] when none.

        The holds are taken first: an open or write held now came after every
        change inotify has queued, so the labels returned are all the server
        did before the syscall it is held at.
        """
        if self.holds is not None:
            self.holds.read()
        labels: list[str] = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return labels
            labels += self._labels(data)

    def _labels(self, data: bytes) -> list[str]:
        labels, offset = [], 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
            name = data[offset + _EVENT.size:offset + _EVENT.size + length].rstrip(b"\0").decode(errors="replace")
            offset += _EVENT.size + length
            path = self._folders.get(wd, "?/") + name
            if mask & (IN_CREATE | IN_MOVED_TO) and mask & IN_ISDIR:
                self._watch(self.root / path)
            what = next((word for flag, word in _NAMES if mask & flag), None)
            if what is not None:
                labels.append(f"{what} {path}")
        return labels

    def release(self) -> None:
        """Let the server go on from the open or write it is held at (none: nothing to do)."""
        if self.holds is not None:
            self.holds.release()

    def close(self) -> None:
        """Stop watching; whatever is still held goes on (a killed server's is gone with it).

        The holds end now: a held opener must not wait. The inotify instance is
        closed by the janitor, off the trial's path: its close waits out a
        kernel grace period (``janitor``), and nothing reads it again.
        """
        if self.holds is not None:
            self.holds.close()
        close_later(self.fd)
