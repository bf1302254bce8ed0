"""``killpoint hunt``: search plan x schedule space with Hypothesis and shrink a failure.

Plans are drawn from a pool of call templates (the calls of the scenario
files, with their worlds merged), schedules from crash points of the drawn
plan, optionally with a torn tail, a second kill during recovery, and
catalogue drift; with ``no_pause`` every kill is ``/now``. Hypothesis shrinks
a failing example by dropping calls and kills, so what is printed is small: a
scenario file the user can keep and a repro token that reruns it exactly.

Each example runs as one job of a session does (``session.run_job``), so its
run directory holds the same evidence and verdict.json as ``killpoint run``'s.
The runs' evidence goes to a temporary directory: deleted when the hunt
passes, kept (``HuntResult.evidence`` names the failing run in it) when it
fails, so a hunt leaves nothing in the user's tree but the shrunk scenario. A
hunt none of whose examples could run even without a crash is a workload error
(exit 2), its crash-free runs kept as the evidence it names, never a pass.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import tomli_w
from hypothesis import HealthCheck, Phase, given
from hypothesis import seed as hypothesis_seed
from hypothesis import settings
from hypothesis import strategies as st

from killpoint import protocol
from killpoint.errors import ConfigError, WorkloadError
from killpoint.harness.backends import Backend, make_backend
from killpoint.harness.config import defaults
from killpoint.harness.config.scenario import load_scenario, with_workload
from killpoint.harness.execute.runner import run_golden
from killpoint.harness.execute.session import run_job, token_for, write_verdict
from killpoint.harness.faults import lazyfs
from killpoint.harness.frontends.spec import resolve_backend
from killpoint.harness.model import Drift, GoldenRun, Job, Plan, PlannedCall, RunOutcome, Scenario, Verdict
from killpoint.harness.schedules.schedule import EveryKill, Schedule, draw_schedule

FOUND_NAME = "hunt-found.toml"


@dataclass(frozen=True)
class Example:
    plan: Plan
    schedule: Schedule
    drift: Drift | None


@dataclass(frozen=True)
class Found:
    """A hunt's shrunk failure: the example, its verdict, the scenario file and token that replay it."""

    example: Example
    verdict: Verdict
    scenario_file: Path
    token: str
    evidence: Path  # the failing run's directory, kept whole


@dataclass(frozen=True)
class HuntResult:
    examples: int  # examples run, shrinking included
    found: Found | None = None
    unknown: int = 0  # examples the checker could not judge: never shrunk as a failure, never a pass


@dataclass(frozen=True)
class CallPool:
    """What plans are drawn from: distinct calls of some scenarios, run in one scenario holding all their worlds."""

    templates: tuple[PlannedCall, ...]
    base: Scenario

    def scenario_for(self, plan: Plan) -> Scenario:
        """The base scenario running ``plan``; an agent's model makes a drawn plan's calls one a turn."""
        agent = None if self.base.agent is None else {k: v for k, v in self.base.agent.items() if k != "turns"}
        return replace(self.base, name="hunt", plan=plan, agent=agent)

    @property
    def points(self) -> tuple[str, ...]:
        """The points a drawn kill lands at: an agent's held seams, else a protocol runtime's call points.

        At ``model_reply`` and ``tool_reply`` the agent already has the reply and runs on until the SIGKILL
        lands, so what it did by then varies from run to run: a shrunk example there would not replay.
        """
        return protocol.HELD_SEAM_POINTS if self.base.agent is not None else protocol.CALL_POINTS


def call_pool(scenario_files: Iterable[Path], workload: str | None = None) -> CallPool:
    """Every call of the given scenarios (deduplicated), in the first one's settings with their worlds merged.

    ``workload`` replaces the first scenario's workload (to hunt in another runtime).
    """
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
    if workload is not None:
        base = with_workload(base, workload)
    return CallPool(tuple(templates), replace(base, world_files=files, world_state=state))


@dataclass(frozen=True)
class HypothesisDraw:
    """The choices of ``schedule.draw_schedule``, made by Hypothesis so that it can shrink them.

    A hunt makes no timed kills (their replay is timing-bound), and a torn tail keeps half the record.
    """

    data: st.DrawFn

    def count(self, low: int, high: int) -> int:
        return self.data(st.integers(low, high))

    def delay(self) -> float | None:
        return None

    def choice(self, options: Sequence[str]) -> str:
        return self.data(st.sampled_from(options))

    def torn(self) -> int | None:
        return self.data(st.sampled_from((None, 500)))


