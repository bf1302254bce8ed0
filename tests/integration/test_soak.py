"""A short false-positive soak: the reference runtime, every scenario, random schedules
with torn tails and timed kills mixed in: not one finding (bench/soak.py runs 10,000)."""

from __future__ import annotations

from bench.soak import soak


def test_reference_runtime_soak_has_no_findings(tmp_path):
    runs, findings, _, tokens = soak(504, 2, 7, tmp_path, "subprocess")
    assert runs == 504
    assert findings == 0, "\n".join(f"killpoint repro {token}" for token in tokens[:5])
