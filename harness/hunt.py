"""``killpoint hunt``: search plan x schedule space with Hypothesis and shrink a failure.

Plans are drawn from a pool of call templates (the calls of the scenario
files, with their worlds merged), schedules from crash points of the drawn
plan, optionally with a torn tail, a second kill during recovery, and
catalogue drift. Hypothesis shrinks a failing example by dropping calls and
kills, so what is printed is small: a scenario file the user can keep and a
repro token that reruns it exactly.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import tomli_w
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from harness import protocol
from harness.backends import default_backend, make_backend
from harness.checker import Verdict, check
from harness.errors import ConfigError, WorkloadError
from harness.evidence import read_evidence
from harness.runner import Drift, GoldenRun, execute_run, run_golden
from harness.scenario import Plan, PlannedCall, Scenario, load_scenario, with_workload
from harness.schedule import TEARABLE_POINTS, KillPoint, Schedule
from harness.session import Job, token_for


@dataclass(frozen=True)
class Example:
    plan: Plan
    schedule: Schedule
    drift: Drift | None


@dataclass(frozen=True)
class HuntResult:
    examples: int
    failure: Example | None
    verdict: Verdict | None
    scenario_file: Path | None
    token: str | None


def template_pool(scenario_files: Iterable[Path]) -> tuple[list[PlannedCall], dict[str, str], dict[str, object], Scenario]:
    """Every call of the given scenarios (deduplicated), and their worlds merged."""
    templates: list[PlannedCall] = []
    files: dict[str, str] = {}
    state: dict[str, object] = {}
    base = None
    for path in scenario_files:
        scenario = load_scenario(path)
        base = base or scenario
        files.update(scenario.world_files)
        state.update(scenario.world_state)
        for call in scenario.plan.calls:
            if all((call.tool, call.args) != (seen.tool, seen.args) for seen in templates):
                templates.append(call)
    if base is None:
        raise ConfigError("hunt: give at least one scenario file to draw calls from")
    return templates, files, state, base


def examples(templates: list[PlannedCall], catalogue_classes: tuple[str, ...], *, max_calls: int) -> st.SearchStrategy[Example]:
    @st.composite
    def draw(data: st.DrawFn) -> Example:
        chosen = data(st.lists(st.sampled_from(templates), min_size=1, max_size=max_calls))
        plan = Plan("hunt", tuple(PlannedCall(f"c{index + 1}", call.tool, call.args) for index, call in enumerate(chosen)))
        kills = []
        for incarnation in range(data(st.integers(1, 2))):
            points = protocol.CALL_POINTS + (protocol.RECOVERY_POINTS if incarnation else ())
            point = data(st.sampled_from(points))
            call = None if point == protocol.AFTER_DECISIONS else data(st.sampled_from(plan.call_ids))
            torn = data(st.sampled_from((None, 500))) if point in TEARABLE_POINTS else None
            kills.append(KillPoint(point, call, torn=torn))
        drift = None
        if data(st.booleans()):
            tool = data(st.sampled_from(sorted({call.tool for call in plan.calls})))
            drift = Drift(tool, data(st.sampled_from(catalogue_classes)))
        return Example(plan, tuple(kills), drift)

    return draw()


def hunt(scenario_files: list[Path], workload: str | None, out_dir: Path, *, max_examples: int = 200,
         max_calls: int = 6, seed: int = 0) -> HuntResult:
    """Search until a run fails or the budget is spent; shrink the failure; write it out."""
    templates, files, state, base = template_pool(scenario_files)
    if workload is not None:
        base = with_workload(base, workload)
    backend = make_backend(base.backend or default_backend(base.workload))
    goldens: dict[tuple[str, str | None], GoldenRun] = {}
    work = Path(tempfile.mkdtemp(prefix="killpoint-hunt-", dir=out_dir))
    counter = iter(range(10**9))
    last_failure: list[tuple[Example, Verdict]] = []

    def scenario_for(example: Example) -> Scenario:
        return replace(base, name="hunt", plan=example.plan, world_files=files, world_state=state)

    def attempt(example: Example) -> None:
        scenario = scenario_for(example)
        key = (example.plan.digest, str(example.drift))
        if key not in goldens:
            try:
                goldens[key] = run_golden(scenario, work / f"golden-{next(counter)}", backend)
            except WorkloadError:
                return  # a plan this workload cannot run even without a crash is not a recovery question
        run_dir = work / f"run-{next(counter)}"
        execute_run(scenario, example.schedule, run_dir, backend, drift=example.drift)
        verdict = check(scenario, read_evidence(run_dir), goldens[key])
        if not verdict.valid:
            last_failure.append((example, verdict))
            raise AssertionError(f"{verdict.properties}")

    classes = tuple(sorted(set(protocol.CLASSES)))
    search = hypothesis_seed(seed)(settings(
        max_examples=max_examples, deadline=None, database=None, suppress_health_check=list(HealthCheck),
        phases=[Phase.generate, Phase.shrink], print_blob=False,
    )(given(examples(templates, classes, max_calls=max_calls))(attempt)))
    try:
        search()
    except AssertionError:
        pass
    finally:
        backend.close()
    if not last_failure:
        return HuntResult(max_examples, None, None, None, None)
    failure, verdict = last_failure[-1]
    scenario_file = write_scenario(out_dir / "hunt-found.toml", scenario_for(failure), seed)
    kept = load_scenario(scenario_file)
    token = token_for(kept, Job(0, failure.schedule, None, failure.drift), verdict, backend)
    return HuntResult(max_examples, failure, verdict, scenario_file, token)


def write_scenario(path: Path, scenario: Scenario, seed: int) -> Path:
    """A scenario file (and its catalogue beside it) holding exactly the shrunk plan and its world."""
    catalogue = path.with_suffix(".catalogue.json")
    catalogue.write_text(json.dumps(scenario.catalogue.to_protocol(), indent=1))
    document = {
        "name": path.stem,
        "description": f"found and shrunk by killpoint hunt (seed {seed})",
        "workload": [word.replace(sys.executable, "{python}") for word in scenario.workload],
        "catalogue": catalogue.name,
        "timeout": scenario.timeout_s,
        "world": {"files": scenario.world_files, "state": scenario.world_state},
        "plan": json.loads(json.dumps(scenario.plan.to_json())),
    }
    path.write_text(tomli_w.dumps(document))
    return path