MAX_KILLS = 2  # one kill, or a second during recovery


def examples(templates: tuple[PlannedCall, ...], catalogue_classes: tuple[str, ...], *,
             max_calls: int, every_kill: EveryKill = EveryKill(),
             points: tuple[str, ...] = protocol.CALL_POINTS,
             class_of: Callable[[str], str] | None = None) -> st.SearchStrategy[Example]:
    """Plans of up to ``max_calls`` calls, one or two kills at ``points``, maybe drift.

    The same template may repeat, but for an agent (``points`` its seams): its tool service tells a planned
    call by its tool and arguments alone. ``every_kill`` makes the kills ``/now`` or ``/power``: the shrunk
    example, its scenario's token and its report say so. A drift to the class a tool already has (by
    ``class_of``) is no drift: the example has none, so its token replays (``--drift`` refuses a no-op).
    """
    repeats = points != protocol.HELD_SEAM_POINTS

    @st.composite
    def draw(data: st.DrawFn) -> Example:
        chosen = data(st.lists(st.sampled_from(templates), min_size=1, max_size=max_calls, unique=not repeats))
        plan = Plan("hunt", tuple(PlannedCall(f"c{index + 1}", call.tool, call.args) for index, call in enumerate(chosen)))
        schedule = every_kill.apply(draw_schedule(plan, HypothesisDraw(data), MAX_KILLS,
                                                  tear_anywhere=every_kill.power_loss, points=points))
        drift = None
        if data(st.booleans()):
            tool = data(st.sampled_from(sorted({call.tool for call in plan.calls})))
            new_class = data(st.sampled_from(catalogue_classes))
            drift = None if class_of is not None and class_of(tool) == new_class else Drift(tool, new_class)
        return Example(plan, schedule, drift)

    return draw()


def _search(pool: CallPool, attempt: Callable[[Example], None], *, seed: int, max_examples: int, max_calls: int,
            phases: list[Phase], every_kill: EveryKill = EveryKill()) -> Callable[[], None]:
    """The seeded Hypothesis search hunt runs; drawing and hunting share it, so they see the same examples."""
    classes = tuple(sorted(set(protocol.CLASSES)))
    return hypothesis_seed(seed)(settings(
        max_examples=max_examples, deadline=None, database=None, suppress_health_check=list(HealthCheck),
        phases=phases, print_blob=False,
    )(given(examples(pool.templates, classes, max_calls=max_calls, every_kill=every_kill,
                     points=pool.points, class_of=pool.base.catalogue.class_of))(attempt)))


def draw_examples(pool: CallPool, count: int, *, seed: int, max_calls: int = defaults.HUNT_MAX_CALLS,
                  every_kill: EveryKill = EveryKill()) -> list[Example]:
    """The first ``count`` examples a hunt with ``seed`` tries, in order; the same seed draws the same list."""
    drawn: list[Example] = []
    if count <= 0:
        return drawn

    def collect(example: Example) -> None:
        drawn.append(example)

    _search(pool, collect, seed=seed, max_examples=count, max_calls=max_calls, phases=[Phase.generate],
            every_kill=every_kill)()
    return drawn[:count]


class ExampleJudge:
    """Runs examples of one pool on one backend, each as a session's job; a plan's golden run is made once."""

    def __init__(self, pool: CallPool, backend: Backend, work: Path) -> None:
        self.pool, self.backend, self.work = pool, backend, work
        self.goldens: dict[str, GoldenRun | None] = {}
        self.runs = 0
        self.cannot_run: WorkloadError | None = None  # why the last plan the workload could not run failed

    def judge(self, example: Example) -> RunOutcome | None:
        """The run's outcome, its verdict.json beside its evidence in ``work``; None when the workload cannot
        run the plan even without a crash, which is not a recovery question."""
        scenario = self.pool.scenario_for(example.plan)
        digest = example.plan.digest
        if digest not in self.goldens:
            try:
                # A folder of its own each time: a golden run the harness failed to finish is tried anew.
                folder = Path(tempfile.mkdtemp(prefix=f"golden-{digest}-", dir=self.work))
                self.goldens[digest] = run_golden(scenario, folder, self.backend)
            except WorkloadError as error:
                self.goldens[digest] = None
                self.cannot_run = error
        golden = self.goldens[digest]
        if golden is None:
            return None
        self.runs += 1
        return run_job(scenario, golden, Job(self.runs, example.schedule, None, example.drift), self.work, self.backend)

    def keep(self, example: Example, outcome: RunOutcome, path: Path, description: str) -> tuple[Path, str]:
        """Write the failing example as a scenario file at ``path``; (that file, a repro token for it).

        The run's verdict.json then carries that token, which replays it from the file.
        """
        scenario_file = write_scenario(path, self.pool.scenario_for(example.plan), description)
        job = Job(0, example.schedule, None, example.drift)
        token = token_for(load_scenario(scenario_file), job, outcome.verdict, self.backend)
        write_verdict(replace(outcome, token=token))
        return scenario_file, token


