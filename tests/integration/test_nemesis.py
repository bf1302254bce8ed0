"""The nemesis finds a real process tree the cheap way, and agrees with psutil's full scan."""

from __future__ import annotations

import subprocess
import time

import psutil

from killpoint.harness import nemesis


def test_descendants_walked_from_proc_match_psutils_scan_and_all_die():
    # A shell with two children, one of which has a child of its own: three generations.
    root = subprocess.Popen(["sh", "-c", "sleep 60 & sh -c 'sleep 60 & wait' & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while len(psutil.Process(root.pid).children(recursive=True)) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        expected = sorted(child.pid for child in psutil.Process(root.pid).children(recursive=True))
        assert len(expected) == 3
        assert sorted(nemesis.descendant_pids(root.pid)) == expected
        assert sorted(nemesis.child_pids(root.pid)) == sorted(c.pid for c in psutil.Process(root.pid).children())
    finally:
        tree = nemesis.signal_tree(root.pid)
        root.wait()
        nemesis.confirm_dead(tree)
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in expected)
