"""Reading and appending to files a workload could have replaced, without trusting what is there.

The harness runs as root and reads and writes files inside run directories
that the workload under test can write too. A hostile or broken workload may
have swapped a file for a symlink to a host file, a FIFO (an ``open`` that never
returns), a socket or a directory, or made it huge. Every such access goes
through here: the last path component is opened with ``O_NOFOLLOW`` and
``O_NONBLOCK`` (a FIFO opens at once instead of hanging), the opened object
must be a regular file, and reads are bounded. What is refused raises
``UntrustedFile`` with the reason, for the caller to report.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

from killpoint.errors import InternalError

# Evidence files past this size are not read whole: no honest run writes that much.
READ_LIMIT_BYTES = 64 * 1024 * 1024
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC  # a copy: never opened if it exists
# Sees a file being copied (its path relative to the tree, with "/", and its bytes); what is wrong, if anything.
Screen = Callable[[str, bytes], "str | None"]


class UntrustedFile(InternalError, OSError):
    """A workload-writable path that is not a regular file of bounded size; the message says why."""


def open_regular(path: Path, flags: int = os.O_RDONLY) -> int:
    """An fd on ``path`` itself (never a symlink's target), which must be a regular file (made, with O_CREAT)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UntrustedFile(f"{path.name} is a symlink; it was not followed") from None
        if error.errno == errno.ENXIO:  # a socket, or a FIFO opened for writing with no reader
            raise UntrustedFile(f"{path.name} is not a regular file (a socket or FIFO)") from None
        raise
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode) or status.st_nlink > 1:
        os.close(fd)
        mode = status.st_mode
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "not a regular file" if not stat.S_ISREG(mode)
                else f"a file with {status.st_nlink} hard links (it may be a file outside the run)")
        raise UntrustedFile(f"{path.name} is {kind}; it was not read")
    os.set_blocking(fd, True)
    return fd


