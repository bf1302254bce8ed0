"""Which temporary folders ``killpoint clean`` takes: those whose owner (pid and start time, in the name) is gone,
and those naming no owner that have not changed for a week; never a live owner's, a link, or a hunt's evidence."""

from __future__ import annotations

import os
import time

import pytest

from killpoint.harness.execute import leftovers

pytestmark = pytest.mark.hostile


def test_only_a_gone_owners_or_a_long_unchanged_unowned_folder_is_abandoned(tmp_path):
    now = time.time()
    live = tmp_path / f"{leftovers.owner_prefix('killpoint-certify-')}live"
    gone = tmp_path / "killpoint-store-1.0-gone"  # pid 1 never started at tick 0: that process is gone
    reused = tmp_path / f"killpoint-mcp-{os.getpid()}.1-reused"  # this pid, another start: not this process
    listing = tmp_path / "killpoint-mcp-list-1.0-gone"
    old_unowned, new_unowned = tmp_path / "killpoint-store-k2x7abcd", tmp_path / "killpoint-certify-12345678"
    evidence = tmp_path / "killpoint-hunt-1.0-evidence"  # a hunt's folder holds the evidence it printed
    for folder in (live, gone, reused, listing, old_unowned, new_unowned, evidence):
        folder.mkdir()
    os.utime(old_unowned, (now - leftovers.UNOWNED_AFTER_S - 60,) * 2)
    (tmp_path / "killpoint-store-1.0-link").symlink_to(live)
    assert leftovers.abandoned_temp_folders(tmp_path, now) == sorted([gone, reused, listing, old_unowned])


def test_an_owner_is_gone_only_when_its_name_says_which_process_and_that_one_is_not_running():
    me = leftovers.owner_prefix("").rstrip("-")
    assert not leftovers.owner_gone(me)
    assert leftovers.owner_gone(me.partition(".")[0] + ".1")  # the pid reused by another process
    assert not leftovers.owner_gone(str(os.getpid()))  # a pid alone: a live process has it
    for unnamed in ("", "abc", "12.x", ".5", "-1"):
        assert not leftovers.owner_gone(unnamed)
