"""The lazy file system's daemon: an mfusepy pass-through to a backing directory that feeds the model.

Run by ``LazyMount.start`` as ``python -m killpoint.harness.faults.lazyfs.daemon --state S --mount M
--control-fd N``. Every operation goes straight to ``S/backing`` (the volatile state); the
``PersistenceModel`` learns what is not durable yet. The durable bytes a write or truncate
destroys, and every unsynced write, go to the log ``S/log``; an unlinked file the durable state
still names is kept by a hard link in ``S/graveyard``. So memory and time are O(bytes written).

The control channel is a socket pair inherited from the harness: the daemon says ``ready`` from
FUSE's ``init`` (the mount answers from then on), answers ``drop`` requests with the report and
``serving`` requests with the seconds its clients have waited for it (``count_serving``), and
when the harness end closes (the harness died, even by SIGKILL) it unmounts lazily, puts the
backing contents back at the mount point, and exits.

The workload is untrusted and this daemon runs as root: it never follows a symlink in the
backing tree (lstat, O_NOFOLLOW, ``follow_symlinks=False``), opens only regular files itself,
and refuses device nodes. FUSE runs single-threaded (``-s``): operations are serialised, so a
rename's two steps (bury the replaced file, rename) are atomic to every client; a lock keeps
the control thread's drop out of the middle of an operation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import socket
import stat
import sys
import threading
import time
from pathlib import Path

import mfusepy as fuse  # type: ignore[import-untyped]

from killpoint.harness._safe_files import remove_tree
from killpoint.harness.faults.lazyfs.model import (DIR, FILE, HOLE, OTHER, SYMLINK, DropPlan, DropReport, Node,
                                                   PersistenceModel)
from killpoint.harness.faults.lazyfs.mount import FSNAME, unmount

RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2  # tv_nsec values of utimensat(2)
OMIT = -1  # a time utimens leaves as it is (None: set it to now)
# A client waits for a request longer than the daemon spends on it: the kernel's round trip and the wait to be
# scheduled. So the gap since the last answer counts too, up to this long; a longer one is the client's own time.
BRIDGE_S = 0.005
CHUNK = 1 << 20  # bytes copied at a time: a sparse file of any apparent size costs no more memory
_KIND = {stat.S_IFREG: FILE, stat.S_IFDIR: DIR, stat.S_IFLNK: SYMLINK}


def node_of(st: os.stat_result, target: str = "") -> Node:
    kind = _KIND.get(stat.S_IFMT(st.st_mode), OTHER)
    return Node(kind, st.st_ino, st.st_mode, st.st_uid, st.st_gid, target)


def _rel(path: str) -> str:
    return path.strip("/")


class _Handle:
    __slots__ = ("append", "fd", "id", "stale", "sync")

    def __init__(self, fd: int, node_id: int, flags: int) -> None:
        self.fd, self.id = fd, node_id
        self.sync = bool(flags & (os.O_SYNC | os.O_DSYNC))
        self.append = bool(flags & os.O_APPEND)
        self.stale = False


class LazyOps(fuse.Operations):
    use_ns = True

    def __init__(self, state: Path, mountpoint: str, control: socket.socket) -> None:
        self.state = state
        self.mountpoint = mountpoint
        self.backing = str(state / "backing")
        self.graveyard = state / "graveyard"
        self.graveyard.mkdir(exist_ok=True)
        self.control = control
        self._serial = threading.Lock()
        self.handles: dict[int, _Handle] = {}
        self.log = os.open(state / "log", os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        self.log_end = 0
        self.model = self._fresh_model()
        self.orphaned = False
        self.serving_s = 0.0  # seconds the mount kept its clients waiting, since it was mounted (``count_serving``)
        self.answered_at = 0.0

    # ---- helpers
    def _fresh_model(self) -> PersistenceModel:
        return PersistenceModel(os.lstat(self.backing).st_ino, self._listing)

    def _full(self, path: str) -> str:
        rel = _rel(path)
        return f"{self.backing}/{rel}" if rel else self.backing

    def _listing(self, rel: str) -> dict[str, Node]:
        out = {}
        with os.scandir(self._full(rel)) as entries:
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                out[entry.name] = node_of(st, os.readlink(entry.path) if entry.is_symlink() else "")
        return out

    def _append_log(self, data: bytes) -> int:
        at = self.log_end
        os.pwrite(self.log, data, at)
        self.log_end += len(data)
        return at

    def _own(self, full: str) -> None:
        uid, gid, _ = fuse.fuse_get_context()
        os.chown(full, uid, gid, follow_symlinks=False)

    def _learn_parent(self, path: str) -> None:
        self.model.learn(_rel(path).rpartition("/")[0])

    def _touch(self, rel: str | None, handle: _Handle) -> int:
        if not self.model.knows(handle.id):
            self.model.touch(rel, handle.id, os.fstat(handle.fd).st_size)
        return handle.id

    def _save(self, node_id: int, fd: int, start: int, end: int) -> None:
        """Copy the durable bytes of [start, end) to the log, a chunk at a time; a hole is saved as HOLE."""
        for s, e in self.model.to_save(node_id, start, end):
            for run_start, run_end, is_data in _runs(fd, s, e):
                log_at = self.log_end if is_data else HOLE
                for at in range(run_start, run_end, CHUNK) if is_data else ():
                    self._append_log(os.pread(fd, min(CHUNK, run_end - at), at))
                self.model.saved(node_id, run_start, run_end, log_at)

    def _bury(self, path: str) -> int | None:
        node_id = self.model.keep_on_unlink(_rel(path))
        if node_id is not None:
            grave = self.graveyard / str(node_id)
            if not grave.exists():
                os.link(self._full(path), grave, follow_symlinks=False)
        return node_id

    # ---- metadata
    def getattr(self, path, fh=None):
        st = os.fstat(self.handles[fh].fd) if fh in self.handles else os.lstat(self._full(path))
        return {
            "st_mode": st.st_mode, "st_nlink": st.st_nlink, "st_uid": st.st_uid, "st_gid": st.st_gid,
            "st_size": st.st_size, "st_blocks": st.st_blocks, "st_rdev": st.st_rdev,
            "st_atime": st.st_atime_ns, "st_mtime": st.st_mtime_ns, "st_ctime": st.st_ctime_ns,
        }  # fmt: skip

    def readlink(self, path):
        return os.readlink(self._full(path))

    def readdir(self, path, fh):
        return [".", "..", *os.listdir(self._full(path))]

    def statfs(self, path):
        s = os.statvfs(self.backing)
        keys = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_favail", "f_flag", "f_namemax")
        return {k: getattr(s, k) for k in keys}

    def chmod(self, path, mode):
        full = self._full(path)
        if stat.S_ISLNK(os.lstat(full).st_mode):
            raise fuse.FuseOSError(errno.EOPNOTSUPP)
        os.chmod(full, mode)
        return 0

    def chown(self, path, uid, gid):
        os.chown(self._full(path), uid, gid, follow_symlinks=False)
        return 0

    def utimens(self, path, times=None):
        """``times``: (atime, mtime), each in ns, None for now or OMIT; None alone: both now."""
        full = self._full(path)
        if times is None:
            os.utime(full, follow_symlinks=False)
            return 0
        st, now = os.lstat(full), time.time_ns()
        old = (st.st_atime_ns, st.st_mtime_ns)
        ns = tuple(now if t is None else was if t == OMIT else t for t, was in zip(times, old, strict=True))
        os.utime(full, ns=ns, follow_symlinks=False)
        return 0

    # ---- directory changes: learn the parent first, change, then tell the model
    def _created(self, path: str, change: str, target: str = "") -> int:
        full = self._full(path)
        self._own(full)
        self.model.created(_rel(path), node_of(os.lstat(full), target), change)
        return 0

    def mkdir(self, path, mode):
        with self._serial:
            self._learn_parent(path)
            os.mkdir(self._full(path), mode)
            return self._created(path, "mkdir")

    def mknod(self, path, mode, dev):
        if not (stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)):  # bind(2) of a Unix socket makes one
            raise fuse.FuseOSError(errno.EPERM)  # no device nodes from an untrusted workload
        with self._serial:
            self._learn_parent(path)
            os.mknod(self._full(path), mode)
            return self._created(path, "create" if stat.S_ISREG(mode) else "mknod")

    def symlink(self, target, source):
        with self._serial:
            self._learn_parent(target)
            os.symlink(source, self._full(target))
            return self._created(target, "symlink", source)

    def link(self, target, source):
        with self._serial:
            self._learn_parent(source)  # so the file's other name is known when its data is restored
            self._learn_parent(target)
            os.link(self._full(source), self._full(target), follow_symlinks=False)
            full = self._full(target)
            st = os.lstat(full)
            self.model.created(_rel(target), node_of(st, os.readlink(full) if stat.S_ISLNK(st.st_mode) else ""), "link")
            return 0

    def unlink(self, path):
        with self._serial:
            self._learn_parent(path)
            buried = self._bury(path)
            os.unlink(self._full(path))
            if buried is not None:
                self.model.buried(buried)
            self.model.removed(_rel(path))
            return 0

    def rmdir(self, path):
        with self._serial:
            self._learn_parent(path)
            os.rmdir(self._full(path))
            self.model.removed(_rel(path), "rmdir")
            return 0

    def rename(self, old, new, flags=0):
        if flags & RENAME_EXCHANGE:
            raise fuse.FuseOSError(errno.EINVAL)
        with self._serial:
            self._learn_parent(old)
            self._learn_parent(new)
            try:
                replaced = os.lstat(self._full(new))
            except FileNotFoundError:
                replaced = None
            if replaced is not None and flags & RENAME_NOREPLACE:
                raise fuse.FuseOSError(errno.EEXIST)
            if replaced is not None and os.lstat(self._full(old)).st_ino == replaced.st_ino:
                return 0
            buried = self._bury(new) if replaced is not None and not stat.S_ISDIR(replaced.st_mode) else None
            try:
                os.rename(self._full(old), self._full(new))
            except OSError:
                if buried is not None:
                    (self.graveyard / str(buried)).unlink(missing_ok=True)
                raise
            if buried is not None:
                self.model.buried(buried)
            if replaced is not None:
                self.model.removed(_rel(new), f"replaced by {_rel(old)}")
            self.model.renamed(_rel(old), _rel(new))
            return 0

    def fsyncdir(self, path, datasync, fh):
        with self._serial:
            for node_id in self.model.fsyncdir(_rel(path)):
                (self.graveyard / str(node_id)).unlink(missing_ok=True)
            return 0

    # ---- file data
    def _handle(self, fd: int, flags: int) -> _Handle:
        self.handles[fd] = handle = _Handle(fd, os.fstat(fd).st_ino, flags)
        return handle

    def open(self, path, flags):
        with self._serial:
            fd = os.open(self._full(path), _backing_flags(flags & ~os.O_CREAT))
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise fuse.FuseOSError(errno.EINVAL)
            handle = self._handle(fd, flags)
            if flags & os.O_TRUNC:
                self._truncate(_rel(path), handle, 0)
            return fd

    def create(self, path, mode, flags):
        with self._serial:
            self._learn_parent(path)
            full = self._full(path)
            fd = os.open(full, _backing_flags(flags) | os.O_CREAT | os.O_EXCL, mode)
            self._created(path, "create")
            self._handle(fd, flags)
            return fd

    def read(self, path, size, offset, fh):
        return os.pread(self.handles[fh].fd, size, offset)

    def write(self, path, data, offset, fh):
        with self._serial:
            handle = self.handles[fh]
            if handle.stale:
                raise fuse.FuseOSError(errno.EIO)
            node_id = self._touch(None if path is None else _rel(path), handle)
            if handle.append:
                offset = self.model.size(node_id)
            self._save(node_id, handle.fd, offset, offset + len(data))
            written = os.pwrite(handle.fd, data, offset)
            self.model.wrote(node_id, offset, written, self._append_log(data[:written]))
            if handle.sync:
                self.model.fsync(node_id)
            return written

    def _truncate(self, rel: str | None, handle: _Handle, length: int) -> None:
        node_id = self._touch(rel, handle)
        self._save(node_id, handle.fd, length, self.model.size(node_id))
        os.ftruncate(handle.fd, length)
        self.model.truncated(node_id, length)

    def truncate(self, path, length, fh=None):
        with self._serial:
            if fh in self.handles:
                self._truncate(None if path is None else _rel(path), self.handles[fh], length)
                return 0
            fd = os.open(self._full(path), os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise fuse.FuseOSError(errno.EINVAL)
                self._truncate(_rel(path), _Handle(fd, os.fstat(fd).st_ino, 0), length)
            finally:
                os.close(fd)
            return 0

    def fallocate(self, path, mode, offset, size, fh):
        if mode:
            raise fuse.FuseOSError(errno.EOPNOTSUPP)
        with self._serial:
            handle = self.handles[fh]
            node_id = self._touch(None if path is None else _rel(path), handle)
            os.posix_fallocate(handle.fd, offset, size)
            self.model.truncated(node_id, max(self.model.size(node_id), offset + size))
            return 0

    def fsync(self, path, datasync, fh):
        with self._serial:
            handle = self.handles.get(fh)
            if handle is not None and not handle.stale:
                self.model.fsync(handle.id)
            return 0

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        with self._serial:
            handle = self.handles.pop(fh, None)
            if handle is not None:
                os.close(handle.fd)
            return 0

    def count_serving(self, began: float, ended: float) -> None:
        """Add one request's time, and the round trip since the last answer (up to BRIDGE_S), to ``serving_s``."""
        self.serving_s += ended - began + min(max(began - self.answered_at, 0.0), BRIDGE_S)
        self.answered_at = ended

    # ---- the control channel
    def init(self, path):
        # The control thread first: a harness that died while the mount came up makes the sendall fail, and
        # without the thread nothing would ever see its end close, so mount and daemon would stay for good.
        threading.Thread(target=self._serve, name="lazyfs-control", daemon=True).start()
        with contextlib.suppress(OSError):
            self.control.sendall(b'{"ready": true}\n')

    def _serve(self) -> None:
        try:
            for line in self.control.makefile("rb"):
                request = json.loads(line)
                answer: dict[str, object]
                if request.get("serving") is True:  # asked while requests are answered: no lock, a float is read whole
                    answer = {"serving_s": self.serving_s}
                else:
                    try:
                        with self._serial:
                            report = self.drop(request["variant"], int(request["seed"]))
                        answer = {"report": report.to_json()}
                    except Exception as error:  # noqa: BLE001 - the harness shows it; the daemon keeps serving
                        answer = {"error": f"{type(error).__name__}: {error}"}
                self.control.sendall(json.dumps(answer).encode() + b"\n")
        finally:  # the harness is gone (its end closed, or reset mid-answer): detach, main() puts the contents back
            self.orphaned = True
            unmount(Path(self.mountpoint), lazily=True)

    def drop(self, variant: str, seed: int) -> DropReport:
        """Rewrite the backing directory to the durable state (call with the lock held)."""
        plan = self.model.drop(variant, seed)
        try:
            problems = [*self._restore_bytes(plan), *self._rebuild(plan)]
        finally:  # even a failed drop leaves a model of what the backing holds now, never one of the tree before
            for handle in self.handles.values():
                handle.stale = True  # a late write of a dead writer must not land in the durable state
            for grave in self.graveyard.iterdir():
                grave.unlink()
            os.ftruncate(self.log, 0)
            self.log_end = 0
            self.model = self._fresh_model()
        report = plan.report
        return dataclasses.replace(report, problems=(*report.problems, *problems)) if problems else report

    def _open_inode(self, node_id: int, source: str | None) -> int | str:
        """An O_WRONLY fd on inode ``node_id`` at ``source`` (or its grave), else why not."""
        path = str(self.graveyard / str(node_id)) if source is None else self._full(source)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as error:
            return f"{source or '(unlinked file)'}: not restored ({error.strerror})"
        st = os.fstat(fd)
        if st.st_ino != node_id or not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return f"{source}: not restored (no longer the file it was)"
        return fd

    def _restore_bytes(self, plan: DropPlan) -> list[str]:
        problems = []
        for restore in plan.restores:
            fd = self._open_inode(restore.id, restore.source)
            if isinstance(fd, str):
                problems.append(fd)
                continue
            try:
                for start, end, at in restore.pieces:
                    self._write_back(fd, start, end, at)
                os.ftruncate(fd, restore.size)
                for offset, length, at in restore.kept:
                    os.pwrite(fd, os.pread(self.log, length, at), offset)
            finally:
                os.close(fd)
        return problems

    def _write_back(self, fd: int, start: int, end: int, log_at: int) -> None:
        """Put the saved durable bytes of [start, end) back, a chunk at a time (a hole: zeros where data is now)."""
        for run_start, run_end, is_data in _runs(fd, start, end) if log_at == HOLE else [(start, end, True)]:
            for at in range(run_start, run_end, CHUNK) if is_data else ():
                length = min(CHUNK, run_end - at)
                os.pwrite(fd, bytes(length) if log_at == HOLE else os.pread(self.log, length, log_at + at - start), at)

    def _rebuild(self, plan: DropPlan) -> list[str]:
        problems = []
        fresh, old = self.state / "next", self.state / "old"
        remove_tree(fresh)  # both left by an earlier drop that failed half-way, if any
        remove_tree(old)
        root = os.lstat(self.backing)
        os.mkdir(fresh)
        _set_meta(str(fresh), root)
        for place in plan.places:
            dst = str(fresh / place.path)
            node = place.node
            try:
                if node.kind == DIR:
                    _place_dir(dst, node, self._full(place.source) if place.source is not None else None, place.move)
                elif node.kind == FILE:
                    src = str(self.graveyard / str(node.id)) if place.source is None else self._full(place.source)
                    if os.lstat(src).st_ino != node.id:
                        raise OSError(errno.ESTALE, "no longer the file it was")
                    os.link(src, dst, follow_symlinks=False)
                elif node.kind == SYMLINK:
                    os.symlink(node.target, dst)
                    os.chown(dst, node.uid, node.gid, follow_symlinks=False)
                elif stat.S_ISFIFO(node.mode) or stat.S_ISSOCK(node.mode):  # a socket comes back unbound, as after a reboot
                    os.mknod(dst, stat.S_IFMT(node.mode) | stat.S_IMODE(node.mode))
                    os.chown(dst, node.uid, node.gid)
                else:
                    problems.append(f"{place.path}: not restored (a special file)")
            except OSError as error:
                problems.append(f"{place.path}: not restored ({error.strerror or error})")
        os.rename(self.backing, old)
        os.rename(fresh, self.backing)
        try:
            remove_tree(old)
        except OSError as error:
            problems.append(f"the volatile tree at {old} could not all be removed ({error}); the durable one is in place")
        return problems


