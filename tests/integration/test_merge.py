"""The demo run as three real shards (`killpoint run --shard K/3 --json`) and merged (`killpoint merge`) is
the demo run whole: the same runs, the same verdict for each schedule, the same summary, coverage map and
exit code, and an HTML report that draws every failing run from the shards' own evidence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import DEMO, mutant_workload

# A runtime that re-runs a non-idempotent tool after a kill: some schedules fail, most pass, so the
# verdicts compared are not all alike.
WORKLOAD = mutant_workload("retry_non_idempotent")
TIMINGS = ("seconds", "golden_seconds", "kill_latency_ms")  # what differs between any two sessions


def verdicts(report: dict[str, Any]) -> dict[tuple[str, ...], tuple[str, tuple[str, ...]]]:
    """Each schedule's outcome and the properties it broke."""
    return {tuple(run["schedule"]): (run["outcome"], tuple(sorted({finding["property"] for finding in run["findings"]})))
            for run in report["runs"]}


def coverage_map(output: str) -> str:
    """The coverage map a session prints, from its legend to the summary table."""
    return output[output.index("coverage: kills that landed"):output.index("killpoint summary")]


def test_three_merged_shards_judge_the_demo_as_the_unsharded_session(killpoint, tmp_path):
    whole = killpoint("run", DEMO, "--workload", WORKLOAD, "--exhaustive", "-j", "2", "--json", tmp_path / "whole.json")
    assert whole.exit_code == 1, whole.out + whole.err
    shards = []
    for shard in (1, 2, 3):
        report = tmp_path / f"shard-{shard}.json"
        result = killpoint("run", DEMO, "--workload", WORKLOAD, "--exhaustive", "-j", "2", "--shard", f"{shard}/3",
                           "-q", "--json", report, "--runs-dir", tmp_path / f"shard-{shard}")
        assert result.exit_code in (0, 1), result.out + result.err
        shards.append(report)

    merged = killpoint("merge", *shards, "--json", tmp_path / "merged.json", "--html", tmp_path / "merged.html")
    assert merged.exit_code == whole.exit_code, merged.out + merged.err
    full, together = json.loads((tmp_path / "whole.json").read_text()), json.loads((tmp_path / "merged.json").read_text())
    assert len(together["runs"]) == len(full["runs"]) == 30
    assert verdicts(together) == verdicts(full)
    assert ({key: value for key, value in together["summary"].items() if key not in TIMINGS}
            == {key: value for key, value in full["summary"].items() if key not in TIMINGS})
    assert coverage_map(merged.out) == coverage_map(whole.out)
    assert together["merged"]["given"] == [1, 2, 3] and together["merged"]["missing"] == []

    failing = [run for run in together["runs"] if run["outcome"] == "failed"]
    assert failing and all(Path(run["run_dir"]).is_dir() for run in failing)
    html = (tmp_path / "merged.html").read_text()
    assert f"Failing runs ({len(failing)})" in html and html.count("<svg") == len(failing)
    assert "draws their timelines empty" not in merged.err

    # Without shard 2 nothing is a pass: the failures of the shards given still fail the merge, and the
    # shard's absence is said.
    partial = killpoint("merge", shards[0], shards[2])
    assert partial.exit_code == (1 if any(run["outcome"] == "failed" for shard in (shards[0], shards[2])
                                          for run in json.loads(shard.read_text())["runs"]) else 3)
    assert "shard(s) 2 of 3 missing" in partial.err
