"""Reading a store's copy: its path for a plan, and its bytes, bounded and never through a symlink."""

from __future__ import annotations

from pathlib import Path

from killpoint.errors import InternalError
from killpoint.harness._safe_files import READ_LIMIT_BYTES, read_bounded
from killpoint.harness.judge.stores._table import resolved_path
from killpoint.harness.model import Plan

# A store copy past this size is not read: no honest run of a plan records that much.
STORE_LIMIT_BYTES = READ_LIMIT_BYTES


class StoreUnreadable(InternalError):
    """The copy could not be read; each argument is one problem, quoted to the report (which file, why)."""


def store_path(template: str, plan: Plan) -> str:
    """The store's path in the workload folder for ``plan``; StoreUnreadable when ``{task_id}`` makes it leave."""
    path = resolved_path(template, plan.task_id)
    if path is None:
        raise StoreUnreadable(f"journal.path {template!r} with the plan's task_id {plan.task_id!r} names no file "
                              "inside the workload folder; give a task_id that is a plain name")
    return path


def store_files(template: str, plan: Plan, suffixes: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``files()`` of a store at ``template`` with side files ``suffixes``: none when the path leaves the folder
    (``read`` then says why)."""
    try:
        path = store_path(template, plan)
    except StoreUnreadable:
        return ()
    return (path,) + tuple(path + suffix for suffix in suffixes)


def read_store(folder: Path, path: str) -> bytes | None:
    """The copy's bytes, or None when the store was not there (nothing durable yet: a fact, not a problem)."""
    try:
        return read_bounded(folder / path, STORE_LIMIT_BYTES)
    except FileNotFoundError:
        return None
    except OSError as refusal:  # UntrustedFile says why (a symlink, a FIFO, too big)
        raise StoreUnreadable(f"{path}: {refusal}") from None