def _runs(fd: int, start: int, end: int) -> list[tuple[int, int, bool]]:
    """[start, end) of the file at ``fd`` cut into (start, end, holds data) runs, by SEEK_DATA and SEEK_HOLE."""
    runs, at = [], start
    while at < end:
        try:
            data = min(os.lseek(fd, at, os.SEEK_DATA), end)
        except OSError:  # ENXIO: no data from here to the end of the file
            data = end
        if data > at:
            runs.append((at, data, False))
        if data == end:
            break
        at = min(os.lseek(fd, data, os.SEEK_HOLE), end)
        runs.append((data, at, True))
    return runs


def _backing_flags(flags: int) -> int:
    """The flags of the daemon's own fd for a client's open: readable whenever writable (it saves the
    durable bytes a write destroys), no O_TRUNC (a truncate goes through the model), no O_DIRECT (FUSE hands
    the daemon unaligned buffers, which O_DIRECT refuses with EINVAL), no symlink, no wait."""
    if flags & os.O_ACCMODE == os.O_WRONLY:
        flags = flags & ~os.O_ACCMODE | os.O_RDWR
    return flags & ~(os.O_TRUNC | os.O_DIRECT) | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # never hang on a FIFO


def _set_meta(path: str, st: os.stat_result | Node) -> None:
    mode, uid, gid = (st.st_mode, st.st_uid, st.st_gid) if isinstance(st, os.stat_result) else (st.mode, st.uid, st.gid)
    os.chown(path, uid, gid, follow_symlinks=False)
    os.chmod(path, stat.S_IMODE(mode))


