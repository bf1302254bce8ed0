"""The crash-free run held at each of its points: one state per first kill there, and its own times untouched.

A sweep's runs of one kill start from these states (``point_snapshots``), so
each must be the run directory as that kill would leave it; and timed kills are
drawn in the crash-free run's point times, so the time it spends held must not
count as its work.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pytest

from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.execute import point_snapshots
from killpoint.harness.execute.point_snapshots import RunSharing
from killpoint.harness.execute.prefixes import GOLDEN_RUN, Prefixes
from killpoint.harness.execute.runner import run_golden
from killpoint.harness.layout import RunPaths
from killpoint.harness.model import AtPoint
from killpoint.harness.schedules.schedule import parse_point_reached
from killpoint.protocol import LEDGER_KILLED
from tests.helpers import DEMO

pytestmark = pytest.mark.integration
HOLD_S = 0.05  # added to every copy: 30 points hold the run 1.5 s, far above the demo's own work


def test_the_crash_free_run_leaves_one_state_per_first_kill_each_as_the_kill_leaves_it(tmp_path, forkserver):
    prefixes = Prefixes(tmp_path / "prefixes", ())
    golden = run_golden(load_scenario(DEMO), tmp_path / "golden", forkserver,
                        sharing=RunSharing.of_golden(prefixes))
    kills = {str(parse_point_reached(point)): parse_point_reached(point) for point in golden.points}
    assert prefixes.saved() == len(kills) > 20
    for kill in kills.values():
        prefix = prefixes.find((kill,), None)
        assert prefix is not None and prefix.run == GOLDEN_RUN and prefix.held and prefix.kills == 1
        restored = prefix.restore(tmp_path / f"run-{len(kills)}-{kill}".replace(":", "_"))
        assert restored is not None
        [incarnation] = restored
        assert incarnation.killed_at == str(kill) and incarnation.exit_code is None
        assert incarnation.points[-1] == str(kill) and incarnation.points == golden.points[:len(incarnation.points)]
        ledger = RunPaths(prefix.folder / "state").ledger.read_text()
        assert json.loads(ledger.splitlines()[-1]).get(LEDGER_KILLED) is not None  # the kill's marker, last


def test_the_time_the_crash_free_run_is_held_is_not_its_work(tmp_path, forkserver, monkeypatch):
    copy = point_snapshots.PointSnapshots._copy

    def slow_copy(self, building: Path, kill: AtPoint, served) -> bool:
        time.sleep(HOLD_S)
        return copy(self, building, kill, served)

    monkeypatch.setattr(point_snapshots.PointSnapshots, "_copy", slow_copy)
    golden = run_golden(load_scenario(DEMO), tmp_path / "golden", forkserver,
                        sharing=RunSharing.of_golden(Prefixes(tmp_path / "prefixes", ())))
    held_s = HOLD_S * len(set(golden.points))
    assert golden.seconds > held_s  # it was held
    # Its work, on its own clock, is what it did between the points, not the holds; so is its working period.
    assert golden.point_times_s[-1] < held_s / 2
    assert golden.work_window_s is not None and golden.work_window_s[1] < held_s / 2


def test_a_run_directory_that_grows_shrinks_how_many_states_the_budget_holds(tmp_path, monkeypatch):
    """The budget counts states as large as the run directory is at each point, not as it was at the first."""
    monkeypatch.setattr(point_snapshots, "SNAPSHOT_BUDGET_BYTES", 4 * 1024 * 1024)
    prefixes = Prefixes(tmp_path / "prefixes", ())
    for saved in range(2):
        (prefixes.folder / str(saved)).mkdir(parents=True)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    grown = run_dir / "state.bin"
    grown.write_bytes(b"x" * 1024 * 1024)
    snapshots = point_snapshots.PointSnapshots(prefixes, (), None, GOLDEN_RUN, run_dir, tmp_path, [], None,  # type: ignore[arg-type]
                                               0.0, None, contextlib.nullcontext)
    assert snapshots._room()  # 2 saved, 4 of 1 MiB allowed
    grown.write_bytes(b"x" * 3 * 1024 * 1024)
    assert not snapshots._room()  # 2 saved, 1 of 3 MiB allowed
