"""The nemesis strikes a real process tree: every process dies, then the evidence of the kill is written.

And the process-tree utilities it and the backends use find a real tree the cheap way, agreeing with
psutil's full scan.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from killpoint import protocol
from killpoint.harness.backends import Launched
from killpoint.harness.backends._host import HostIncarnation
from killpoint.harness.backends.subprocess import SubprocessBackend
from killpoint.harness.execute import _process_tree
from killpoint.harness.execute._process_tree import KillFailed
from killpoint.harness.faults import nemesis
from killpoint.harness.model import TIMEOUT, AtPoint, PlainKill, TornTail

THREE_GENERATIONS = "sleep 60 & sh -c 'sleep 60 & wait' & wait"  # a shell, two children, a grandchild
DEADLINE_S = 5.0
JOURNAL = b'{"kind": "started", "call": "c1"}\n{"kind": "finished", "call": "c1", "status": "succeeded"}\n'


def wait_for_descendants(pid: int, count: int) -> list[int]:
    deadline = time.monotonic() + DEADLINE_S
    while len(found := _process_tree.descendant_pids(pid)) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(found) == count, found
    return found


def alive_after_deadline(pids: list[int]) -> list[int]:
    """Those of ``pids`` still alive (not gone, not a zombie) once they have had DEADLINE_S to die."""
    def alive() -> list[int]:
        living = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    living.append(pid)
            except psutil.NoSuchProcess:
                continue
        return living

    deadline = time.monotonic() + DEADLINE_S
    while (living := alive()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return living


def test_descendants_walked_from_proc_match_psutils_scan_and_all_die():
    root = subprocess.Popen(["sh", "-c", THREE_GENERATIONS], start_new_session=True)
    try:
        wait_for_descendants(root.pid, 3)
        expected = sorted(child.pid for child in psutil.Process(root.pid).children(recursive=True))
        assert len(expected) == 3
        assert sorted(_process_tree.descendant_pids(root.pid)) == expected
        assert sorted(_process_tree.child_pids(root.pid)) == sorted(c.pid for c in psutil.Process(root.pid).children())
    finally:
        assert _process_tree.kill_tree(root.pid, root.wait) == -9
    assert alive_after_deadline(expected) == []


def _in_cgroup(tmp_path: Path) -> Launched:
    """The subprocess backend's incarnation: in a cgroup of its own here."""
    env = {protocol.ENV_RUN_DIR: str(tmp_path / "workload")}
    return SubprocessBackend().launch(("sh", "-c", THREE_GENERATIONS), cwd=tmp_path, env=env,
                                      stdout=tmp_path / "out", stderr=tmp_path / "err")


def _tree_walk_only(tmp_path: Path) -> Launched:
    """The fallback of a host with no cgroups: the group and tree walk, then the environment sweep."""
    process = subprocess.Popen(["sh", "-c", THREE_GENERATIONS], start_new_session=True)
    return HostIncarnation(process.pid, process.wait, str(tmp_path / "workload"), cgroup=None)


@pytest.fixture
def evidence(tmp_path: Path) -> nemesis.StrikeSites:
    sites = nemesis.StrikeSites(tmp_path / "ledger.jsonl", tmp_path / "journal.jsonl",
                                tmp_path / "journal-at-kill-0.jsonl", tmp_path / "journal-at-kill-0.torn.jsonl")
    sites.ledger.write_bytes(b'{"call": "c1", "effect": "wrote"}\n')
    sites.journal.write_bytes(JOURNAL)
    return sites


def ledger_records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("launch", [_in_cgroup, _tree_walk_only], ids=["cgroup", "tree-walk"])
def test_a_strike_kills_the_whole_tree_then_marks_copies_and_tears(
        launch: Callable[[Path], Launched], tmp_path: Path, evidence: nemesis.StrikeSites) -> None:
    launched = launch(tmp_path)
    tree = [launched.pid, *wait_for_descendants(launched.pid, 3)]
    kill = AtPoint("after_effect", "c1", TornTail(500))

    record = nemesis.strike(launched, kill, incarnation=1, sites=evidence)

    assert alive_after_deadline(tree) == []
    assert ledger_records(evidence.ledger)[-1] == {"killed": 1, "point": "c1:after_effect", "torn": 500}
    assert evidence.journal_copy.read_bytes() == JOURNAL  # the journal as the kill left it
    torn = evidence.journal.read_bytes()
    assert JOURNAL.startswith(torn) and len(JOURNAL.splitlines()[0]) + 1 < len(torn) < len(JOURNAL)
    assert evidence.torn_copy.read_bytes() == torn  # and as the next incarnation will find it
    assert record == nemesis.Strike(
        incarnation=1, point="c1:after_effect/torn:500", fault=TornTail(500), leftovers=(),
        ledger_line_closed=False, journal_copy=evidence.journal_copy, torn_copy=evidence.torn_copy, problems=())
    assert "incarnation 1, killed by SIGKILL at c1:after_effect/torn:500, tail torn to 500/1000" in repr(record)


def test_a_strike_at_the_timeout_is_a_plain_kill_marked_timeout(tmp_path: Path, evidence: nemesis.StrikeSites) -> None:
    launched = _in_cgroup(tmp_path)
    tree = [launched.pid, *wait_for_descendants(launched.pid, 3)]

    record = nemesis.strike(launched, None, incarnation=0, sites=evidence)

    assert alive_after_deadline(tree) == []
    assert (record.point, record.fault, record.torn_copy) == (TIMEOUT, PlainKill(), None)
    assert ledger_records(evidence.ledger)[-1] == {"killed": 0, "point": "timeout"}
    assert evidence.journal.read_bytes() == evidence.journal_copy.read_bytes() == JOURNAL
    assert not evidence.torn_copy.exists()


class _Unkillable:
    """A launched incarnation whose death cannot be confirmed (a process stuck in D state)."""

    pid = 0

    def kill(self) -> None:
        pass

    def confirm_dead(self) -> None:
        raise KillFailed("pids [1234] survived SIGKILL for 5.0s")

    def wait(self) -> int:
        raise AssertionError("not waited for: it was killed")

    def sweep(self) -> list[str]:
        raise AssertionError("not swept: its kill was never confirmed")


def test_a_strike_whose_kill_is_not_confirmed_writes_no_evidence(evidence: nemesis.StrikeSites) -> None:
    with pytest.raises(KillFailed, match="survived SIGKILL"):
        nemesis.strike(_Unkillable(), AtPoint("after_effect", "c1", TornTail(500)), incarnation=0, sites=evidence)
    assert ledger_records(evidence.ledger) == [{"call": "c1", "effect": "wrote"}]  # no marker
    assert evidence.journal.read_bytes() == JOURNAL  # not torn
    assert not evidence.journal_copy.exists() and not evidence.torn_copy.exists()
