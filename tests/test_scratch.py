"""Scratch folders: where they may go, what a sweep removes (a dead harness's, never a live one's nor a link), what
the copy of a run's scratch evidence to disk keeps and what it says it left out, and whose paths the verdict names."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from killpoint.errors import ConfigError
from killpoint.harness._safe_files import copy_tree
from killpoint.harness.execute import scratch
from killpoint.harness.execute._process_tree import own_identity
from killpoint.harness.execute.session import _MovedRun
from killpoint.harness.layout import RunPaths
from killpoint.harness.model import Finding, Incarnation, RuleResult, Verdict

needs_tmpfs_shm = pytest.mark.skipif(scratch.mount_type(Path("/dev/shm")) != "tmpfs", reason="/dev/shm is no tmpfs")


def dead_pid() -> int:
    """A pid no process can have: one above the kernel's largest."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


@needs_tmpfs_shm
def test_dev_shm_is_the_default_root_when_it_is_a_tmpfs_with_room():
    assert scratch.default_root() == Path("/dev/shm")


def test_a_folder_is_chosen_by_its_file_system_never_by_its_name(tmp_path, monkeypatch):
    fake = tmp_path / "dev" / "shm"
    fake.mkdir(parents=True)
    if scratch.mount_type(fake) == "tmpfs":
        pytest.skip("pytest's temporary folder is itself on a tmpfs")
    monkeypatch.setattr(scratch, "DEFAULT_ROOT", fake)
    assert scratch.default_root() is None


@needs_tmpfs_shm
def test_a_tmpfs_without_room_is_not_chosen(monkeypatch):
    monkeypatch.setattr(scratch, "MIN_FREE_BYTES", scratch.free_bytes(Path("/dev/shm")) + 2**40)
    assert scratch.default_root() is None
    assert not scratch.Scratch(Path("/dev/shm")).has_room()  # and a run is then carried out on disk


def test_mount_type_follows_the_longest_mount_point_and_symlinks(tmp_path):
    assert scratch.mount_type(Path("/proc/self")) == "proc"
    assert scratch.mount_type(Path("/proc")) == "proc"
    link = tmp_path / "to-proc"
    link.symlink_to("/proc")
    assert scratch.mount_type(link) == "proc"


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_bad_scratch_folder_is_a_usage_error_naming_the_flag(tmp_path, kind):
    folder = tmp_path / "scratch"
    if kind == "file":
        folder.write_text("")
    with pytest.raises(ConfigError, match=r"^--scratch .*scratch: (no such folder|is not a folder); give an existing"):
        scratch.chosen_root(folder)


def test_a_scratch_folder_is_named_with_the_harness_pid_and_start_and_private(tmp_path):
    opened = scratch.open_scratch(tmp_path)
    assert opened.folder.parent == tmp_path
    assert opened.folder.name.startswith(f"{scratch.PREFIX}{own_identity().replace(':', '.')}-")
    assert opened.folder.stat().st_mode & 0o077 == 0
    assert opened.run_dir(7) == opened.folder / "run-00007"
    opened.run_dir(7).mkdir()
    opened.close()
    assert not opened.folder.exists()


