"""The harness side of the lazy file system: mount one over a run's directory, drop, unmount.

A ``LazyMount`` moves what the directory holds into a backing directory under a harness-only
``state`` folder and serves it back at the same path through the daemon (its own process group,
a socket pair as its control channel: when the harness dies, even by SIGKILL, the daemon sees the
channel close, detaches the mount and puts the contents back). The mount stays up for the whole
run, so a container bound to it keeps seeing it; ``drop`` rewrites the state under it in place.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from killpoint.errors import ConfigError, InfrastructureError
from killpoint.harness._safe_files import remove_tree
from killpoint.harness.faults.lazyfs.model import VARIANTS, DropReport

FSNAME = "killpoint-lazyfs"  # fsname and subtype of every mount: stale ones are found by this name only
FUSE_DEVICE_ENV = "KILLPOINT_FUSE_DEVICE"  # tests point it at a missing path to see the refusal
LIBFUSE = "libfuse3.so.3"
START_SECONDS = 10.0
DROP_SECONDS = 60.0
ASK_SECONDS = 5.0  # for a question the control thread answers at once, whatever the file system is doing
EXIT_SECONDS = 5.0
DAEMON_MODULE = "killpoint.harness.faults.lazyfs.daemon"
# A daemon's module as its command line names it: a killpoint from before harness/ was laid out by role, running
# on the same host, serves its mounts as ``killpoint.harness.lazyfs.daemon``, and they are live too.
DAEMON_MODULES = {DAEMON_MODULE.encode(), b"killpoint.harness.lazyfs.daemon"}
_FIX = "install FUSE 3 (`apt-get install fuse3`) and `pip install mfusepy==3.1.1`, or run without --power-loss"


class LazyFsUnavailable(ConfigError):
    """A lazy file system cannot be mounted here (the message names the cause and the fix)."""


_probed = False


def probe() -> None:
    """Raise LazyFsUnavailable unless a lazy fs can be mounted here; a success is cached per process."""
    global _probed
    if _probed:
        return
    import ctypes.util  # only here: the harness and the daemon import this module, and neither needs them
    import importlib.util
    import tempfile

    device = os.environ.get(FUSE_DEVICE_ENV, "/dev/fuse")
    if not os.path.exists(device):
        raise LazyFsUnavailable(f"--power-loss needs FUSE, and {device} does not exist (a container needs --device /dev/fuse): {_FIX}")
    if shutil.which("fusermount3") is None:
        raise LazyFsUnavailable(f"--power-loss needs FUSE, and fusermount3 is not on PATH: {_FIX}")
    if ctypes.util.find_library("fuse3") is None:
        raise LazyFsUnavailable(f"--power-loss needs FUSE, and {LIBFUSE} is not installed: {_FIX}")
    if importlib.util.find_spec("mfusepy") is None:
        raise LazyFsUnavailable(f"--power-loss needs the Python package mfusepy, which is not installed: {_FIX}")
    with tempfile.TemporaryDirectory(prefix="killpoint-lazyfs-probe-") as scratch:
        (Path(scratch) / "mnt").mkdir()
        LazyMount.start(Path(scratch) / "mnt", Path(scratch) / "state").close()
    _probed = True


class LazyMount:
    """One lazy fs mounted at ``mount`` over ``backing``, served by a daemon child of the harness."""

    def __init__(self, mount: Path, state: Path, process: subprocess.Popen, channel: socket.socket) -> None:
        self.mount = mount
        self.state = state
        self._process = process
        self._channel = channel
        self._answers = channel.makefile("rb")
        self._closed = False

    def __repr__(self) -> str:
        status = "closed" if self._closed else f"daemon pid {self._process.pid}"
        return f"LazyMount({str(self.mount)!r}, {status})"

    @classmethod
    def start(cls, mount: Path, state: Path) -> LazyMount:
        """Move what ``mount`` holds into ``state``/backing, then mount the lazy fs at ``mount`` over it."""
        mount, state = Path(os.path.abspath(mount)), Path(os.path.abspath(state))
        if state == mount or state.is_relative_to(mount):
            raise ValueError(f"the lazy fs state {state} must lie outside its mount {mount}")
        if is_mounted(mount):
            raise LazyFsUnavailable(f"{mount} is a mount point already (a stale lazy fs? `killpoint clean` removes it)")
        state.mkdir(parents=True, exist_ok=True)
        backing = state / "backing"
        if os.path.lexists(backing) or not _move_tree(mount, backing):
            raise InfrastructureError(f"cannot move {mount} into the lazy fs state {state} (is {backing} left from another run?)")
        os.mkdir(mount)
        shutil.copystat(backing, mount, follow_symlinks=False)
        os.chown(mount, (st := os.lstat(backing)).st_uid, st.st_gid)
        ours, theirs = socket.socketpair()
        with open(state / "daemon.log", "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", DAEMON_MODULE, "--state", str(state),
                 "--mount", _real(mount),
                 "--control-fd", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True, env={**os.environ, "FUSE_LIBRARY_PATH": LIBFUSE},
            )  # fmt: skip
        theirs.close()
        lazy = cls(mount, state, process, ours)
        try:
            ready = lazy._answer(START_SECONDS)
        except (OSError, ValueError) as error:
            ready = {"error": str(error)}
        if ready.get("ready") is not True:
            lazy.close()
            raise LazyFsUnavailable(f"the lazy file system could not be mounted at {mount} ({ready.get('error', ready)}): {_FIX}")
        return lazy

    def _answer(self, seconds: float) -> dict:
        self._channel.settimeout(seconds)
        line = self._answers.readline()
        if not line:
            raise ValueError(f"the lazy fs daemon (pid {self._process.pid}) exited: {self._daemon_output()}")
        return json.loads(line)

    def _daemon_output(self) -> str:
        try:
            return (self.state / "daemon.log").read_text(errors="replace").strip()[-2000:] or "no output"
        except OSError:
            return "no output"

    def drop(self, variant: str = "plain", seed: int = 0) -> DropReport:
        """Call only with every writer dead: rewrite the backing directory to the durable state."""
        if variant not in VARIANTS:
            raise ValueError(f"unknown drop variant {variant!r}: use one of {', '.join(VARIANTS)}")
        if self._closed:
            raise InfrastructureError(f"{self!r}: drop after close")
        try:
            self._channel.sendall(json.dumps({"variant": variant, "seed": seed}).encode() + b"\n")
            answer = self._answer(DROP_SECONDS)
        except (OSError, ValueError) as error:
            raise InfrastructureError(f"the lazy fs at {self.mount} could not drop: {error}") from None
        if "error" in answer:
            raise InfrastructureError(f"the lazy fs drop at {self.mount} failed: {answer['error']}")
        return DropReport.from_json(answer["report"])

    def serving_s(self) -> float:
        """Seconds the daemon has spent answering requests since the mount (a client waited at least that long)."""
        try:
            self._channel.sendall(b'{"serving": true}\n')
            return float(self._answer(ASK_SECONDS)["serving_s"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise InfrastructureError(f"the lazy fs at {self.mount} did not say how long it served: {error}") from None

    def close(self) -> None:
        """Unmount, confirm the daemon gone, put the backing contents back at ``mount``, remove ``state``.

        It runs in the runner's ``finally``: it never raises, it says on stderr what it could not do.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self._stop()
            self._put_back()
        except Exception as error:  # noqa: BLE001 - a raise here would hide the run's own outcome
            print(f"killpoint: closing the lazy fs at {self.mount} failed ({type(error).__name__}: {error}); what it held is under {self.state}", file=sys.stderr)

    def _stop(self) -> None:
        if is_mounted(self.mount):
            unmount(self.mount)
        try:
            self._process.wait(EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait(EXIT_SECONDS)
        if is_mounted(self.mount):
            unmount(self.mount, lazily=True)
        self._answers.close()
        self._channel.close()

    def _put_back(self) -> None:
        backing = self.state / "backing"
        if not backing.is_dir():
            half_dropped = [name for name in ("old", "next") if os.path.lexists(self.state / name)]
            if half_dropped:  # the daemon died between the two renames of a drop: the trees are in those
                print(f"killpoint: the lazy fs at {self.mount} died mid-drop; its trees are in {self.state} ({', '.join(half_dropped)})", file=sys.stderr)
                return
        elif is_mounted(self.mount) or not _move_tree(backing, self.mount):
            print(f"killpoint: the lazy fs contents of {self.mount} could not all be put back; they are in {backing}", file=sys.stderr)
            return
        remove_tree(self.state)


def unmount(mount: Path, lazily: bool = False) -> bool:
    """fusermount3 -u (then -u -z when the mount is busy); True once ``mount`` is no mount point."""
    for flags in (["-u", "-z"],) if lazily else (["-u"], ["-u", "-z"]):
        subprocess.run(["fusermount3", *flags, str(mount)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        deadline = time.monotonic() + EXIT_SECONDS
        while is_mounted(mount) and time.monotonic() < deadline:
            time.sleep(0.01)
        if not is_mounted(mount):
            return True
    return False


def _move_tree(src: Path, dst: Path) -> bool:
    """Put directory ``src`` at ``dst`` (absent, or a directory), entries and all, following no symlink.

    False when something stayed in ``src``: a name ``dst`` already had, or ``dst`` is no directory.
    """
    if dst.is_symlink():
        return False
    with contextlib.suppress(OSError):
        dst.rmdir()  # absent or empty: src takes its place whole
    with contextlib.suppress(OSError):
        os.rename(src, dst)
        return True
    dst.mkdir(exist_ok=True)  # another file system, or dst holds something already: entry by entry
    for entry in os.scandir(src):
        if not os.path.lexists(dst / entry.name):
            shutil.move(entry.path, dst / entry.name)
    with contextlib.suppress(OSError):
        src.rmdir()
        return True
    return False


def _lazy_mounts() -> list[tuple[str, bool]]:
    """Every mount point in /proc/self/mountinfo, and whether it is one of ours (by FSNAME only)."""
    out = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as mountinfo:
        for line in mountinfo:
            fields, _, tail = line.partition(" - ")
            fstype, source = (tail.split() + ["", ""])[:2]
            point = re.sub(r"\\([0-7]{3})", lambda octal: chr(int(octal.group(1), 8)), fields.split()[4])
            out.append((point, fstype == f"fuse.{FSNAME}" or source == FSNAME))
    return out


def _real(path: Path) -> str:
    """``path`` as /proc/self/mountinfo spells it (symlinks above it resolved, the path itself not stat'ed)."""
    parent, name = os.path.split(os.path.abspath(path))
    return os.path.join(os.path.realpath(parent), name)


def is_mounted(path: Path) -> bool:
    """Whether ``path`` is a mount point, even a dead FUSE one (os.path.ismount says no to ENOTCONN)."""
    return _real(path) in (point for point, _ in _lazy_mounts())


def _served_mounts() -> set[str]:
    """The mount points a live lazy fs daemon serves (read from each process's command line)."""
    served = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if DAEMON_MODULES & set(argv) and b"--mount" in argv[:-1]:
            served.add(os.fsdecode(argv[argv.index(b"--mount") + 1]))
    return served


def unmount_stale(under: Path) -> list[str]:
    """Lazily unmount every FSNAME mount at or under ``under`` whose daemon is gone; say which.

    Such a mount answers ENOTCONN: its daemon was SIGKILLed (a harness SIGKILLed while its daemon
    lives is no such case: the daemon sees its control socket close and unmounts itself). A mount
    some live daemon serves belongs to a session still running and is left alone, and the mount
    itself is never touched (a stat of a busy one could wait).
    """
    root = _real(under).rstrip("/")
    found = [point for point, ours in _lazy_mounts() if ours and (point == root or point.startswith(root + "/"))]
    served = _served_mounts() if found else set()
    return [
        f"{point} (a lazy file system whose daemon was gone)"
        for point in sorted(set(found) - served, reverse=True)
        if unmount(Path(point), lazily=True)
    ]
