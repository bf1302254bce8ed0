"""Scratch run directories: a session's runs carried out on tmpfs, their evidence kept on disk.

A SIGKILL leaves the page cache alone, so what the next incarnation finds in a
run directory on tmpfs is exactly what it would find on a disk; only a power
loss tells them apart, and a power-loss run keeps its own lazy file system on
its disk run directory. On a disk, each journal record's fsync waits for the
device (tens of thousands per sweep, one after another); on tmpfs it costs
nothing. So a session carries out each run without a power loss in
``FOLDER/run-NNNNN`` of its scratch folder and keeps on disk what it keeps
today (``session.run_job``): a passing run's run.json and verdict.json, a
failing or unknown one's whole evidence, copied with ``copy_tree`` (no link
followed or made, no FIFO opened, bounded; what it left out is written in
``SCRATCH_COPY_NAME``).

The scratch folder is ``ROOT/killpoint-scratch-<harness pid>.<its start>-<random>``, removed
when the session ends; one left by a SIGKILLed harness is removed by the next
session and by ``killpoint clean`` (``sweep_abandoned``). A run's folder that
cannot be removed (a process that escaped its run keeps writing in it) never
ends the session: what holds it is killed if it can be found, and a folder that
still cannot be removed is left and said (``Scratch.discard``).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from killpoint.errors import ConfigError
from killpoint.harness._safe_files import copy_tree, remove_tree
from killpoint.harness.execute._escapees import RunFiles, ticks_now
from killpoint.harness.execute.leftovers import abandoned_folders, owner_prefix, remove_folders
from killpoint.harness.layout import RunPaths

DEFAULT_ROOT = Path("/dev/shm")
PREFIX = "killpoint-scratch-"
# Below this much free room a run is carried out on disk instead: a full tmpfs would fail a correct runtime's
# writes (ENOSPC), a false alarm.
MIN_FREE_BYTES = 512 * 1024 * 1024
# How long a removal that something keeps defeating looks for what holds the folder (it may hold a file only while
# it writes one).
DISCARD_PATIENCE_S = 1.0


_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def mount_type(path: Path) -> str | None:
    """The file system type (``tmpfs``, ``ext4``) of the mount holding ``path``, from /proc/mounts; None if unknown."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    real = os.path.realpath(path)
    best, kind = "", None
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = _OCTAL_ESCAPE.sub(lambda escape: chr(int(escape[1], 8)), fields[1])  # a space is \040
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):  # the last of stacked mounts on one point is the one seen
            best, kind = point, fields[2]
    return kind


def free_bytes(path: Path) -> int:
    status = os.statvfs(path)
    return status.f_bavail * status.f_frsize


def default_root() -> Path | None:
    """``DEFAULT_ROOT`` when it is a writable tmpfs folder with ``MIN_FREE_BYTES`` free, else None (no scratch)."""
    root = DEFAULT_ROOT
    try:
        usable = (root.is_dir() and os.access(root, os.W_OK | os.X_OK) and mount_type(root) == "tmpfs"
                  and free_bytes(root) >= MIN_FREE_BYTES)
    except OSError:
        return None
    return root if usable else None


def chosen_root(folder: Path, flag: str = "--scratch") -> Path:
    """``--scratch DIR`` checked: an existing folder this process can write; ConfigError naming ``flag`` if not."""
    if not folder.is_dir():
        raise ConfigError(f"{flag} {folder}: " + ("is not a folder" if folder.exists() else "no such folder")
                          + "; give an existing folder for the runs' scratch folders (a tmpfs such as /dev/shm)")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {folder}: is not writable; give a folder you can write (a tmpfs such as /dev/shm)")
    return folder.resolve()


@dataclass(frozen=True)
class Scratch:
    """One session's scratch folder (``open_scratch``): its runs are carried out in ``run_dir(index)``."""

    folder: Path
    opened: int = 0  # when, in clock ticks since boot (``_escapees.ticks_now``): what its runs started came after


    def run_dir(self, index: int) -> Path:
        return self.folder / f"run-{index:05d}"

    def has_room(self) -> bool:
        """There is room for one more run (``MIN_FREE_BYTES``); if not, it is carried out on disk."""
        try:
            return free_bytes(self.folder) >= MIN_FREE_BYTES
        except OSError:
            return False

    def close(self) -> None:
        remove_tree(self.folder)

    def keep_on_disk(self, scratch_run: Path, run_dir: Path) -> list[str]:
        """Copy a run's scratch evidence into its disk ``run_dir``, then remove it (``discard``); what was left out,
        and why.

        What the copy left out is also written in ``run_dir/SCRATCH_COPY_NAME``, so
        a person reading the run directory sees it.
        """
        left_out = copy_tree(scratch_run, run_dir)
        if left_out:
            RunPaths(run_dir).scratch_copy.write_text(
                f"This run was carried out in the scratch folder {scratch_run} and its evidence copied here; "
                f"the copy left out:\n" + "".join(f"  {problem}\n" for problem in left_out))
        self.discard(scratch_run)
        return left_out

    def discard(self, scratch_run: Path) -> None:
        """Remove a run's scratch folder; if something keeps it from going, kill what holds it and try once more,
        and if it still stays, leave it (the session's end, or the next session, removes it) and say so on stderr.

        Only a process of this session's time that holds the folder is killed (``_escapees``): a workload's that
        escaped its run and writes there still, which the kill of its last incarnation did not see holding it.
        """
        try:
            remove_tree(scratch_run)
            return
        except OSError as error:
            kept_by = error
        escaped = RunFiles(str(scratch_run), self.opened, str(scratch_run / "workload")).hunt(
            patience_s=DISCARD_PATIENCE_S)
        if escaped:
            print(f"killpoint: killed what escaped its run and kept writing in {scratch_run}: {'; '.join(escaped)}",
                  file=sys.stderr)
        try:
            remove_tree(scratch_run)
        except OSError as error:
            kept_by = error
        else:
            return
        print(f"killpoint: {scratch_run} could not be removed ({kept_by.strerror or kept_by}): something still "
              f"writes in it; it is left for the session's end, or the next session, to remove", file=sys.stderr)


def open_scratch(root: Path) -> Scratch:
    """A new scratch folder under ``root`` named with this process's identity (``leftovers.owner_prefix``),
    readable by its owner only."""
    return Scratch(Path(tempfile.mkdtemp(prefix=owner_prefix(PREFIX), dir=root)), ticks_now())


def sweep_abandoned(root: Path | None = DEFAULT_ROOT) -> list[Path]:
    """Remove the scratch folders under ``root`` whose harness process is gone (a SIGKILLed one cannot); return them.

    Only real folders (never a symlink) owned by this user are removed.
    """
    return [] if root is None else remove_folders(abandoned_folders(root, PREFIX))