def test_the_sweep_removes_a_gone_harness_folder_only(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the sweep's")
    root = tmp_path / "root"
    root.mkdir()
    gone = dead_pid()
    abandoned = root / f"{scratch.PREFIX}{gone}-abc"
    (abandoned / "run-00000" / "workload").mkdir(parents=True)
    (abandoned / "run-00000" / "workload" / "journal.jsonl").write_text("{}\n")
    live = root / f"{scratch.PREFIX}{os.getpid()}-def"
    live.mkdir()
    link = root / f"{scratch.PREFIX}{gone}-link"
    link.symlink_to(outside)
    not_ours = root / f"{scratch.PREFIX}{gone}-other"
    not_ours.mkdir()
    if os.getuid() == 0:  # root may give it away: another user's folder, which this user may not remove
        os.chown(not_ours, 4242, -1)
    named_otherwise = root / f"{scratch.PREFIX}x{gone}-ghi"
    named_otherwise.mkdir()

    removed = scratch.sweep_abandoned(root)

    assert abandoned in removed and not abandoned.exists()
    assert live.is_dir() and link.is_symlink() and (outside / "keep.txt").read_text() == "not the sweep's"
    assert named_otherwise.is_dir()
    if os.getuid() == 0:
        assert not_ours.is_dir() and not_ours not in removed


def plant_hostile_run(run: Path, outside: Path) -> None:
    """A scratch run's folder as a hostile workload leaves it: files, a nested folder, and what a copy must not trust."""
    (run / "workload" / "store").mkdir(parents=True)
    (run / "workload" / "journal.jsonl").write_text('{"kind": "task"}\n')
    (run / "workload" / "store" / "state.json").write_text("{}")
    (run / "ledger.jsonl").write_text("")
    (run / "workload" / "passwd-link").symlink_to("/etc/passwd")
    (run / "workload" / "folder-link").symlink_to(outside)
    os.mkfifo(run / "workload" / "pipe")
    with socket.socket(socket.AF_UNIX) as bound:
        bound.bind(str(run / "workload" / "socket"))
    os.link(outside / "secret.txt", run / "workload" / "linked.txt")


def test_a_scratch_run_is_kept_on_disk_with_what_was_left_out_said(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret\n")
    scratch_run, disk_run = tmp_path / "scratch" / "run-00003", tmp_path / "runs" / "run-00003"
    plant_hostile_run(scratch_run, outside)
    disk_run.mkdir(parents=True)
    (disk_run / "run.json").write_text("the record")

    left_out = scratch.Scratch(tmp_path).keep_on_disk(scratch_run, disk_run)  # a FIFO opened for reading would block here for ever

    assert not scratch_run.exists()
    assert (disk_run / "run.json").read_text() == "the record"
    assert (disk_run / "workload" / "journal.jsonl").read_text() == '{"kind": "task"}\n'
    assert (disk_run / "workload" / "store" / "state.json").read_text() == "{}"
    assert (disk_run / "ledger.jsonl").read_text() == ""
    kept = {path.relative_to(disk_run).as_posix(): path for path in disk_run.rglob("*")}
    assert not any(path.is_symlink() for path in kept.values())
    assert not {"workload/passwd-link", "workload/folder-link", "workload/pipe", "workload/socket",
                "workload/linked.txt"} & set(kept)
    assert all(path.stat().st_nlink == 1 for path in kept.values() if path.is_file())
    assert not any(b"host secret" in path.read_bytes() for path in kept.values() if path.is_file())
    said = RunPaths(disk_run).scratch_copy.read_text()
    for planted in ("passwd-link", "folder-link", "pipe", "socket", "linked.txt"):
        assert f"workload/{planted}" in said
        assert any(f"workload/{planted}" in problem for problem in left_out)
    assert "'/etc/passwd'; not followed" in said and str(scratch_run) in said
    assert (outside / "secret.txt").read_text() == "host secret\n"


def test_an_honest_scratch_run_is_copied_whole_and_says_nothing(tmp_path):
    scratch_run, disk_run = tmp_path / "scratch" / "run-00000", tmp_path / "runs" / "run-00000"
    (scratch_run / "world" / "files").mkdir(parents=True)
    (scratch_run / "world" / "files" / "notes.txt").write_text("notes")
    disk_run.mkdir(parents=True)
    assert scratch.Scratch(tmp_path).keep_on_disk(scratch_run, disk_run) == []
    assert (disk_run / "world" / "files" / "notes.txt").read_text() == "notes"
    assert not RunPaths(disk_run).scratch_copy.exists()


def test_the_copy_never_writes_through_a_link_where_its_folder_should_be(tmp_path):
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "a.txt").write_text("a")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "copy").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileExistsError):
        copy_tree(tmp_path / "source", tmp_path / "copy")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_the_verdict_of_a_moved_run_names_its_disk_folder_not_its_scratch_one():
    moved = _MovedRun("/dev/shm/killpoint-scratch-1-x/run-00002", "runs/run-00002")
    before = "/dev/shm/killpoint-scratch-1-x/run-00002/store-at-kill-0/state.db"
    verdict = moved.verdict(Verdict(None, findings=(Finding("p", f"{before}: unreadable", evidence=(before,)),),
                                    notes=(f"note on {before}",), error=f"{before}: unreadable",
                                    rules=(RuleResult("r", "unknown", f"{before}: unreadable"),)))
    after = "runs/run-00002/store-at-kill-0/state.db"
    assert verdict == Verdict(None, findings=(Finding("p", f"{after}: unreadable", evidence=(after,)),),
                              notes=(f"note on {after}",), error=f"{after}: unreadable",
                              rules=(RuleResult("r", "unknown", f"{after}: unreadable"),))
    incarnation = Incarnation(number=0, pid=1, exit_code=None, killed_at="c1:after_started", timed_out=False,
                              points=(), seconds=0.1, stderr_tail=f"workload wrote {before}",
                              protocol_problems=(f"{before}: refused",))
    moved_incarnation = moved.incarnation(incarnation)
    assert moved_incarnation.protocol_problems == (f"{after}: refused",)
    assert moved_incarnation.stderr_tail == f"workload wrote {before}"  # the workload's own words, as written
