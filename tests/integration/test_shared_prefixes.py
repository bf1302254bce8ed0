"""A deeper schedule started from the state its shorter one's kills left is judged as if it had run them all.

Each pair of sessions is the same sweep with shared prefixes (the default) and
with ``--no-share-prefixes``: every run must reach the same points, be killed
at the same points and get the same verdict, and the first must really share.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import DEMO, ROOT, mutant_workload

pytestmark = pytest.mark.integration
SHARED = "shared: this run started from"
GOLDEN = "incarnation 0 is the crash-free run's, shared"


def sweep(killpoint, tmp_path, name: str, *flags: str, scenario: Path = DEMO) -> tuple[int, dict[tuple[str, ...], dict]]:
    result = killpoint("run", scenario, "--exhaustive", "--depth", "2", "-j", "2", *flags, "--json", tmp_path / name)
    runs = json.loads((tmp_path / name).read_text())["runs"]
    return result.exit_code, {tuple(run["schedule"]): run for run in runs}


def judged(run: dict) -> tuple:
    return (run["outcome"], run["rules"], run["findings"], run["unreached"],
            [(incarnation["killed_at"], incarnation["points"], incarnation["exit_code"])
             for incarnation in run["incarnations"]])


@pytest.mark.parametrize("mode", [(), ("--torn-tail",), ("--drift", "append=READ_ONLY"), ("--no-pause",)],
                         ids=["plain", "torn-tails", "drift", "no-pause"])
def test_the_reference_runtime_passes_alike_with_and_without_shared_prefixes(killpoint, tmp_path, mode):
    part = ("--shard", "1/3")  # a third of the sweep, whole subtrees: every depth-2 schedule's parent is in it
    shared_exit, shared = sweep(killpoint, tmp_path, "shared.json", *mode, *part)
    alone_exit, alone = sweep(killpoint, tmp_path, "alone.json", *mode, *part, "--no-share-prefixes")
    assert shared_exit == alone_exit == 0
    assert shared.keys() == alone.keys()
    assert {schedule: judged(run) for schedule, run in shared.items()} == \
           {schedule: judged(run) for schedule, run in alone.items()}
    depth_two = [run for schedule, run in shared.items() if len(schedule) == 2 and "/torn" not in schedule[0]]
    assert depth_two and all(any(SHARED in note for note in run["notes"]) for run in depth_two)
    # A pausing last kill's state was copied as its parent run was held at its point; a torn or /now one's was not.
    assert all(run["shared_incarnations"] == (1 if "/torn" in run["schedule"][1] or "/now" in run["schedule"][1]
                                              else 2) for run in depth_two)
    assert not any(SHARED in note for run in alone.values() for note in run["notes"])
    assert not any(run["shared_incarnations"] for run in alone.values())
    # A pausing first kill's run starts from the crash-free run held at its point, unless a drift changes what its
    # recovery is handed; a torn or /now one runs its first incarnation itself.
    depth_one = [run for schedule, run in shared.items() if len(schedule) == 1]
    holds = "--drift" not in mode and "--no-pause" not in mode
    assert all(run["shared_incarnations"] == (1 if holds and "/torn" not in run["schedule"][0] else 0)
               and any(GOLDEN in note for note in run["notes"]) == (run["shared_incarnations"] == 1)
               for run in depth_one)
    # A state taken by a parent that started from the crash-free run's copy says whose each incarnation is.
    from_golden = [(run, shared[tuple(run["schedule"][:1])]) for run in depth_two if run["shared_incarnations"] == 2
                   and shared[tuple(run["schedule"][:1])]["shared_incarnations"] == 1]
    assert bool(from_golden) == holds
    assert all(any(note.startswith(f"incarnation 0 is the crash-free run's and incarnation 1 is "
                                   f"run-{parent['index']:05d}'s, shared") for note in run["notes"])
               for run, parent in from_golden)


def test_a_second_crash_bug_is_caught_at_the_same_schedules_with_shared_prefixes(killpoint, tmp_path):
    workload = ("--workload", mutant_workload("second_crash_skips"))
    shared_exit, shared = sweep(killpoint, tmp_path, "shared.json", *workload)
    alone_exit, alone = sweep(killpoint, tmp_path, "alone.json", *workload, "--no-share-prefixes")
    assert shared_exit == alone_exit == 1
    failing = {schedule for schedule, run in shared.items() if run["outcome"] == "failed"}
    assert failing == {schedule for schedule, run in alone.items() if run["outcome"] == "failed"}
    assert ("c4:after_effect", "c4:after_verify") in failing
    assert any(SHARED in note for note in shared[("c4:after_effect", "c4:after_verify")]["notes"])
    assert {schedule: judged(run) for schedule, run in shared.items()} == \
           {schedule: judged(run) for schedule, run in alone.items()}


def test_a_runtime_with_a_store_of_its_own_passes_alike_with_and_without_shared_prefixes(killpoint, tmp_path):
    """The SQLite runtime keeps its journal in a database (and its WAL) the copies carry, held or killed."""
    scenario = ROOT / "scenarios" / "sqlite_journal" / "short.toml"
    shared_exit, shared = sweep(killpoint, tmp_path, "shared.json", scenario=scenario)
    alone_exit, alone = sweep(killpoint, tmp_path, "alone.json", "--no-share-prefixes", scenario=scenario)
    assert shared_exit == alone_exit == 0
    assert {schedule: judged(run) for schedule, run in shared.items()} == \
           {schedule: judged(run) for schedule, run in alone.items()}
    assert all(run["shared_incarnations"] == 2 for schedule, run in shared.items() if len(schedule) == 2)