def read_bounded(path: Path, limit: int = READ_LIMIT_BYTES) -> bytes:
    """The bytes of a regular file no larger than ``limit``; FileNotFoundError when it is absent."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise UntrustedFile(f"{path.name} holds {size} bytes, over the {limit}-byte limit; it was not read")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:  # grew while being read
            raise UntrustedFile(f"{path.name} grew past the {limit}-byte limit while being read")
        return data
    finally:
        os.close(fd)


def append_own_line(path: Path, line: Callable[[bool], bytes]) -> bool:
    """Append the line ``line(unterminated)`` (ending in a newline) so that it starts a line of its own.

    A workload killed mid-write leaves a last line with no newline; gluing the
    harness's record onto it would lose both. ``unterminated`` says whether
    such a line was found (it is closed with a newline first), so that the
    record can say so; it is also returned.
    """
    fd = open_regular(path, os.O_RDWR | os.O_APPEND)
    try:
        size = os.fstat(fd).st_size
        unterminated = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        os.write(fd, (b"\n" if unterminated else b"") + line(unterminated))
        return unterminated
    finally:
        os.close(fd)


def copy_evidence(source: Path, copy: Path) -> None:
    """Copy a workload-written file into the evidence as a new file of the harness's own; absent -> empty copy.

    The copy is created (never opened if it exists: no planted link is
    written through) and readable by all, as evidence is; the source is read
    as ``read_bounded`` reads it.
    """
    try:
        data = read_bounded(source)
    except FileNotFoundError:
        data = b""
    _write_all(os.open(copy, _NEW_FILE, 0o644), data)


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` to ``fd`` whole, then close it."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


REMOVE_PASSES = 3  # a folder something keeps writing in is walked again, at most this many times in all


def remove_tree(root: Path) -> None:
    """Remove ``root`` and everything in it, holding one folder open at a time and following no link.

    ``shutil.rmtree`` recurses once per level: a workload that nests a few
    thousand folders deep makes it raise RecursionError (and it would need a
    descriptor per level). This walks down and back up through ``..`` instead.
    A folder that gains an entry while it is emptied (a process still writing
    there) is walked again, ``REMOVE_PASSES`` times in all; then the OSError
    (ENOTEMPTY) is raised.
    """
    for passes_left in reversed(range(REMOVE_PASSES)):
        try:
            _remove_tree_once(root)
            return
        except OSError as error:
            if error.errno != errno.ENOTEMPTY or not passes_left:
                raise


def _remove_tree_once(root: Path) -> None:
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    except (NotADirectoryError, OSError) as error:
        if isinstance(error, NotADirectoryError) or error.errno == errno.ELOOP:
            os.unlink(root)
            return
        raise
    below: list[str] = []  # the names from root down to the folder ``fd`` holds
    try:
        while True:
            with os.scandir(fd) as entries:
                folder = None
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        folder = entry.name
                        break
                    os.unlink(entry.name, dir_fd=fd)
            if folder is not None:
                inner = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = inner
                below.append(folder)
                continue
            if not below:
                break
            parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(below.pop(), dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(root)


# A tree copy (a power loss's storage, a scratch run's evidence) stops here: no honest runtime keeps more,
# and a hostile one must not fill the disk through us.
COPY_MAX_FILES = 2000  # files, and folders
COPY_MAX_BYTES = 256 * 1024 * 1024
COPY_MAX_DEPTH = 32


def copy_tree(source: Path, copy: Path, *, screen: Screen | None = None) -> list[str]:
    """Copy the regular files and folders under ``source`` into the folder ``copy``; what was left out, and why.

    ``copy`` is made if absent; a file already in it is never overwritten (each
    copy is created new, and a clash is said). Walks without following links (a
    symlink is recorded by its target's text, never read through), opens every
    file as ``copy_evidence`` does (no FIFO blocks it; a file with a second hard
    link may be a file outside, so it is not read), leaves out a file past
    ``READ_LIMIT_BYTES`` and goes on, and stops at ``COPY_MAX_FILES`` files or
    ``COPY_MAX_BYTES``. ``screen`` sees each file's path (relative, with ``/``)
    and bytes as they are copied, and says what is wrong with them, if anything.
    """
    try:
        copy.mkdir()
    except FileExistsError:
        if not stat.S_ISDIR(os.lstat(copy).st_mode):  # a link planted there is never copied through
            raise
    problems: list[str] = []
    files = size = folders = 0
    below: list[tuple[str, int]] = [("", 0)]  # folders still to copy: relative path, depth
    while below:
        relative, depth = below.pop()
        folder = os.path.join(source, relative)
        folders += 1
        if folders > COPY_MAX_FILES:
            problems.append(f"the copy stopped at {COPY_MAX_FILES} folders, before {folder.rstrip(os.sep)}")
            return problems
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as error:
            problems.append(f"{error.filename} could not be listed: {error.strerror or error}")
            continue
        for entry in entries:
            shown = f"{relative}/{entry.name}" if relative else entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth + 1 > COPY_MAX_DEPTH:
                        problems.append(f"{shown} is nested past {COPY_MAX_DEPTH} folders; not copied")
                    else:
                        os.mkdir(os.path.join(copy, shown))
                        below.append((shown, depth + 1))
                    continue
                if entry.is_symlink():
                    problems.append(f"{shown} is a symlink to {os.readlink(entry.path)!r}; not followed")
                    continue
                if not entry.is_file(follow_symlinks=False):
                    problems.append(f"{shown} is not a regular file; not copied")
                    continue
                length = entry.stat(follow_symlinks=False).st_size
            except OSError as error:  # listed, then gone: said, never a crash of the strike
                problems.append(f"{shown} could not be read: {error.strerror or error}")
                continue
            if length > READ_LIMIT_BYTES:  # never read: it must not stop the copy
                problems.append(f"{shown} holds {length} bytes, over the {READ_LIMIT_BYTES}-byte limit; not copied")
                continue
            files += 1
            size += length
            if files > COPY_MAX_FILES or size > COPY_MAX_BYTES:
                problems.append(f"the copy stopped at {COPY_MAX_FILES} files or {COPY_MAX_BYTES} bytes, "
                                f"before {shown}")
                return problems
            try:
                data = read_bounded(Path(entry.path))
                if screen is not None and (said := screen(shown, data)) is not None:
                    problems.append(f"{shown}: {said}")
                    continue
                _write_all(os.open(os.path.join(copy, shown), _NEW_FILE, 0o644), data)
            except (UntrustedFile, OSError) as refusal:
                problems.append(f"{shown}: {refusal}")
    return problems


def fresh_file(path: Path) -> int:
    """A write descriptor on a new, empty regular file at ``path``, whatever the workload left there.

    An incarnation's output logs are made in a folder the workload writes to,
    and it may have planted the next one's name as a symlink to a host file (or a
    FIFO): opening that would truncate the file, or hang. The entry is removed
    (never followed) and the file created anew with ``O_EXCL``; a folder planted
    there is refused with the OSError of its removal.
    """
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)


def fresh_folder(path: Path) -> None:
    """A real folder at ``path``, whatever the workload left there: a symlink, FIFO or file planted at that name
    is removed (never followed) and the folder made; a folder already there is kept."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            return
        os.unlink(path)
    except FileNotFoundError:
        pass
    os.mkdir(path, 0o755)


def write_fresh(path: Path, data: bytes) -> None:
    """Write ``data`` as the whole of a new regular file at ``path`` (``fresh_file``)."""
    _write_all(fresh_file(path), data)
