"""What stays on disk: a passing run keeps only its verdict, a failing one everything; ``retention.prune``
removes whole sessions by count and age and touches nothing that is not a session."""

from __future__ import annotations

import io
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from killpoint.errors import ConfigError
from killpoint.harness.config.scenario import load_scenario, with_workload
from killpoint.harness.frontends import cli
from killpoint.harness.frontends.retention import is_session_dir, prune
from killpoint.harness.frontends.spec import build_spec, run_spec
from tests.helpers import DEMO, mutant_workload

DAY = 86400.0


@pytest.fixture(scope="module")
def real_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The evidence of one real killpoint session (golden run and one killed run)."""
    session = tmp_path_factory.mktemp("real") / "session"
    assert cli.main(["run", str(DEMO), "--kill-at", "c1:after_effect", "-q", "--runs-dir", str(session)],
                    out=io.StringIO()) == 0
    return session


@pytest.mark.parametrize("keep_all", [False, True])
def test_a_passing_run_is_reduced_to_its_verdict_and_a_failing_one_kept_whole(tmp_path, keep_all):
    scenario = with_workload(load_scenario(DEMO), mutant_workload("retry_non_idempotent"))
    spec = build_spec(scenario, kill_at=["c4:after_effect"], keep_all=keep_all, runs_dir=tmp_path / "s")
    _, (failing,) = run_spec(spec)
    spec = build_spec(scenario, kill_at=["c1:after_effect"], keep_all=keep_all, runs_dir=tmp_path / "s2")
    _, (passing,) = run_spec(spec)
    assert (failing.result, passing.result) == ("failed", "passed")
    evidence = {"workload", "world", "ledger.jsonl", "plan.json", "incarnations.json", "incarnation-0.stdout"}
    whole = evidence | {"journal-at-kill-0.jsonl", "incarnation-1.stderr", "verdict.json", "run.json"}
    assert whole <= {path.name for path in failing.run_dir.iterdir()}
    assert evidence <= {path.name for path in (tmp_path / "s2" / "golden").iterdir()}
    kept = {path.name for path in passing.run_dir.iterdir()}
    assert kept >= whole if keep_all else kept == {"verdict.json", "run.json"}
    verdict = json.loads((passing.run_dir / "verdict.json").read_text())
    assert (verdict["outcome"], verdict["schedule"], verdict["token"]) == ("passed", ["c1:after_effect"], passing.token)
    assert verdict["incarnations"][0]["killed_at"] == "c1:after_effect"


def sessions_aged(real_session: Path, root: Path, *ages_in_days: float) -> list[Path]:
    """Copies of the real session under ``root``, named by age, their directories last changed that long ago."""
    root.mkdir(exist_ok=True)
    copies = []
    for age in ages_in_days:
        copy = root / f"session-{age:g}d"
        shutil.copytree(real_session, copy, symlinks=True)
        then = time.time() - age * DAY
        os.utime(copy, (then, then))
        copies.append(copy)
    return copies


@pytest.fixture
def lookalikes(tmp_path: Path, real_session: Path) -> dict[str, Path]:
    """Entries of a runs folder that are not sessions, all older than any session."""
    root = tmp_path / "runs"
    root.mkdir()
    outside = tmp_path / "outside-session"
    shutil.copytree(real_session, outside)
    (root / "notes").mkdir()
    (root / "notes" / "todo.txt").write_text("keep me")
    (root / "no-plan" / "golden").mkdir(parents=True)
    (root / "golden-is-a-link").mkdir()
    (root / "golden-is-a-link" / "golden").symlink_to(outside / "golden")
    (root / "link-to-a-session").symlink_to(outside)
    (root / "report.json").write_text("{}")
    entries = {path.name: path for path in root.iterdir()}
    for path in entries.values():
        os.utime(path, (time.time() - 100 * DAY,) * 2, follow_symlinks=False)
    return {**entries, "outside": outside}


def test_a_real_session_is_recognised_and_nothing_else_is(real_session, lookalikes):
    assert is_session_dir(real_session)
    assert not any(is_session_dir(path) for name, path in lookalikes.items() if name != "outside")


def test_keep_removes_all_but_the_newest_sessions_and_only_sessions(real_session, lookalikes, tmp_path):
    root = tmp_path / "runs"
    young, middle, old, oldest = sessions_aged(real_session, root, 0.1, 2, 5, 30)
    assert prune(root, keep=2, older_than_days=None) == [oldest, old]
    assert sorted(path.name for path in root.iterdir()) == sorted(
        [young.name, middle.name, *(name for name in lookalikes if name != "outside")])
    assert (root / "notes" / "todo.txt").read_text() == "keep me"
    assert is_session_dir(lookalikes["outside"]), "a link's target is never followed"
    assert (root / "link-to-a-session").is_symlink() and (root / "golden-is-a-link" / "golden").is_symlink()


def test_older_than_removes_only_sessions_past_that_age(real_session, lookalikes, tmp_path):
    root = tmp_path / "runs"
    young, middle, old = sessions_aged(real_session, root, 0.1, 2, 5)
    assert prune(root, keep=None, older_than_days=3) == [old]
    assert prune(root, keep=None, older_than_days=3) == []
    assert young.is_dir() and middle.is_dir() and (root / "notes").is_dir()


def test_with_both_a_session_goes_only_when_neither_newest_nor_young(real_session, lookalikes, tmp_path):
    root = tmp_path / "runs"
    young, middle, old, oldest = sessions_aged(real_session, root, 0.1, 0.5, 5, 30)
    assert prune(root, keep=3, older_than_days=1) == [oldest]
    assert prune(root, keep=1, older_than_days=1) == [old]
    assert young.is_dir() and middle.is_dir()


@pytest.mark.parametrize(("keep", "older_than_days", "message"), [
    (None, None, "give keep (how many of the newest sessions stay) or older_than_days"),
    (-1, None, "keep -1: give a number >= 0"),
    (None, -2.0, "older_than_days -2.0: give a number >= 0"),
])
def test_a_policy_that_makes_no_sense_is_refused_with_the_fix(tmp_path, keep, older_than_days, message):
    with pytest.raises(ConfigError) as refused:
        prune(tmp_path, keep=keep, older_than_days=older_than_days)
    assert message in str(refused.value)


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(ConfigError, match="no-such-runs: not a folder of killpoint sessions"):
        prune(tmp_path / "no-such-runs", keep=1, older_than_days=None)
