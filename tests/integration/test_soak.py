"""A short false-positive soak: correct runtimes must give not one finding (bench/soak.py runs 10,000).

The reference runtime over every scenario with random schedules (torn tails and timed
kills mixed in), and the plans ``killpoint hunt`` draws (repeated calls, drift, torn
tails, a second kill during recovery) against the reference and the standalone runtime,
each on its default backend; and the reference agent at its network seams, random
schedules and hunt plans alike.
"""

from __future__ import annotations

import tempfile

from bench.soak import AGENT_SCENARIOS, SCENARIOS, soak
from killpoint.harness.model import TornTail
from killpoint.harness.schedules.hunt import call_pool, draw_examples
from tests.helpers import DEMO


def test_correct_runtimes_soak_has_no_findings(tmp_path):
    tallies, _ = soak(500, 2, 7, tmp_path, hunt_share=0.3, agent_share=0.1)
    runs = {tally.name: tally.runs for tally in tallies}
    assert sum(runs[path.stem] for path in SCENARIOS) == 300, runs
    assert runs["hunt plans, reference"] >= 100 and runs["hunt plans, standalone"] >= 20, runs
    assert sum(runs[path.stem] for path in AGENT_SCENARIOS) == 25 and runs["hunt plans, reference agent"] >= 20, runs
    tokens = [token for tally in tallies for token in tally.tokens]
    assert not tokens, "\n".join(f"killpoint repro {token}" for token in tokens[:5])


def test_the_soaks_hunt_plans_are_drawn_the_same_every_time_and_cover_every_mode():
    pool = call_pool(SCENARIOS)
    drawn = draw_examples(pool, 120, seed=7)
    assert drawn == draw_examples(pool, 120, seed=7) and drawn != draw_examples(pool, 120, seed=8)
    assert len(drawn) == 120
    assert any(len({(call.tool, str(call.args)) for call in example.plan.calls}) < len(example.plan.calls)
               for example in drawn), "no plan repeats a call"
    assert any(example.drift for example in drawn), "no drift"
    assert any(isinstance(kill.fault, TornTail) for example in drawn for kill in example.schedule), "no torn tail"
    assert any(len(example.schedule) == 2 for example in drawn), "no second kill"


def test_a_hunt_that_passes_leaves_nothing_behind(killpoint, tmp_path, monkeypatch):
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where hunt keeps its runs' evidence
    out = tmp_path / "out"
    result = killpoint("hunt", DEMO, "--examples", "25", "--seed", "4", "--out", out)
    assert result.exit_code == 0, result.out
    assert "no failure in 25 examples" in result.out
    assert list(temp.iterdir()) == []
    assert not out.exists() or list(out.iterdir()) == []
