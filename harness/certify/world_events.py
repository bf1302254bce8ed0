"""Changes to a world folder as they happen (Linux inotify), so a server can be SIGKILLed the moment it writes.

Why inotify: an MCP server in Node or Python cannot be instrumented the way
``points.Instrumented`` patches a Python tool, but every write it makes to the
world is a kernel event. A watcher readable in the same ``select`` loop as the
server's stdout lets the kill land microseconds after the N-th event: "at or just
after" that write, since the server keeps running until the signal arrives.
"""

from __future__ import annotations

import ctypes
import os
import struct
from pathlib import Path

IN_MODIFY, IN_ATTRIB, IN_MOVED_FROM, IN_MOVED_TO = 0x2, 0x4, 0x40, 0x80
IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_ISDIR = 0x100, 0x200, 0x400, 0x40000000
WATCHED = IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then len bytes of name)
_NAMES = ((IN_CREATE, "create"), (IN_MODIFY, "modify"), (IN_MOVED_FROM, "move from"), (IN_MOVED_TO, "move to"),
          (IN_DELETE, "delete"))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


class WorldEvents:
    """Recursive watches on a folder; ``read()`` returns the labels of the changes since the last read.

    New folders get a watch as soon as their creation is read, so writes inside
    them count too (a write racing ahead of that read is missed: a kill point
    the certifier can still reach by a seeded delay).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fd = _libc().inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self._folders: dict[int, str] = {}
        self._watch(root)
        for folder in sorted(path for path in root.rglob("*") if path.is_dir() and not path.is_symlink()):
            self._watch(folder)

    def _watch(self, folder: Path) -> None:
        wd = _libc().inotify_add_watch(self.fd, os.fsencode(folder), WATCHED)
        if wd >= 0:
            relative = folder.relative_to(self.root).as_posix()
            self._folders[wd] = "" if relative == "." else relative + "/"

    def read(self) -> list[str]:
        """Every change queued so far, as ``"create a.txt"``, ``"modify sub/b.txt"``, ...; [] when none."""
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return []
        labels, offset = [], 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
            name = data[offset + _EVENT.size:offset + _EVENT.size + length].rstrip(b"\0").decode(errors="replace")
            offset += _EVENT.size + length
            path = self._folders.get(wd, "?/") + name
            if mask & IN_CREATE and mask & IN_ISDIR:
                self._watch(self.root / path)
            what = next((word for flag, word in _NAMES if mask & flag), None)
            if what is not None:
                labels.append(f"{what} {path}")
        return labels

    def close(self) -> None:
        os.close(self.fd)
