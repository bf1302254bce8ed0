"""The fake world: a sandboxed directory of plain, diffable files.

``files/`` is the device's file system as the agent sees it; ``state/AREA.json``
holds the state of each simulated service (screen, alarms, shell history, ...).
Every path a tool is given resolves inside ``files/``; anything that would leave
it (``..``, an absolute path, a symlink pointing out) is refused.

The world is a host folder that the workload, and anything else on the host,
can write, while the harness reads it as root: so no access here follows a
symlink (folders are opened one name at a time below an open folder), opens a
FIFO, socket or device, touches a file with a second hard link (it may be a
file outside the world), or reads without a bound. The harness reuses this
module's ``snapshot``; it is stdlib-only and imports nothing of the harness.
"""

from __future__ import annotations

import copy
import difflib
import errno
import hashlib
import itertools
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from killpoint.errors import InternalError


class SandboxError(InternalError, ValueError):
    """A path argument would leave the world's sandbox, or names what the world must not open."""


# A file a tool reads is taken whole; no honest world holds one this large.
TOOL_READ_LIMIT = 64 * 1024 * 1024
# The snapshot keeps a file's text up to this size, streams a larger one through sha256 up to
# SNAPSHOT_HASH_LIMIT, and above it records the size alone; it reads and holds at most
# SNAPSHOT_BYTES in all (names included) and lists at most SNAPSHOT_ENTRIES entries,
# SNAPSHOT_DEPTH folders deep. Past a limit the entry says so, so the world differs from any
# world within the limits; what lies past it is not compared.
SNAPSHOT_TEXT_LIMIT = 1024 * 1024
SNAPSHOT_HASH_LIMIT = 64 * 1024 * 1024
SNAPSHOT_BYTES = 256 * 1024 * 1024
SNAPSHOT_ENTRIES = 10_000
SNAPSHOT_DEPTH = 32
# A changed entry longer than this is summarised, not diffed.
DIFF_LINE_LIMIT = 2000
_CHUNK = 1024 * 1024

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO opens at once (and is then refused) instead of blocking until a writer comes.
_FILE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISBLK, "a block device"), (stat.S_ISCHR, "a character device"))