def _place_dir(dst: str, node: Node, source: str | None, move: bool) -> None:
    """Move an untouched directory whole, else make it (with the metadata of the one it replaces)."""
    current = os.lstat(source) if source is not None else None
    same = current is not None and stat.S_ISDIR(current.st_mode) and current.st_ino == node.id
    if move and same and source is not None:
        os.rename(source, dst)
        return
    os.mkdir(dst)
    _set_meta(dst, current if same and current is not None else node)
    if move:
        raise OSError(errno.ESTALE, "no longer the directory it was: made empty")


def put_back(mount: str, state: Path) -> None:
    """The harness died: leave ``mount`` a plain directory holding the backing contents, as close() would."""
    try:
        os.rmdir(mount)
        os.rename(state / "backing", mount)
    except OSError as error:
        print(f"lazyfs: could not put {state / 'backing'} back at {mount}: {error}", file=sys.stderr)
        return
    try:
        remove_tree(state)
    except OSError as error:
        print(f"lazyfs: could not remove {state}: {error}", file=sys.stderr)


class _LazyFUSE(fuse.FUSE):
    """mfusepy's FUSE, passing rename's flags on (it drops them: RENAME_NOREPLACE would replace)."""

    def _wrapper(self, func, *args, **kwargs):  # noqa: ANN001, ANN202 - mfusepy's dispatch of every request
        """Answer one request and count its time (``LazyOps.count_serving``): the harness moves a deadline by it."""
        began = time.perf_counter()
        try:
            return super()._wrapper(func, *args, **kwargs)
        finally:
            self.operations.count_serving(began, time.perf_counter())

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
        return self.operations.rename(old.decode(self.encoding, self.errors), new.decode(self.encoding, self.errors), flags)

    def utimens_fuse_3(self, path: bytes | None, buf, fip) -> int:  # noqa: ANN001 - mfusepy's ctypes pointers
        """mfusepy reads UTIME_NOW and UTIME_OMIT as literal times (touch -a set the mtime to 1970): pass them on."""
        times = None if not buf else tuple(_raw_time(t) for t in (buf.contents.actime, buf.contents.modtime))
        return self.operations.utimens(None if path is None else path.decode(self.encoding, self.errors), times)


def _raw_time(spec) -> int | None:  # noqa: ANN001 - a c_timespec
    if spec.tv_nsec == UTIME_NOW:
        return None
    return OMIT if spec.tv_nsec == UTIME_OMIT else spec.tv_sec * 1_000_000_000 + spec.tv_nsec


def main(argv: list[str]) -> int:
    """``--state S --mount M --control-fd N``, as LazyMount.start passes them (no argparse: start-up time)."""
    args = dict(zip(argv[::2], argv[1::2], strict=True))
    state, mountpoint, control_fd = Path(args["--state"]).absolute(), args["--mount"], int(args["--control-fd"])
    os.umask(0)  # the kernel applied the client's umask to every mode it sends; apply none of our own
    control = socket.socket(fileno=control_fd)
    ops = LazyOps(state, mountpoint, control)
    _LazyFUSE(
        ops, mountpoint, foreground=True, nothreads=True, allow_other=True, default_permissions=True,
        fsname=FSNAME, subtype=FSNAME, attr_timeout=0, entry_timeout=0, negative_timeout=0, hard_remove=True,
    )  # fmt: skip
    if ops.orphaned:
        put_back(mountpoint, ops.state)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
