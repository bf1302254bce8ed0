"""A FUSE lazy file system for power-loss faults: what was never fsynced is lost at a drop.

``LazyMount`` mounts one over a run's directory; ``model`` is the pure persistence model it
keeps (what an fsync makes durable); docs/power-loss.md explains both. The names below load
on first use, so a reader of a run's drop reports (``model.DropReport``) never loads the mount.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_HOMES = {"DropReport": "model", "FSNAME": "mount", "LazyFsUnavailable": "mount", "LazyMount": "mount",
          "probe": "mount", "unmount_stale": "mount"}

__all__ = ["FSNAME", "DropReport", "LazyFsUnavailable", "LazyMount", "probe", "unmount_stale"]

if TYPE_CHECKING:
    from killpoint.harness.faults.lazyfs.model import DropReport
    from killpoint.harness.faults.lazyfs.mount import FSNAME, LazyFsUnavailable, LazyMount, probe, unmount_stale


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