def _kind(mode: int) -> str | None:
    """What a file of this mode is, in words, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def _refuse_unless_plain(status: os.stat_result, label: str) -> None:
    """Refuse anything but a regular file with one name: a hard link may be a file outside the world."""
    kind = _kind(status.st_mode)
    if kind is not None:
        raise SandboxError(f"path {label!r} refused: it is {kind}, not a regular file")
    if status.st_nlink > 1:
        raise SandboxError(f"path {label!r} refused: it has {status.st_nlink} hard links, so it may be a file "
                           "outside the world")


def _exists(folder: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _fsync_folder(path: Path) -> None:
    fd = os.open(path, _FOLDER)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open_folder(base: Path, names: tuple[str, ...], label: str, *, create: bool = False,
                 durable: bool = False) -> int:
    """An fd on ``base/names...``, each folder opened without following a symlink (created first if ``create``).

    Checking a path and then opening it leaves a window in which a folder can be
    swapped for a symlink; opening one name at a time below an open folder does not.
    """
    if create and not os.path.lexists(base):
        base.mkdir(parents=True)
        if durable:
            _fsync_folder(base.parent)
    try:
        folder = os.open(base, _FOLDER)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise SandboxError(f"path {label!r} refused: the world's {base.name}/ is a symlink") from None
        raise
    try:
        for name in names:
            if create:
                try:
                    os.mkdir(name, dir_fd=folder)
                    if durable:  # the new folder's name lives in its parent
                        os.fsync(folder)
                except FileExistsError:
                    pass
            try:
                inner = os.open(name, _FOLDER, dir_fd=folder)
            except OSError as error:
                if error.errno == errno.ELOOP:
                    raise SandboxError(f"path {label!r} refused: {name!r} on the way is a symlink") from None
                raise
            os.close(folder)
            folder = inner
    except BaseException:
        os.close(folder)
        raise
    return folder


def _open_plain(folder: int, name: str, flags: int, label: str) -> int:
    """An fd on the regular, singly linked file ``name`` in ``folder``; never a symlink's target, a FIFO or a device.

    The file is looked at before it is opened (nothing else is ever opened) and
    again after, and must be the same file both times.
    """
    try:
        before: os.stat_result | None = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
        before = None
    if before is not None:
        _refuse_unless_plain(before, label)
    try:
        fd = os.open(name, flags | _FILE, 0o666, dir_fd=folder)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENXIO):
            raise SandboxError(f"path {label!r} refused: it was swapped for a symlink, FIFO or socket") from None
        raise
    try:
        after = os.fstat(fd)
        _refuse_unless_plain(after, label)
        if before is not None and not os.path.samestat(before, after):
            raise SandboxError(f"path {label!r} refused: it was replaced while being opened")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _chunks(fd: int, limit: int, label: str) -> Iterator[bytes]:
    """The bytes of ``fd`` in bounded chunks, refusing a file larger than ``limit`` (or one that grows past it)."""
    size = os.fstat(fd).st_size
    if size > limit:
        raise SandboxError(f"path {label!r} refused: it holds {size} bytes, over the {limit}-byte limit")
    total = 0
    while chunk := os.read(fd, _CHUNK):
        total += len(chunk)
        if total > limit:
            raise SandboxError(f"path {label!r} refused: it grew past the {limit}-byte limit while being read")
        yield chunk


def _read_plain(folder: int, name: str, label: str) -> bytes:
    fd = _open_plain(folder, name, os.O_RDONLY, label)
    try:
        return b"".join(_chunks(fd, TOOL_READ_LIMIT, label))
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    """os.write until every byte is written (a write may take part of them)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _replace_plain(folder: int, name: str, data: bytes, label: str, durable: bool = False) -> None:
    """Write ``data`` to a temporary file and rename it over ``name``: a kill leaves the old file or the new.

    The temporary name is fixed, so the next write reuses what a kill left; it is
    removed only when it is a file of its own, and created exclusively, never
    through a symlink. A rename replaces the name, never a hard-linked file's content.
    ``durable``: the file is fsynced before the rename and the folder after it,
    so a power loss leaves the old file or the new one too.
    """
    temporary = f".{name}.tmp"
    try:
        _refuse_unless_plain(os.stat(temporary, dir_fd=folder, follow_symlinks=False), f"{label} (its temporary file)")
        os.unlink(temporary, dir_fd=folder)
    except FileNotFoundError:
        pass
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                 dir_fd=folder)
    try:
        _write_all(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    if durable:
        os.fsync(folder)


class World:
    """One fake world rooted at ``root``; cheap to create, holds no open files.

    Tools reach the world's files through its methods only: each walks from
    ``files/`` one name at a time and never follows a symlink, and each opens a
    regular file with a single name alone (``_open_plain``).
    """

    def __init__(self, root: str | os.PathLike[str], *, durable: bool = False) -> None:
        self.root = Path(root)
        # Every change fsynced (the file, and the folder whose names changed): the world is on a device
        # that a power loss drops from, and its tools must be durable there.
        self.durable = durable
        self.files_root = self.root / "files"
        self.state_root = self.root / "state"
        self._held: int | None = None

    @classmethod
    def held(cls, root: str | os.PathLike[str], *, durable: bool = False) -> World:
        """The world in the folder at ``root`` now, opened without following a link and kept open until ``close``.

        For a world served by a process an agent cannot reach (the harness's tool service): the agent can
        write the folder *holding* the world, and rename the world away and plant a symlink at its name.
        ``O_NOFOLLOW`` guards each name below the world's top; this guards the top itself, for every path is
        taken from the descriptor (``/proc/self/fd/N``), never from the name again. A symlink or anything but
        a folder at ``root`` raises OSError (ELOOP, ENOTDIR).
        """
        fd = os.open(root, _FOLDER)
        world = cls(f"/proc/self/fd/{fd}", durable=durable)
        world._held = fd
        return world

    def close(self) -> None:
        """Let go of the folder ``held`` opened (nothing to do for a world reached by its name)."""
        if self._held is not None:
            os.close(self._held)
            self._held = None

    def __repr__(self) -> str:
        return f"World({str(self.root)!r})"

    def path(self, relative: str) -> Path:
        """The real path of ``relative`` inside ``files/``, refusing every way out."""
        if not isinstance(relative, str) or not relative.strip():
            raise SandboxError("a path must be a non-empty string")
        if "\x00" in relative:
            raise SandboxError(f"path {relative!r} refused: it contains a NUL byte")
        pure = PurePosixPath(relative)
        if pure.is_absolute():
            raise SandboxError(f"absolute path {relative!r} refused: paths are relative to the world")
        if ".." in pure.parts:
            raise SandboxError(f"path {relative!r} refused: '..' would leave the world")
        candidate = self.files_root.joinpath(*pure.parts)
        resolved = candidate.resolve()
        base = self.files_root.resolve()
        if resolved != base and base not in resolved.parents:
            raise SandboxError(f"path {relative!r} refused: a symlink leads out of the world")
        return candidate

    @contextmanager
    def _folder_of(self, relative: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """An open fd on the folder holding ``relative`` (see ``_open_folder``), and the file's own name."""
        self.path(relative)
        names = PurePosixPath(relative).parts
        if not names:
            raise SandboxError(f"path {relative!r} refused: it names the world's top folder, not a file")
        folder = _open_folder(self.files_root, names[:-1], relative, create=create, durable=self.durable)
        try:
            yield folder, names[-1]
        finally:
            os.close(folder)

    def read_bytes(self, relative: str) -> bytes:
        """The bytes of a regular world file; FileNotFoundError when absent, see ``_open_plain`` for what is refused."""
        with self._folder_of(relative) as (folder, name):
            return _read_plain(folder, name, relative)

    def read_text(self, relative: str) -> str:
        """A world file's text with universal newlines, as ``Path.read_text`` reads it."""
        return self.read_bytes(relative).decode().replace("\r\n", "\n").replace("\r", "\n")

    def write_bytes(self, relative: str, data: bytes, *, create_folders: bool = True) -> None:
        """Replace a world file atomically (see ``_replace_plain``), creating its folders if asked."""
        with self._folder_of(relative, create=create_folders) as (folder, name):
            _replace_plain(folder, name, data, relative, self.durable)

    def append_bytes(self, relative: str, data: bytes, *, create_folders: bool = True) -> int:
        """Append to a world file (created if absent) and return its new size."""
        with self._folder_of(relative, create=create_folders) as (folder, name):
            created = self.durable and not _exists(folder, name)
            fd = _open_plain(folder, name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, relative)
            try:
                _write_all(fd, data)
                if self.durable:
                    os.fsync(fd)
                    if created:
                        os.fsync(folder)
                return os.fstat(fd).st_size
            finally:
                os.close(fd)

    def make_folders(self, relative: str) -> None:
        """mkdir -p inside the world, never through a symlink."""
        self.path(relative)
        os.close(_open_folder(self.files_root, PurePosixPath(relative).parts, relative, create=True,
                              durable=self.durable))

    def remove(self, relative: str) -> None:
        """Remove a file's name from the world (a symlink itself, never its target)."""
        with self._folder_of(relative) as (folder, name):
            os.unlink(name, dir_fd=folder)
            if self.durable:
                os.fsync(folder)

    def rename(self, source: str, destination: str) -> None:
        """Rename a world file to ``destination`` (its folders created), replacing a file there."""
        with self._folder_of(source) as (source_folder, source_name), \
                self._folder_of(destination, create=True) as (folder, name):
            os.replace(source_name, name, src_dir_fd=source_folder, dst_dir_fd=folder)
            if self.durable:
                os.fsync(folder)
                os.fsync(source_folder)

    def describe(self, refusal: BaseException) -> str:
        """A refusal as the agent sees it: an OS error names the world-relative path, never the host's.

        The message may be logged into the world; an absolute path there would
        differ between every run directory and the crash-free run's.
        """
        if isinstance(refusal, OSError) and refusal.filename is not None:
            return f"{refusal.strerror}: {self.relative(refusal.filename)!r}"
        return str(refusal)

    def relative(self, path: str | os.PathLike[str]) -> str:
        """``path`` relative to ``files/`` when inside it, else relative to the world root, else its name."""
        path = Path(path)
        for base in (self.files_root, self.root):
            if path.is_relative_to(base):
                return path.relative_to(base).as_posix()
        return path.name

    def load(self, area: str, default: Any) -> Any:
        """The state of one simulated service, or ``default`` if it was never written."""
        label = f"state/{area}.json"
        try:
            folder = _open_folder(self.state_root, (), label)
            try:
                return json.loads(_read_plain(folder, f"{area}.json", label))
            finally:
                os.close(folder)
        except FileNotFoundError:
            return copy.deepcopy(default)  # never hand out a module's constant to be mutated

    def save(self, area: str, value: Any) -> None:
        """Replace a service's state atomically (temp file, rename): a kill leaves old or new."""
        label = f"state/{area}.json"
        folder = _open_folder(self.state_root, (), label, create=True, durable=self.durable)
        try:
            _replace_plain(folder, f"{area}.json", (json.dumps(value, indent=1, sort_keys=True) + "\n").encode(),
                           label, self.durable)
        finally:
            os.close(folder)

    def snapshot(self) -> dict[str, str]:
        """Canonical content of the world: relative path -> text, or what stands for it (see ``_Snapshot``)."""
        try:
            root = os.open(self.root, _FOLDER)
        except FileNotFoundError:
            return {}
        except OSError as error:
            return {"./": f"the world is not a folder to read ({error.strerror}): nothing in it was read"}
        try:
            return _Snapshot().of_folder(root, "", 1)
        finally:
            os.close(root)


def _printable(name: str) -> str:
    """A name from the file system as valid text: bytes that are not UTF-8 become ``\\xNN``."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class _Snapshot:
    """One walk of a world that never follows a link and never opens anything but a regular, singly linked file.

    Entries: ``path`` -> text (a file of at most SNAPSHOT_TEXT_LIMIT bytes of
    UTF-8), ``sha256:HEX`` (another file within SNAPSHOT_HASH_LIMIT, streamed),
    ``folder/`` -> "", ``symlink -> TARGET``; anything else (a FIFO, a socket, a
    device, a hard link, a file past a limit, a folder past the depth or entry
    limit) is an entry that says what it is and that it was not read, so the
    world differs from one without it and a finding names it. The walk runs
    below open folder fds, each name opened relative to its folder: no path
    is ever written out whole, however deep.
    """

    def __init__(self) -> None:
        self.entries: dict[str, str] = {}
        self.bytes_left = SNAPSHOT_BYTES

    def of_folder(self, folder: int, prefix: str, depth: int) -> dict[str, str]:
        with os.scandir(folder) as listing:  # read no more names than the entries left (and one to tell)
            names = list(itertools.islice((entry.name for entry in listing), SNAPSHOT_ENTRIES - len(self.entries) + 1))
        for name in sorted(names):
            key = prefix + _printable(name)
            self.bytes_left -= len(key)
            if len(self.entries) >= SNAPSHOT_ENTRIES or self.bytes_left < 0:
                self.entries[prefix or "./"] = (f"listing stopped: the world holds more than {SNAPSHOT_ENTRIES} "
                                                f"entries or {SNAPSHOT_BYTES} bytes")
                break
            self._entry(folder, name, key, depth)
        return self.entries

    def _entry(self, folder: int, name: str, key: str, depth: int) -> None:
        try:
            status = os.stat(name, dir_fd=folder, follow_symlinks=False)
            if stat.S_ISLNK(status.st_mode):
                self.entries[key] = f"symlink -> {_printable(os.readlink(name, dir_fd=folder))}"
            elif stat.S_ISDIR(status.st_mode):
                self._folder(folder, name, key + "/", depth)
            else:
                self.entries[key] = self._file(folder, name, key, status)
        except OSError as error:  # gone or swapped while the walk ran
            self.entries[key] = f"unreadable: {error.strerror}"

    def _folder(self, folder: int, name: str, key: str, depth: int) -> None:
        if depth > SNAPSHOT_DEPTH:
            self.entries[key] = f"not listed: deeper than {SNAPSHOT_DEPTH} folders"
            return
        self.entries[key] = ""
        inner = os.open(name, _FOLDER, dir_fd=folder)
        try:
            self.of_folder(inner, key, depth + 1)
        finally:
            os.close(inner)

    def _file(self, folder: int, name: str, key: str, status: os.stat_result) -> str:
        kind = _kind(status.st_mode)
        if kind is not None:
            return f"{kind}: not a regular file, not read"
        if status.st_nlink > 1:
            return f"a file with {status.st_nlink} hard links: not read, it may be a file outside the world"
        limit = min(SNAPSHOT_HASH_LIMIT, self.bytes_left)
        if status.st_size > limit:
            return f"a file of {status.st_size} bytes, over the snapshot's {limit}-byte limit: not read"
        try:
            fd = _open_plain(folder, name, os.O_RDONLY, key)
            try:
                if status.st_size <= SNAPSHOT_TEXT_LIMIT:
                    data = b"".join(_chunks(fd, SNAPSHOT_TEXT_LIMIT, key))
                    self.bytes_left -= len(data)
                    try:
                        return data.decode()
                    except UnicodeDecodeError:
                        return "sha256:" + hashlib.sha256(data).hexdigest()
                digest = hashlib.sha256()
                for chunk in _chunks(fd, limit, key):
                    digest.update(chunk)
                    self.bytes_left -= len(chunk)
                return "sha256:" + digest.hexdigest()
            finally:
                os.close(fd)
        except SandboxError as refusal:
            return f"not read: {refusal}"


def seed_world(root: Path, files: dict[str, str], state: dict[str, Any]) -> World:
    """Create a world holding the given files and service states."""
    world = World(root)
    world.files_root.mkdir(parents=True, exist_ok=True)
    world.state_root.mkdir(parents=True, exist_ok=True)
    for relative, text in files.items():
        world.write_bytes(relative, text.encode())
    for area, value in state.items():
        world.save(area, value)
    return world


def diff_snapshots(expected: dict[str, str], actual: dict[str, str], *, limit: int = 40) -> list[str]:
    """A readable unified diff of two snapshots, at most ``limit`` lines."""
    lines: list[str] = []
    for relative in sorted(set(expected) | set(actual)):
        if relative not in actual:
            lines.append(f"missing {relative}")
        elif relative not in expected:
            lines.append(f"extra   {relative}")
        elif expected[relative] != actual[relative]:
            lines.append(f"changed {relative}:")
            sizes = (expected[relative].count("\n"), actual[relative].count("\n"))
            if max(sizes) > DIFF_LINE_LIMIT:  # difflib's matching is quadratic in the worst case
                lines.append(f"    {sizes[0]} lines expected, {sizes[1]} lines found: too long to compare line by line")
                continue
            lines.extend(
                "    " + line
                for line in difflib.unified_diff(
                    expected[relative].splitlines(), actual[relative].splitlines(),
                    "expected", "actual", lineterm="", n=1,
                )
            )
    return lines[:limit] + ([f"... {len(lines) - limit} more lines"] if len(lines) > limit else [])
