"""A FUSE lazy file system for power-loss faults: what was never fsynced is lost at a drop.

``LazyMount`` mounts one over a run's directory; ``model`` is the pure persistence model it
keeps (what an fsync makes durable); docs/power-loss.md explains both.
"""

from killpoint.harness.lazyfs.model import DropReport
from killpoint.harness.lazyfs.mount import FSNAME, LazyFsUnavailable, LazyMount, probe, unmount_stale

__all__ = ["FSNAME", "DropReport", "LazyFsUnavailable", "LazyMount", "probe", "unmount_stale"]
