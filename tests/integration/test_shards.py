"""Shards 1/3, 2/3 and 3/3 of `killpoint run --exhaustive` together run exactly the full set, once each."""

from __future__ import annotations

import json

from tests.helpers import DEMO


def schedules_in(path) -> list[tuple[str, ...]]:
    return [tuple(run["schedule"]) for run in json.loads(path.read_text())["runs"]]


def test_shards_partition_the_exhaustive_set(killpoint, tmp_path):
    assert killpoint("run", DEMO, "--exhaustive", "-j", "2", "--json", tmp_path / "full.json").exit_code == 0
    full = schedules_in(tmp_path / "full.json")
    shards = []
    for shard in (1, 2, 3):
        result = killpoint("run", DEMO, "--exhaustive", "--shard", f"{shard}/3", "--json", tmp_path / f"{shard}.json")
        assert result.exit_code == 0, result.out + result.err
        assert f"exhaustive to depth 1, shard {shard}/3" in result.out
        shards.append(schedules_in(tmp_path / f"{shard}.json"))
    assert all(shards), "a shard ran nothing: the split is lopsided"
    together = [schedule for shard in shards for schedule in shard]
    assert len(together) == len(set(together)), "a schedule ran in two shards"
    assert sorted(together) == sorted(full) and len(full) == 30