def hunt(scenario_files: list[Path], workload: str | None, out_dir: Path, *,
         max_examples: int = defaults.HUNT_EXAMPLES, max_calls: int = defaults.HUNT_MAX_CALLS,
         seed: int = defaults.HUNT_SEED, every_kill: EveryKill = EveryKill()) -> HuntResult:
    """Search until a run fails or the budget is spent; shrink the failure; write its scenario to ``out_dir``.

    ``every_kill``: every kill ``/now`` (``--no-pause``) or ``/power`` (``--power-loss``).
    """
    if every_kill.power_loss:
        lazyfs.probe()
    pool = call_pool(scenario_files, workload)
    backend_name, backend_options = resolve_backend(pool.base, None)
    backend = make_backend(backend_name, **backend_options)
    work = Path(tempfile.mkdtemp(prefix="killpoint-hunt-"))
    judge = ExampleJudge(pool, backend, work)
    tried = 0
    last_failure: list[tuple[Example, RunOutcome]] = []
    unknown = 0

    def attempt(example: Example) -> None:
        nonlocal tried, unknown
        tried += 1
        outcome = judge.judge(example)
        unknown += outcome is not None and outcome.verdict.valid is None
        if outcome is not None and outcome.verdict.valid is False:
            last_failure.append((example, outcome))
            raise AssertionError(f"{outcome.verdict.properties}")

    search = _search(pool, attempt, seed=seed, max_examples=max_examples, max_calls=max_calls,
                     phases=[Phase.generate, Phase.shrink], every_kill=every_kill)
    try:
        search()
    except AssertionError:
        pass
    finally:
        backend.close()
    if judge.runs == 0 and judge.cannot_run is not None:
        # Not one plan ran without a crash, so no recovery was tested: a workload that cannot start, not a pass.
        # ``work`` holds nothing but those crash-free runs, kept: the message names one as its evidence.
        raise WorkloadError(f"hunt: none of the {tried} example(s) could be run: {judge.cannot_run}")
    if not last_failure:
        shutil.rmtree(work)
        return HuntResult(tried, unknown=unknown)
    failure, outcome = last_failure[-1]  # Hypothesis replays the shrunk example last
    out_dir.mkdir(parents=True, exist_ok=True)
    scenario_file, token = judge.keep(failure, outcome, out_dir / FOUND_NAME,
                                      f"found and shrunk by killpoint hunt (seed {seed}"
                                      f"{every_kill})")
    return HuntResult(tried, Found(failure, outcome.verdict, scenario_file, token, outcome.run_dir), unknown)


def write_scenario(path: Path, scenario: Scenario, description: str) -> Path:
    """A scenario file (and its catalogue beside it) holding exactly the example's plan and its world."""
    catalogue = path.with_suffix(".catalogue.json")
    catalogue.write_text(json.dumps(scenario.catalogue.to_protocol(), indent=1))
    document = {
        "name": path.stem,
        "description": description,
        "workload": [word.replace(sys.executable, "{python}") for word in scenario.workload],
        "catalogue": catalogue.name,
        "timeout": scenario.timeout_s,
        "world": {"files": scenario.world_files, "state": scenario.world_state},
        "plan": json.loads(json.dumps(scenario.plan.to_json())),
    }
    if scenario.agent is not None:  # an agent judged at its seams, as the hunted scenario was
        document["agent"] = scenario.agent
    elif scenario.journal is not None:  # judged black-box from the runtime's own store, as the hunted scenario was
        document["journal"] = dict(scenario.journal.table)
    if scenario.world_on_device:  # a power loss drops from the world as it did in the hunt
        document["world_on_device"] = True
    if scenario.database is not None:  # the workload keeps its state in the database it was hunted with
        database = scenario.database
        document["database"] = ({"url": database.url} if database.url is not None else
                                {"postgres": True, **({"settings": dict(database.settings)} if database.settings
                                                      else {})})
    path.write_text(tomli_w.dumps(document))
    return path
