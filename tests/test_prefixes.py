"""A run's state is saved for its children only when it can stand in for running its incarnations again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from killpoint.harness.execute.prefixes import Prefixes
from killpoint.harness.execute.runner import save_incarnations
from killpoint.harness.model import AfterDelay, AtPoint, Drift, Incarnation

GOLDEN = ("c1:before_started", "c1:after_started", "c1:after_effect", "c2:before_started")
FIRST = AtPoint("after_started", "c1")
SECOND = AtPoint("before_started", "c2")


def killed_run(tmp_path: Path, journal: str = '{"kind":"started","op":"o1"}\n') -> tuple[Path, list[Incarnation]]:
    """A run directory as the runner leaves it after the strike of its one kill at c1:after_started."""
    run_dir = tmp_path / "run-00007"
    (run_dir / "workload").mkdir(parents=True)
    (run_dir / "workload" / "journal.jsonl").write_text(journal)
    (run_dir / "world" / "files").mkdir(parents=True)
    (run_dir / "world" / "files" / "todo.txt").write_text("milk\n")
    (run_dir / "ledger.jsonl").write_text("")
    incarnations = [Incarnation(0, 4242, None, killed_at=str(FIRST), points=GOLDEN[:2],
                                protocol_problems=())]
    save_incarnations(run_dir / "incarnations.json", incarnations)
    return run_dir, incarnations


def test_a_saved_state_starts_a_child_in_its_own_directory(tmp_path):
    prefixes = Prefixes(tmp_path / "prefixes", GOLDEN)
    run_dir, incarnations = killed_run(tmp_path)
    assert prefixes.find((FIRST, SECOND), None) is None
    assert prefixes.save((FIRST,), None, 7, run_dir, incarnations, tmp_path / "control")
    prefix = prefixes.find((FIRST, SECOND), None)
    assert prefix is not None and prefix.run == 7
    child = tmp_path / "run-00031"
    assert prefix.restore(child) == incarnations
    assert (child / "workload" / "journal.jsonl").read_text() == '{"kind":"started","op":"o1"}\n'
    assert (child / "world" / "files" / "todo.txt").read_text() == "milk\n"
    assert prefixes.find((FIRST,), None).kills == 1  # the run of (FIRST,) itself would start from its kill's state
    assert prefixes.find((SECOND, SECOND), None) is None  # another prefix
    assert "run-00007's" in prefix.note(1)


def test_a_state_naming_its_own_run_directory_is_not_shared(tmp_path):
    """A runtime that wrote an absolute path into its storage would find it pointing at another run's folder."""
    run_dir = tmp_path / "run-00007"
    _, incarnations = killed_run(tmp_path, journal=f'{{"kind":"started","op":"o1","file":"{run_dir}/workload/x"}}\n')
    prefixes = Prefixes(tmp_path / "prefixes", GOLDEN)
    assert not prefixes.save((FIRST,), None, 7, run_dir, incarnations, tmp_path / "control")
    assert prefixes.find((FIRST, SECOND), None) is None


def test_a_state_the_copy_cannot_carry_whole_is_not_shared(tmp_path):
    """A FIFO (or a symlink, a huge file) planted in the storage: the copy leaves it out, so no state is saved."""
    run_dir, incarnations = killed_run(tmp_path)
    os.mkfifo(run_dir / "workload" / "pipe")
    prefixes = Prefixes(tmp_path / "prefixes", GOLDEN)
    assert not prefixes.save((FIRST,), None, 7, run_dir, incarnations, tmp_path / "control")
    assert prefixes.find((FIRST, SECOND), None) is None and not any((tmp_path / "prefixes").glob("*/"))


@pytest.mark.parametrize("why", ["timed kill", "kill never came", "points other than the golden run's",
                                 "a process left behind"])
def test_a_run_that_may_not_replay_alike_saves_nothing(tmp_path, why):
    run_dir, incarnations = killed_run(tmp_path)
    schedule = (FIRST,)
    incarnation = incarnations[0]
    if why == "timed kill":
        schedule = (AfterDelay(0.05),)
        incarnations = [Incarnation(0, 4242, None, killed_at=str(schedule[0]), points=GOLDEN[:2])]
    elif why == "kill never came":
        incarnations = [Incarnation(0, 4242, 0, killed_at=None, points=GOLDEN)]
    elif why == "points other than the golden run's":
        incarnations = [Incarnation(0, 4242, None, killed_at=str(FIRST), points=(GOLDEN[1], GOLDEN[0]))]
    else:
        incarnations = [Incarnation(0, 4242, None, killed_at=str(FIRST), points=incarnation.points,
                                    leftovers=("4243 sleep 100",))]
    prefixes = Prefixes(tmp_path / "prefixes", GOLDEN)
    assert not prefixes.save(schedule, None, 7, run_dir, incarnations, tmp_path / "control")


def test_prefixes_are_kept_apart_by_drift(tmp_path):
    run_dir, incarnations = killed_run(tmp_path)
    prefixes = Prefixes(tmp_path / "prefixes", GOLDEN)
    drift = Drift("append", "READ_ONLY")
    assert prefixes.save((FIRST,), drift, 7, run_dir, incarnations, tmp_path / "control")
    assert prefixes.find((FIRST, SECOND), None) is None
    assert prefixes.find((FIRST, SECOND), drift) is not None


@pytest.mark.parametrize("source", ['{"run": "7", "held": false, "owners": [7]}', '{"run": 7, "held": false}',
                                    '{"run": 7, "held": false, "owners": ["run-7"]}', '[7]', '{"run": 7, "held": 1, '
                                    '"owners": [7]}', '{"run": 7, "held": false, "owners": [7, 7]}', 'not json'])
def test_a_forged_source_starts_the_run_afresh(tmp_path, source):
    """The scratch folder is a sibling of the workload's run directory: what it writes there is no saved state."""
    prefixes = Prefixes(tmp_path / "prefixes", GOLDEN)
    run_dir, incarnations = killed_run(tmp_path)
    assert prefixes.save((FIRST,), None, 7, run_dir, incarnations, tmp_path / "control")
    assert prefixes.find((FIRST, SECOND), None).whose(1) == (7,)
    (prefixes._folder((FIRST,), None) / "source.json").write_text(source)
    assert prefixes.find((FIRST, SECOND), None) is None


@pytest.mark.parametrize("kind", ["symlink", "fifo", "hard link"])
def test_a_source_that_is_no_regular_file_of_its_own_starts_the_run_afresh_at_once(tmp_path, kind):
    """A planted link to a well-formed source.json elsewhere is not followed, nor its hard link believed, and a
    FIFO in its place is not waited on (the find returns: a blocking open would hang the harness here)."""
    prefixes = Prefixes(tmp_path / "prefixes", GOLDEN)
    run_dir, incarnations = killed_run(tmp_path)
    assert prefixes.save((FIRST,), None, 7, run_dir, incarnations, tmp_path / "control")
    source = prefixes._folder((FIRST,), None) / "source.json"
    planted = tmp_path / "planted.json"
    planted.write_bytes(source.read_bytes())  # well formed: only what it is makes it refused
    source.unlink()
    {"symlink": lambda: source.symlink_to(planted), "fifo": lambda: os.mkfifo(source),
     "hard link": lambda: os.link(planted, source)}[kind]()
    assert prefixes.find((FIRST, SECOND), None) is None
