"""False-positive soak: correct runtimes under every mode of exploration. It must report 0 findings.

    .venv/bin/python bench/soak.py --runs 10000 --jobs 2 [--seed 0] [--hunt-share 0.3] [--agent-share 0.1]
                                   [--backend NAME]

Three parts share the runs:

- scenario schedules: the reference runtime over every scenarios/*.toml, random
  schedules of up to two kills with torn tails and timed kills mixed in; each
  scenario gets its own seed derived from --seed, so a finding's token replays it;
- hunt plans (``--hunt-share`` of the runs, weighted between the runtimes): the
  examples ``killpoint hunt`` draws from the calls of every scenario (plans that
  repeat a call, catalogue drift, torn tails, a second kill during recovery),
  run against the reference runtime and against the standalone one, which shares
  no code with killpoint. A failing example's scenario file is written beside
  its evidence, and its token replays it;
- agents (``--agent-share`` of the runs): the reference agent judged at its
  network seams (scenarios/agents, one with tools it declares), random schedules
  with timed kills mixed in over its scenarios, and hunt plans drawn from their calls (a plan calls each
  at most once: the tool service tells calls by their arguments).

Every workload runs on its default backend (the fork server for ``{python}``
workloads) unless --backend says otherwise. The evidence is deleted after a
clean soak and kept (its directory printed) otherwise.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from killpoint.harness.backends import make_backend
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.frontends.spec import build_spec, resolve_backend, run_spec
from killpoint.harness.model import BACKENDS
from killpoint.harness.schedules.hunt import FOUND_NAME, CallPool, Example, ExampleJudge, call_pool, draw_examples

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "scenarios").glob("*.toml"))
# The correct agent's scenarios (the mutants' and the frameworks' are not correct runtimes); hunt plans are drawn
# from the first two, whose tools are the fake tools (shop_tools declares its own, which no other plan serves).
AGENT_SCENARIOS = [ROOT / "scenarios" / "agents" / name
                   for name in ("reference_agent.toml", "one_append.toml", "shop_tools.toml")]
AGENT_HUNT_SCENARIOS = AGENT_SCENARIOS[:2]
# The correct runtimes hunt plans run against: (workload, weight in the hunt share). None keeps the
# scenarios' own workload, the reference runtime. The standalone one starts `python -m killpoint.fake_tools` for
# every tool call, which makes its runs about fifteen times slower, so it gets a smaller share.
RUNTIMES: dict[str, tuple[str | None, int]] = {
    "reference": (None, 4),
    "standalone": (f"{{python}} {ROOT / 'scenarios' / 'standalone' / 'runtime.py'}", 1),
}
AGENTS: dict[str, tuple[str | None, int]] = {"reference agent": (None, 1)}


def split(total: int, weights: list[int]) -> list[int]:
    """``total`` shared out in proportion to ``weights``; what rounding leaves goes one each to the first."""
    shares = [total * weight // sum(weights) for weight in weights]
    for index in range(total - sum(shares)):
        shares[index] += 1
    return shares


@dataclass
class Tally:
    """What one part of the soak ran: judged runs, failing ones, plans the runtime could not run at all."""

    name: str
    runs: int = 0
    tokens: tuple[str, ...] = ()
    unrunnable: int = 0
    seconds: float = 0.0

    @property
    def findings(self) -> int:
        return len(self.tokens)


def scenario_schedules(runs: int, jobs: int, seed: int, runs_dir: Path, backend: str | None,
                       scenarios: list[Path] = SCENARIOS, torn_tail: bool = True) -> list[Tally]:
    """``runs`` random schedules spread evenly over the scenario files, each with its own (correct) workload."""
    tallies = []
    for number, (path, share) in enumerate(zip(scenarios, split(runs, [1] * len(scenarios)))):
        if not share:
            continue
        started = time.monotonic()
        # As `killpoint run SCENARIO --random SHARE --torn-tail --timed --seed SEED+N` would.
        spec = build_spec(load_scenario(path), random=share, torn_tail=torn_tail, timed=True, seed=seed + number,
                          backend=backend, jobs=jobs, runs_dir=runs_dir / path.stem)
        _, outcomes = run_spec(spec)
        tallies.append(Tally(path.stem, len(outcomes),
                             tuple(outcome.token for outcome in outcomes if not outcome.verdict.valid),
                             seconds=time.monotonic() - started))
        print(describe(tallies[-1]), flush=True)
    return tallies


_worker_judge: ExampleJudge | None = None


def _start_worker(pool: CallPool, backend: tuple[str, dict[str, str]], work: Path) -> None:
    global _worker_judge
    name, options = backend
    _worker_judge = ExampleJudge(pool, make_backend(name, **options), Path(tempfile.mkdtemp(prefix="worker-", dir=work)))


def _judge_in_worker(example: Example, *, seed: int) -> tuple[str, ...] | None:
    """The repro token of a failing run, () for a passing one; None for a plan the runtime cannot run even
    without a crash."""
    assert _worker_judge is not None
    outcome = _worker_judge.judge(example)
    if outcome is None:
        return None
    if outcome.verdict.valid:
        return ()
    description = f"a hunt plan drawn by bench/soak.py (seed {seed}) that failed on a correct runtime"
    return (_worker_judge.keep(example, outcome, outcome.run_dir / FOUND_NAME, description)[1],)


def hunt_plans(runs: int, jobs: int, seed: int, runs_dir: Path, backend: str | None,
               scenarios: list[Path] = SCENARIOS, runtimes: dict[str, tuple[str | None, int]] = RUNTIMES,
               ) -> list[Tally]:
    """``runs`` hunt examples drawn from the scenarios' calls, split between the runtimes (same draws for each)."""
    tallies = []
    shares = split(runs, [weight for _, weight in runtimes.values()])
    for (name, (workload, _)), share in zip(runtimes.items(), shares):
        if not share:
            continue
        started = time.monotonic()
        pool = call_pool(scenarios, workload)
        work = runs_dir / f"hunt-{name}"
        work.mkdir(parents=True)
        chosen = resolve_backend(pool.base, backend)
        tally = Tally(f"hunt plans, {name}")
        with ProcessPoolExecutor(jobs, initializer=_start_worker, initargs=(pool, chosen, work)) as workers:
            for judged in workers.map(partial(_judge_in_worker, seed=seed), draw_examples(pool, share, seed=seed)):
                if judged is None:
                    tally.unrunnable += 1
                    continue
                tally.runs += 1
                tally.tokens += judged
        tally.seconds = time.monotonic() - started
        tallies.append(tally)
        print(describe(tally), flush=True)
    return tallies


