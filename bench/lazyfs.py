"""Benchmark: what the lazy file system costs, through the mount against the plain directory, in one run.

    .venv/bin/python bench/lazyfs.py [--ops 2000] [--rounds 10]

Measures on the same disk, in the same process, one after the other:
- a write (a 55-byte JSON line appended, no fsync), a write + fsync, and the checkpoint idiom
  (create a temp file, write, fsync, rename over the old one), each in µs per operation;
- a mount's start-up (``LazyMount.start`` until the mount answers) and its close;
- a drop after a journal of ``--ops`` records half of which were never fsynced, plus a dozen files.
The figures are copied by hand into docs/power-loss.md ("Cost").
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from killpoint.harness.faults.lazyfs import LazyMount, probe

RECORD = b'{"kind": "started", "op": "c3", "attempt": 1, "t": 1.0}\n'  # 55 bytes


def per_op(ops: int, body: Callable[[int], None]) -> float:
    """µs per call of ``body(i)`` over ``ops`` calls."""
    start = time.perf_counter()
    for i in range(ops):
        body(i)
    return (time.perf_counter() - start) / ops * 1e6


def file_costs(root: Path, ops: int) -> dict[str, float]:
    journal = os.open(root / "journal.jsonl", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
    synced = os.open(root / "synced.jsonl", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)

    def write_fsync(_: int) -> None:
        os.write(synced, RECORD)
        os.fsync(synced)

    def checkpoint(i: int) -> None:
        tmp = root / f".ckpt.{i}.tmp"
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        os.write(fd, RECORD)
        os.fsync(fd)
        os.close(fd)
        os.rename(tmp, root / "ckpt.json")

    try:
        return {
            "write (55 B append)": per_op(ops, lambda _: os.write(journal, RECORD)),
            "write + fsync": per_op(ops // 4, write_fsync),
            "create + write + fsync + rename": per_op(ops // 4, checkpoint),
        }
    finally:
        os.close(journal)
        os.close(synced)


def mount_costs(base: Path, ops: int, rounds: int) -> dict[str, float]:
    starts, closes, drops = [], [], []
    for n in range(rounds):
        mount = base / f"m{n}" / "workload"
        mount.mkdir(parents=True)
        began = time.perf_counter()
        lazy = LazyMount.start(mount, base / f"m{n}" / ".lazyfs")
        starts.append(time.perf_counter() - began)
        fd = os.open(mount / "journal.jsonl", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
        dfd = os.open(mount, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(dfd)
        os.close(dfd)
        for i in range(ops):
            os.write(fd, RECORD)
            if i < ops // 2:
                os.fsync(fd)
        os.close(fd)
        for i in range(12):
            (mount / f"file-{i}.json").write_bytes(RECORD)
        began = time.perf_counter()
        lazy.drop()
        drops.append(time.perf_counter() - began)
        began = time.perf_counter()
        lazy.close()
        closes.append(time.perf_counter() - began)
    return {
        "mount start-up": statistics.median(starts) * 1e6,
        f"drop ({ops // 2} unsynced records, 12 new files)": statistics.median(drops) * 1e6,
        "close (unmount, contents put back)": statistics.median(closes) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    probe()
    with tempfile.TemporaryDirectory(prefix="killpoint-bench-lazyfs-", dir=Path.home()) as scratch:
        base = Path(scratch)
        (base / "plain").mkdir()
        plain = file_costs(base / "plain", args.ops)
        (base / "lazy").mkdir()
        lazy = LazyMount.start(base / "lazy", base / ".lazy-state")
        try:
            through = file_costs(base / "lazy", args.ops)
        finally:
            lazy.close()
        once = mount_costs(base, args.ops, args.rounds)
    print(f"{'operation':<44} {'plain dir µs':>13} {'lazy fs µs':>12} {'ratio':>7}")
    for name in plain:
        print(f"{name:<44} {plain[name]:>13.1f} {through[name]:>12.1f} {through[name] / plain[name]:>6.1f}x")
    for name, value in once.items():
        print(f"{name:<44} {'-':>13} {value:>12.0f}")


if __name__ == "__main__":
    main()
