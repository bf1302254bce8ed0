"""killpoint's pytest plugin: a chaos test for your own runtime in a few lines.

    def test_my_runtime_recovers(killpoint_run):
        killpoint_run("scenarios/demo.toml", workload="python -m my_runtime")

``killpoint_run`` runs a whole session (the golden run, then every schedule,
each recovery judged) with its evidence under the test's own temporary
directory, which pytest-xdist keeps apart per worker. A test whose runtime
breaks a rule fails with the findings, and the message ends with the one
command that reproduces the first failure: ``killpoint repro TOKEN``.

Options: ``--killpoint-seed N``, ``--killpoint-runs N`` (random schedules instead
of exhaustive), ``--killpoint-depth K``, ``--killpoint-shard K/N`` (CI matrix
jobs: the shards partition every session's schedules), ``--killpoint-backend``,
``--killpoint-report-dir DIR`` (where a failing session's evidence and HTML
report are copied, for CI artifacts, and every session's JSON report is written:
``killpoint merge`` combines the shards' reports of one session into its verdict), ``--killpoint-min-coverage PCT`` (fail a
session whose runs killed fewer of the crash-free run's crash points),
``--killpoint-keep-all`` (keep passing runs' whole evidence, not only their
verdicts), ``--killpoint-no-pause`` (every crash-point kill ``/now``: the
workload kills itself at the point, no pause) and ``--killpoint-power-loss``
(every kill ``/power``: what the runtime never fsynced is lost), ``--killpoint-jobs N`` (schedules run in
parallel; default: the machine's cores, shared out among xdist workers; 1 runs them one at a time),
``--killpoint-scratch DIR`` and ``--killpoint-no-scratch`` (where runs are carried out: default /dev/shm
when it is a tmpfs, see ``killpoint run --scratch``). Under the CI profile (``CI`` set) the seed is 0. A session none of
whose scheduled kills landed fails too: it tested nothing.

The options and ``killpoint_run``'s keywords map onto the choices of
``killpoint run``'s flags (``session_choices``), so the session is built by the
same ``spec.build_spec`` with the same defaults: without ``--killpoint-runs`` or
``--killpoint-depth`` the scenario file's ``[schedule]`` chooses, else exhaustive.

The plugin is loaded by every pytest run where killpoint is installed, so it
imports the harness only inside the fixture (``defaults`` and ``_ci`` import nothing).
"""

from __future__ import annotations

import contextlib
import random
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from killpoint.harness.config import defaults
from killpoint.harness.config.limits import LIMITS
from killpoint.harness.frontends._ci import CI_SEED, ci_profile


@dataclass(frozen=True)
class Settings:
    """The session-wide options, checked once."""

    seed: int
    seed_drawn: bool
    runs: int | None
    depth: int | None
    shard: tuple[int, int] | None
    backend: str | None  # None: the default (defaults.BACKEND_HELP)
    report_dir: Path | None
    min_coverage: float | None = None  # percent of the crash-free run's crash points
    keep_all: bool = False
    no_pause: bool = False  # every crash-point kill /now
    power_loss: bool = False  # every kill /power
    jobs: int | None = None  # None: the machine's cores (defaults.JOBS)
    scratch: Path | None = None  # where runs are carried out; None: build_spec's default (/dev/shm if a tmpfs)
    no_scratch: bool = False  # carry runs out in the runs directory itself


@dataclass(frozen=True)
class KillpointResult:
    """What ``killpoint_run`` returns when every run passed."""

    runs_dir: Path
    described: str
    golden: Any  # killpoint.harness.model.GoldenRun
    outcomes: list[Any]  # killpoint.harness.model.RunOutcome, in job order


SETTINGS = pytest.StashKey[Settings]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("killpoint", "killpoint: kill your agent runtime mid-tool-call and judge its recovery")
    group.addoption("--killpoint-seed", metavar="N", help=f"seed of random schedules (default: {defaults.SEED_HELP})")
    group.addoption("--killpoint-runs", metavar="N", help="run N random schedules per session instead of exhaustive ones")
    group.addoption("--killpoint-depth", metavar="K", help=f"kills per exhaustive schedule (default {defaults.DEPTH})")
    group.addoption("--killpoint-shard", metavar="K/N", help="run only shard K of N of every session's schedules")
    group.addoption("--killpoint-backend", metavar="NAME",
                    help=f"how incarnations run (default: {defaults.BACKEND_HELP})")
    group.addoption("--killpoint-report-dir", metavar="DIR",
                    help="copy each failing session's evidence and HTML report under DIR (for CI artifacts), and write "
                         "every session's JSON report there (TEST/killpoint-N.json: killpoint merge combines shards')")
    group.addoption("--killpoint-min-coverage", metavar="PCT",
                    help="fail a session whose runs killed fewer than PCT%% (0-100) of the crash-free run's crash points")
    group.addoption("--killpoint-keep-all", action="store_true",
                    help="keep every run's whole evidence (default: a passing run keeps only its verdict.json)")
    group.addoption("--killpoint-no-pause", action="store_true", help=defaults.NO_PAUSE_HELP)
    group.addoption("--killpoint-power-loss", action="store_true", help=defaults.POWER_LOSS_HELP)
    group.addoption("--killpoint-jobs", metavar="N",
                    help=f"run N schedules of a session in parallel (default {defaults.JOBS_HELP}; "
                         f"under pytest-xdist the cores are shared out among its workers)")
    group.addoption("--killpoint-scratch", metavar="DIR", help=defaults.SCRATCH_HELP.replace("--runs-dir", "the "
                                                                                              "test's folder"))
    group.addoption("--killpoint-no-scratch", action="store_true",
                    help=defaults.NO_SCRATCH_HELP.replace("--runs-dir", "the test's folder"))