def soak(runs: int, jobs: int, seed: int, runs_dir: Path, *, hunt_share: float = 0.3, agent_share: float = 0.1,
         backend: str | None = None) -> tuple[list[Tally], float]:
    """Every part's tally, and the wall seconds of the whole soak."""
    started = time.monotonic()
    hunted, agents = round(runs * hunt_share), round(runs * agent_share)
    tallies = scenario_schedules(runs - hunted - agents, jobs, seed, runs_dir, backend)
    tallies += hunt_plans(hunted, jobs, seed, runs_dir, backend)
    # A torn tail cuts killpoint's journal, which an agent judged at its seams does not keep.
    agent_hunted = agents // 2
    tallies += scenario_schedules(agents - agent_hunted, jobs, seed, runs_dir, backend, AGENT_SCENARIOS,
                                  torn_tail=False)
    tallies += hunt_plans(agent_hunted, jobs, seed, runs_dir, backend, AGENT_HUNT_SCENARIOS, AGENTS)
    return tallies, time.monotonic() - started


def describe(tally: Tally) -> str:
    unrunnable = f"  ({tally.unrunnable} plans the runtime cannot run uncrashed, skipped)" if tally.unrunnable else ""
    return f"{tally.name:<24} {tally.runs:>6} runs  {tally.findings} findings  {tally.seconds:6.1f}s{unrunnable}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hunt-share", type=float, default=0.3, help="share of the runs given to hunt plans (default 0.3)")
    parser.add_argument("--agent-share", type=float, default=0.1,
                        help="share of the runs given to the reference agent (default 0.1)")
    parser.add_argument("--backend", choices=BACKENDS, help="default: each workload's own (forkserver for {python})")
    args = parser.parse_args()
    runs_dir = Path(tempfile.mkdtemp(prefix="killpoint-soak-"))
    tallies, seconds = soak(args.runs, args.jobs, args.seed, runs_dir, hunt_share=args.hunt_share,
                            agent_share=args.agent_share, backend=args.backend)
    runs, findings = sum(tally.runs for tally in tallies), sum(tally.findings for tally in tallies)
    print(f"soak: {runs} runs, {findings} failing, {seconds:.0f}s wall ({runs / seconds:.1f} runs/s)")
    if findings:
        print(f"evidence kept in {runs_dir}")
    else:
        shutil.rmtree(runs_dir)
    for token in [token for tally in tallies for token in tally.tokens][:10]:
        print(f"reproduce: killpoint repro {token}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
