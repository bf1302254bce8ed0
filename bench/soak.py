"""False-positive soak: the reference runtime across every scenario, random schedules
with torn tails and timed kills mixed in. It must report 0 findings.

    .venv/bin/python bench/soak.py --runs 10000 --jobs 2 [--seed 0] [--backend forkserver]

The runs are split evenly across scenarios/*.toml; each scenario gets its own
seed derived from --seed, so a finding prints a token that replays it alone. The
evidence is deleted after a clean soak and kept (its directory printed) otherwise.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from harness.backends import BACKENDS
from harness.explore import random_batches
from harness.scenario import load_scenario
from harness.schedule import RandomFaults
from harness.session import run_session

ROOT = Path(__file__).resolve().parent.parent
MIXED = RandomFaults(max_kills=2, torn_rate=0.25, timed_rate=0.25)


def soak(runs: int, jobs: int, seed: int, runs_dir: Path, backend: str) -> tuple[int, int, float, list[str]]:
    """(runs, findings, seconds, repro tokens of failing runs)."""
    scenarios = sorted((ROOT / "scenarios").glob("*.toml"))
    started = time.monotonic()
    total, tokens = 0, []
    for number, path in enumerate(scenarios):
        share = runs // len(scenarios) + (1 if number < runs % len(scenarios) else 0)
        scenario = load_scenario(path)
        _, outcomes = run_session(scenario, random_batches(scenario.plan, seed + number, share, MIXED,
                                                           window_from_golden=True),
                                  runs_dir / path.stem, backend_name=backend, jobs=jobs)
        total += len(outcomes)
        tokens += [outcome.token for outcome in outcomes if not outcome.verdict.valid]
        print(f"{path.stem:<20} {len(outcomes):>6} runs  "
              f"{sum(1 for o in outcomes if not o.verdict.valid)} findings", flush=True)
    return total, len(tokens), time.monotonic() - started, tokens


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=BACKENDS, default="subprocess")
    args = parser.parse_args()
    runs_dir = Path(tempfile.mkdtemp(prefix="killpoint-soak-"))
    runs, findings, seconds, tokens = soak(args.runs, args.jobs, args.seed, runs_dir, args.backend)
    print(f"soak: {runs} runs on {args.backend}, {findings} failing, {seconds:.0f}s wall "
          f"({runs / seconds:.1f} runs/s)")
    if findings:
        print(f"evidence kept in {runs_dir}")
    else:
        shutil.rmtree(runs_dir)
    for token in tokens[:10]:
        print(f"reproduce: killpoint repro {token}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