def _option_number(config: pytest.Config, flag: str, limit: str, problems: list[str]) -> Any:
    """The option's value, or None (absent, or outside ``limits.LIMITS[limit]``: then a problem naming the flag)."""
    text = config.getoption(flag)
    if text is None:
        return None
    bound = LIMITS[limit]
    try:
        value = int(text) if bound.whole else float(text)
    except ValueError:
        value = None
    if value is None or not bound.allows(value):
        problems.append(f"{flag} {text!r}: give {bound.wanted()}")
        return None
    return value


def settings_from(config: pytest.Config, drawn_seed: int | None = None, workers: int = 1) -> Settings:
    """Check every killpoint option at once; a bad one is a usage error naming its flag.

    The harness is imported only to check an option that was given. ``workers``
    (pytest-xdist's) share the machine's cores when ``--killpoint-jobs`` is not given.
    """
    problems: list[str] = []
    seed = _option_number(config, "--killpoint-seed", "seed", problems)
    runs = _option_number(config, "--killpoint-runs", "runs", problems)
    depth = _option_number(config, "--killpoint-depth", "depth", problems)
    jobs = _option_number(config, "--killpoint-jobs", "jobs", problems)
    shard = None
    if (shard_text := config.getoption("--killpoint-shard")) is not None:
        from killpoint.errors import ConfigError
        from killpoint.harness.schedules.explore import parse_shard

        try:
            shard = parse_shard(shard_text)
        except ConfigError as error:
            problems.append(str(error).replace("--shard", "--killpoint-shard"))
    if (backend := config.getoption("--killpoint-backend")) is not None:
        from killpoint.harness.backends import BACKENDS

        if backend not in BACKENDS:
            problems.append(f"--killpoint-backend {backend!r}: unknown backend; choose one of {', '.join(BACKENDS)}")
    min_coverage = _option_number(config, "--killpoint-min-coverage", "min_coverage", problems)
    scratch = None
    if (scratch_text := config.getoption("--killpoint-scratch")) is not None:
        from killpoint.errors import ConfigError as BadScratch
        from killpoint.harness.execute.scratch import chosen_root

        try:
            scratch = chosen_root(Path(scratch_text), flag="--killpoint-scratch")
        except BadScratch as error:
            problems.append(str(error))
        if config.getoption("--killpoint-no-scratch"):
            problems.append("--killpoint-scratch and --killpoint-no-scratch are exclusive; drop one of them")
    if runs is not None and depth is not None:
        problems.append("--killpoint-depth goes with exhaustive sessions, and --killpoint-runs makes them random; "
                        "drop one of them")
    if min_coverage is not None and shard is not None:
        problems.append("--killpoint-min-coverage judges the coverage of a whole session, and --killpoint-shard runs "
                        "only part of it; drop one of them")
    if problems:
        raise pytest.UsageError("killpoint: " + "; ".join(problems))
    drawn = seed is None and drawn_seed is None and not ci_profile()
    if seed is None:
        seed = drawn_seed if drawn_seed is not None else CI_SEED if ci_profile() else random.SystemRandom().randrange(2**32)
    report_dir = config.getoption("--killpoint-report-dir")
    return Settings(seed, drawn, runs, depth, shard, backend, Path(report_dir).resolve() if report_dir else None,
                    min_coverage, config.getoption("--killpoint-keep-all"), config.getoption("--killpoint-no-pause"),
                    config.getoption("--killpoint-power-loss"),
                    jobs if jobs is not None else max(1, defaults.JOBS // workers) if workers > 1 else None,
                    scratch, config.getoption("--killpoint-no-scratch"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "killpoint: a chaos test running killpoint sessions (set on every test "
                                       "that uses the killpoint_run fixture)")
    # An xdist worker takes the controller's seed, so every worker runs the same schedules.
    workerinput = getattr(config, "workerinput", None)
    config.stash[SETTINGS] = settings_from(config, workerinput.get("killpoint_seed") if workerinput else None,
                                           workerinput.get("workercount", 1) if workerinput else 1)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: hand each worker the controller's seed."""
    node.workerinput["killpoint_seed"] = node.config.stash[SETTINGS].seed


def pytest_report_header(config: pytest.Config) -> str:
    settings = config.stash[SETTINGS]
    seed = (f"seed {settings.seed} (drawn; --killpoint-seed {settings.seed} replays it)" if settings.seed_drawn
            else f"seed {settings.seed}")
    shard = f", shard {settings.shard[0]}/{settings.shard[1]}" if settings.shard else ""
    return (f"killpoint: {seed}{shard}" + (f", backend {settings.backend}" if settings.backend else "")
            + (", no pause" if settings.no_pause else "") + (", power loss" if settings.power_loss else ""))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "killpoint_run" in getattr(item, "fixturenames", ()):
            item.add_marker("killpoint")


@pytest.fixture
def killpoint_run(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., KillpointResult]:
    """Run a killpoint session; fail the test, ending with ``killpoint repro TOKEN``, if a run breaks a rule.

    ``killpoint_run(scenario, *, workload=None, kill_at=None, runs=None, depth=None,
    seed=None, jobs=None, timeout=None, no_pause=None, power_loss=None)``: ``scenario`` is a scenario
    file (relative to pytest's rootdir); ``workload`` replaces its command
    ({python} is this interpreter); ``kill_at`` runs one schedule (a kill point,
    or one per incarnation); ``runs`` draws random schedules; else every schedule
    up to ``depth`` kills; ``no_pause`` makes every crash-point kill ``/now``,
    ``power_loss`` every kill ``/power``; ``jobs`` schedules run in parallel (default
    ``--killpoint-jobs``, else the machine's cores). Keywords override the ``--killpoint-*`` options.
    """
    settings = request.config.stash[SETTINGS]
    kept = settings.report_dir / re.sub(r"[^\w.-]+", "_", request.node.nodeid).strip("_") if settings.report_dir else None
    sessions = 0

    def run(scenario: str | Path, *, workload: str | None = None, kill_at: str | Sequence[str] | None = None,
            runs: int | None = None, depth: int | None = None, seed: int | None = None, jobs: int | None = None,
            timeout: float | None = None, no_pause: bool | None = None,
            power_loss: bool | None = None) -> KillpointResult:
        nonlocal sessions
        sessions += 1
        name = f"killpoint-{sessions}"
        return _run(settings, _scenario_path(Path(scenario), request.config.rootpath), tmp_path / name,
                    kept / name if kept else None, workload=workload, progress=_terminal_lines(request.config),
                    kill_at=[kill_at] if isinstance(kill_at, str) else kill_at, runs=runs, depth=depth, seed=seed,
                    jobs=jobs, timeout=timeout, no_pause=no_pause, power_loss=power_loss)

    return run


def _scenario_path(path: Path, rootpath: Path) -> Path:
    """The scenario file, relative to the working directory where it lies below it.

    A repro token records this path, so a token from CI works from a checkout anywhere.
    """
    path = path if path.is_absolute() else rootpath / path
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def session_choices(settings: Settings, runs_dir: Path, *, kill_at: Sequence[str] | None = None, runs: int | None = None, depth: int | None = None,
                    seed: int | None = None, jobs: int | None = None, timeout: float | None = None,
                    no_pause: bool | None = None, power_loss: bool | None = None) -> dict[str, Any]:
    """``killpoint_run``'s keywords over the ``--killpoint-*`` options, as ``spec.build_spec``'s choices.

    They are the keywords ``killpoint run``'s flags set, so the same choices build the
    same session; what neither gives (the mode too) is ``build_spec``'s default.
    A keyword's mode beats an option's: ``kill_at``, then ``runs``, then ``depth``.
    """
    choices: dict[str, Any] = {"runs_dir": runs_dir, "jobs": settings.jobs if jobs is None else jobs,
                               "timeout": timeout, "backend": settings.backend,
                               "scratch": settings.scratch, "no_scratch": settings.no_scratch,
                               "keep_all": settings.keep_all, "min_coverage": settings.min_coverage,
                               "shard": f"{settings.shard[0]}/{settings.shard[1]}" if settings.shard else None,
                               "session_seed": settings.seed if seed is None else seed,
                               "no_pause": settings.no_pause if no_pause is None else no_pause,
                               "power_loss": settings.power_loss if power_loss is None else power_loss}
    if kill_at:
        choices["kill_at"] = list(kill_at)
    elif runs is not None or (depth is None and settings.runs is not None):
        choices["random"] = runs if runs is not None else settings.runs
    elif depth is not None or settings.depth is not None:
        choices.update(exhaustive=True, depth=depth if depth is not None else settings.depth)
    return choices


def _terminal_lines(config: pytest.Config) -> Callable[[str], object] | None:
    """Writes a line to pytest's terminal past its output capture, so a long session shows its progress as it
    runs. An xdist worker's terminal reporter reaches no terminal until its test ends, but the worker shares
    the controller's standard error: there the line goes, named by the worker (``[gw0] killpoint progress: ...``)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker is not None:
        def line(text: str) -> None:
            sys.stderr.write(f"[{worker}] killpoint {text}\n")
            sys.stderr.flush()
    elif reporter is not None:
        def line(text: str) -> None:
            reporter.write_line(f"killpoint {text}")
    else:
        return None

    def write(text: str) -> None:
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            line(text.rstrip())

    return write


def _run(settings: Settings, scenario_path: Path, runs_dir: Path, report_in: Path | None, *, workload: str | None,
         progress: Callable[[str], object] | None = None, **keywords: Any) -> KillpointResult:
    import time

    from killpoint.errors import HarnessError, InternalError
    from killpoint.harness.config.scenario import load_scenario, with_workload
    from killpoint.harness.frontends.spec import build_spec, run_spec
    from killpoint.harness.reporting import coverage
    from killpoint.harness.reporting.progress import ProgressLines, counted

    started = time.monotonic()
    try:
        scenario = load_scenario(scenario_path)
        if workload is not None:
            scenario = with_workload(scenario, workload)
        spec = build_spec(scenario, **session_choices(settings, runs_dir, **keywords))
        lines = ProgressLines(progress) if progress is not None else None
        golden, outcomes = run_spec(spec, on_outcome=lines.judged if lines else lambda outcome: None,
                                    track=lambda batches: counted(batches, lines.handed) if lines else batches)
    except InternalError:  # handled where it is raised: one that reaches here is a bug, shown with its traceback
        raise
    except HarnessError as error:
        pytest.fail(f"killpoint: {error}", pytrace=False)
    described = spec.describe()
    failures = [outcome for outcome in outcomes if not outcome.verdict.valid]
    if failures and report_in is not None:
        runs_dir, outcomes = _copy_evidence(runs_dir, outcomes, report_in)
    if report_in is not None:  # every session's, so that its shards can be merged whatever they found
        from killpoint.harness.reporting.report import session_fields, write_json_report
        from killpoint.harness.reporting.summary import summarise

        report_in.parent.mkdir(parents=True, exist_ok=True)
        write_json_report(report_in.with_suffix(".json"), scenario, golden, outcomes,
                          summarise(golden, outcomes, time.monotonic() - started), session_fields(spec))
    if (empty := spec.empty_shard(golden, outcomes)) is not None:
        # Skipped, not failed: the other shards' jobs run this session's schedules, so nothing of the runtime
        # went untested, and a failed test would make the shard's CI job red for how the matrix was cut.
        pytest.skip(f"killpoint: {scenario.name} ({described}): {empty}")
    if failures:
        pytest.fail(_failure_message(scenario, golden, outcomes, described, runs_dir, time.monotonic() - started),
                    pytrace=False)
    shortfall = coverage.untested(golden, outcomes, spec.min_coverage)
    if shortfall is not None:
        pytest.fail(f"killpoint: {scenario.name} ({described}): not enough was tested: {shortfall}\n"
                    f"evidence: {runs_dir}", pytrace=False)
    return KillpointResult(runs_dir, described, golden, outcomes)


def _copy_evidence(runs_dir: Path, outcomes: list[Any], destination: Path) -> tuple[Path, list[Any]]:
    """Copy a failing session's evidence to ``--killpoint-report-dir`` (a CI artifact); outcomes point at the copy."""
    import shutil
    from dataclasses import replace

    shutil.rmtree(destination, ignore_errors=True)  # only ever a copy this plugin made on an earlier run
    shutil.copytree(runs_dir, destination)
    return destination, [replace(outcome, run_dir=destination / outcome.run_dir.name) for outcome in outcomes]


def _failure_message(scenario: Any, golden: Any, outcomes: list[Any], described: str, runs_dir: Path,
                     seconds: float) -> str:
    """Every failing run's findings (the first few in full), the HTML report, then the repro command last."""
    from killpoint.harness.reporting.html_report import write_html_report
    from killpoint.harness.reporting.report import failure_message
    from killpoint.harness.reporting.summary import summarise

    summary = summarise(golden, outcomes, seconds)
    write_html_report(runs_dir / "report.html", scenario, golden, outcomes, summary)
    return failure_message(scenario, described, outcomes, summary, runs_dir / "report.html")
