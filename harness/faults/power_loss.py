"""A power-loss strike's own steps: the runtime's storage copied, the un-durable writes dropped, the copy again.

The nemesis calls ``lose_power`` once the killed tree is confirmed dead, so
nothing writes while the lazy file system (``faults/lazyfs``) throws away what
the runtime never made durable. What the next incarnation finds is then what a
disk that lost power would hold; the evidence keeps the storage as the kill left
it (``disk-at-kill-N/``), what the drop did (``power-loss-N.json``), the
storage after it (``disk-after-drop-N/``) and the journal after it
(``journal-after-drop-N.jsonl``, which the checker reads as the journal the next
incarnation found). Until then the runtime waits for that storage far longer than
for a plain folder, and ``StorageWait`` counts it, so that its timeout does not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from killpoint.errors import ConfigError, InfrastructureError
from killpoint.harness._safe_files import UntrustedFile, copy_evidence, copy_tree
from killpoint.harness.layout import RunPaths
from killpoint.harness.model import PowerLoss

if TYPE_CHECKING:
    from killpoint.harness.faults.lazyfs import DropReport, LazyMount


class PoweredServer(Protocol):
    """A database server whose data folder is on a lazy file system (``disk``): a power loss kills it too."""

    @property
    def disk(self) -> LazyMount | None: ...

    def power_off(self) -> None:
        """SIGKILL every process of the server, and return once all are dead."""

    def power_on(self) -> None:
        """Start the server again (its crash recovery runs); ConfigError when it will not."""


@dataclass(frozen=True)
class Disks:
    """The lazy file systems of one power-loss run: the runtime's storage, the fake world when it is on the
    device too (a scenario's ``world_on_device``), and the database server whose data folder is on one (a
    scenario's ``[database] postgres = true``; the server owns that mount)."""

    storage: LazyMount
    world: LazyMount | None = None
    database: PoweredServer | None = None

    def serving_s(self) -> float:
        """Seconds the runtime has waited for these file systems since they were mounted (the daemons' own count)."""
        database = self.database.disk if self.database is not None else None
        return sum(mount.serving_s() for mount in (self.storage, self.world, database) if mount is not None)

    def close(self) -> None:
        """Unmount the storage and the world (each leaves a plain folder again); the world first, as it was mounted
        last. The database server's mount is its own to close."""
        try:
            if self.world is not None:
                self.world.close()
        finally:
            self.storage.close()


# The lazy file system makes a metadata operation 15 to 25 times slower than a plain folder (a create, a
# rename; docs/power-loss.md, "Cost"): an incarnation's deadline moves by the time the runtime waited for it,
# so the scenario's timeout is the runtime's own time, never the tool's. The daemons' count is doubled, as the
# wait to be scheduled on a loaded machine can pass what they see; a true hang waits for no storage, so more
# than it needs is no harm.
STORAGE_WAIT_FACTOR = 2.0
# ... and by at most this many timeouts: a runtime that keeps the storage busy for ever is stopped all the same.
MAX_STORAGE_TIMEOUTS = 10.0


class StorageWait:
    """How long the lazy file systems of ``disks`` have held one incarnation, from its launch: the seconds its
    deadline moves by (``RendezvousServer.serve``'s ``storage``)."""

    def __init__(self, disks: Disks, timeout_s: float) -> None:
        self.disks = disks
        self.most_s = MAX_STORAGE_TIMEOUTS * timeout_s
        self.at_launch = self._served_s() or 0.0
        self.seconds = 0.0

    def __call__(self) -> float:
        """The seconds so far (doubled, capped); the last count if a daemon cannot say (it then serves no one)."""
        served = self._served_s()
        if served is not None:
            self.seconds = min(max(STORAGE_WAIT_FACTOR * (served - self.at_launch), self.seconds), self.most_s)
        return self.seconds

    @property
    def exhausted(self) -> bool:
        """The count reached its cap: a deadline moves no further, though the runtime may still be waiting."""
        return self.seconds >= self.most_s

    def _served_s(self) -> float | None:
        try:
            return self.disks.serving_s()
        except InfrastructureError:
            return None


def lose_power(disks: Disks, fault: PowerLoss, *, run_dir: Path, kill_number: int, journal: Path) -> list[str]:
    """Copy the storage, drop what was never durable, write the report and copy again; the problems met.

    A copy that meets something it will not follow (a symlink, a FIFO, a file
    past the bounds) leaves it out and says so: the copies are evidence for a
    person, the checker judges from the journal after the drop. A world on the
    device is dropped the same way, its evidence beside (``RunPaths.world_copy``).
    """
    paths = RunPaths(run_dir)
    problems = _lose_database(disks.database, fault, paths.database_power_loss_report(kill_number))
    problems += _drop_one(disks.storage, fault, "storage", paths.disk_at_kill(kill_number),
                         paths.power_loss_report(kill_number), paths.disk_after_drop(kill_number))
    if disks.world is not None:
        problems += _drop_one(disks.world, fault, "world", paths.world_copy(kill_number, "at-kill"),
                              paths.world_report(kill_number), paths.world_copy(kill_number, "after-drop"))
    try:
        copy_evidence(journal, RunPaths(run_dir).journal_after_drop(kill_number))
    except UntrustedFile as refusal:
        problems.append(f"after the drop, {refusal}")
    return problems


def _drop_one(mount: LazyMount, fault: PowerLoss, what: str, before: Path, report: Path, after: Path) -> list[str]:
    problems = [f"{what} at the kill: {problem}" for problem in copy_tree(mount.mount, before)]
    write_report(report, mount.drop(fault.variant, fault.seed))
    return problems + [f"{what} after the drop: {problem}" for problem in copy_tree(mount.mount, after)]


def _lose_database(server: PoweredServer | None, fault: PowerLoss, report: Path) -> list[str]:
    """The database server's share of the power loss, before the other drops: killed, what it never made durable
    dropped (the report; its data folder is not copied, its dumps before and after are the evidence), and started
    again, its own crash recovery run.

    It is killed only once the store's dump as the kill left it is taken, so until then it may make durable what a
    real power loss at the kill would have lost (its WAL writer flushes every 200 ms by default, a commit in flight
    lands): a power loss here can miss a loss, never invent one. A scenario that tests an unsafe setting keeps the
    server from flushing by luck (``wal_writer_delay = "10s"``, as the shipped ones do)."""
    if server is None or server.disk is None:
        return []
    server.power_off()
    write_report(report, server.disk.drop(fault.variant, fault.seed))
    try:
        server.power_on()
    except ConfigError as error:
        return [f"after the drop, the database server did not start again: {error}"]
    return []


def write_report(path: Path, report: DropReport) -> None:
    path.write_text(json.dumps(report.to_json(), indent=1) + "\n")
