"""One session spec: the CLI's flags and the plugin's options build it through one function, with one set of
defaults; one generator per schedule mode, the same draws as before the modes were unified."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from typing import Any

import pytest

from killpoint.harness.config import defaults
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.execute.scratch import default_root
from killpoint.harness.frontends import cli, pytest_plugin
from killpoint.harness.frontends.spec import CHOICES, SessionSpec, build_spec, spec_from_args
from killpoint.harness.model import AtPoint, GoldenRun
from killpoint.harness.schedules.explore import ExhaustiveMode, GivenMode, RandomMode, TimedMode
from killpoint.harness.schedules.hunt import call_pool, draw_examples
from killpoint.harness.schedules.schedule import RandomFaults, derived_seed, random_schedule
from tests.helpers import DEMO, ROOT

RUNS_DIR = Path("spec-runs")


def cli_spec(*flags: str) -> SessionSpec:
    args = cli.build_parser().parse_args(["run", str(DEMO), "--runs-dir", str(RUNS_DIR), *flags])
    return spec_from_args(args, load_scenario(DEMO))


def plugin_spec(options: dict[str, Any], keywords: dict[str, Any]) -> SessionSpec:
    """The spec of ``killpoint_run(DEMO, **keywords)`` under ``--killpoint-*`` ``options`` (seed 11 unless given)."""
    settings = pytest_plugin.Settings(**{"seed": 11, "seed_drawn": False, "runs": None, "depth": None, "shard": None,
                                         "backend": None, "report_dir": None, **options})
    return build_spec(load_scenario(DEMO), **pytest_plugin.session_choices(settings, RUNS_DIR, **keywords))


@pytest.mark.parametrize(("flags", "options", "keywords"), [
    ((), {}, {}),
    (("--random", "3", "--seed", "11"), {"runs": 3}, {}),
    (("--random", "3", "--seed", "4"), {"runs": 3}, {"seed": 4}),
    (("--random", "2", "--seed", "11"), {"depth": 2}, {"runs": 2}),  # a keyword's mode beats an option's
    (("--exhaustive", "--depth", "2"), {"depth": 2}, {}),
    (("--exhaustive", "--depth", "2"), {"runs": 5}, {"depth": 2}),
    (("--kill-at", "c3:after_effect", "--kill-at", "after_decisions"), {"runs": 5},
     {"kill_at": ["c3:after_effect", "after_decisions"]}),
    (("--shard", "2/3", "--backend", "subprocess", "--keep-all", "-j", "2", "--timeout", "5"),
     {"shard": (2, 3), "backend": "subprocess", "keep_all": True}, {"jobs": 2, "timeout": 5.0}),
    (("--min-coverage", "90"), {"min_coverage": 90.0}, {}),
    (("--no-scratch", "-j", "1"), {"no_scratch": True, "jobs": 1}, {}),
    (("--scratch", "/tmp", "-j", "3"), {"scratch": Path("/tmp")}, {"jobs": 3}),
])
def test_the_cli_and_the_plugin_given_the_same_choices_build_equal_specs(flags, options, keywords):
    assert plugin_spec(options, keywords) == cli_spec(*flags)


def test_the_defaults_are_the_documented_ones(monkeypatch):
    monkeypatch.setenv("CI", "true")
    scenario = load_scenario(DEMO)
    spec = build_spec(scenario, runs_dir=RUNS_DIR)
    assert spec.mode == ExhaustiveMode(defaults.DEPTH) == ExhaustiveMode(1)
    assert (spec.backend, spec.backend_options) == ("forkserver", {})  # a {python} workload
    assert (spec.jobs, spec.keep_all, spec.stop_at_first_failure, spec.shard, spec.min_coverage, spec.drift) == (
        defaults.JOBS, False, False, None, None, None)
    assert defaults.JOBS == len(os.sched_getaffinity(0))  # the cores this process may run on
    assert spec.scratch == default_root()
    assert build_spec(scenario, timed=True).mode == TimedMode(defaults.TIMED_RUNS, 0) == TimedMode(20, 0)
    assert build_spec(scenario, random=4, torn_tail=True, timed=True).mode == RandomMode(
        4, 0, RandomFaults(torn_rate=0.25, timed_rate=0.25))
    assert build_spec(scenario).runs_dir.parent == Path("killpoint-runs")
    shell = build_spec(scenario, backend="subprocess")
    assert shell.describe_backend() == "backend subprocess" and shell.describe() == "exhaustive to depth 1"


def test_docker_runs_are_carried_out_on_disk_unless_scratch_is_named(tmp_path):
    """A container bind-mounts its run directory: an engine in a VM or elsewhere shares the runs directory
    the user chose, rarely the harness's /dev/shm, and its containers' run-directory label names evidence."""
    scenario = load_scenario(DEMO)
    assert build_spec(scenario, backend="docker").scratch is None
    assert build_spec(scenario, backend="docker", scratch=tmp_path).scratch == tmp_path.resolve()
    assert build_spec(scenario, backend="subprocess").scratch == default_root()


def test_the_backend_help_of_the_cli_and_the_plugin_is_the_one_default():
    """The plugin's help said the backend defaulted to subprocess; it is forkserver for a {python} workload."""
    helps = {}

    class Group:
        def addoption(self, flag: str, **settings: object) -> None:
            helps[flag] = settings.get("help")

    class Parser:
        def getgroup(self, *names: str) -> Group:
            return Group()

    pytest_plugin.pytest_addoption(Parser())
    wording = "the scenario file's, else forkserver for a {python} workload, else subprocess"
    assert helps["--killpoint-backend"] == f"how incarnations run (default: {wording})"
    run_help = " ".join(_help_of(["run", "--help"]).split())
    assert f"(default: {wording})" in run_help


def _help_of(argv: list[str]) -> str:
    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
        cli.build_parser().parse_args(argv)
    return text.getvalue()


def test_every_choice_is_a_flag_of_killpoint_run():
    args = vars(cli.build_parser().parse_args(["run", str(DEMO)]))
    assert set(CHOICES) <= set(args), set(CHOICES) - set(args)


def test_a_scenario_files_schedule_chooses_for_the_plugin_too(tmp_path):
    """The plugin used to ignore [schedule]; now the file's kill_at is the session, as for `killpoint run`."""
    text = DEMO.read_text().replace('mode = "exhaustive"', 'kill_at = ["c2:after_effect"]')
    (tmp_path / "pinned.toml").write_text(text)
    scenario = load_scenario(tmp_path / "pinned.toml")
    settings = pytest_plugin.Settings(11, False, None, None, None, None, None)
    spec = build_spec(scenario, **pytest_plugin.session_choices(settings, RUNS_DIR))
    assert cli.main(["run", str(tmp_path / "pinned.toml"), "--seed", "3"], out=io.StringIO()) == 2  # nothing drawn
    assert spec.mode == GivenMode((AtPoint("after_effect", "c2"),))


def test_random_mode_draws_what_it_drew_before_the_generators_were_unified():
    plan = load_scenario(DEMO).plan
    faults = RandomFaults(torn_rate=0.25, timed_rate=0.25, timed_window_s=(0.0, 0.3))
    drawn = [tuple(map(str, random_schedule(plan, derived_seed(5, index), faults))) for index in range(4)]
    assert drawn == [("c3:after_effect", "c2:after_verify"), ("c6:before_started",), ("@0.0071",),
                     ("c1:after_started", "c6:after_finished")]


def test_hunt_draws_what_it_drew_before_the_generators_were_unified():
    # The pool of the scenario files there were then (a scenario added since brings calls of its own).
    pinned = [ROOT / "scenarios" / f"{name}.toml" for name in (
        "appointment", "bedtime", "checkout", "demo", "expense_claim", "github_fix", "refund", "sales_report",
        "terminal_build", "trip_checkup", "weekly_report_skill")]
    drawn = draw_examples(call_pool(pinned), 60, seed=7)[:3]
    assert [(tuple(call.tool for call in example.plan.calls), tuple(map(str, example.schedule)), example.drift)
            for example in drawn] == [
        (("get_location",), ("c1:before_started",), None),
        (("brightness",), ("c1:before_started",), None),
        (("brightness", "mcp_list", "template", "browser_screenshot", "edit_file", "download_file"),
         ("c6:after_finished", "c2:after_effect"), None),
    ]


def test_the_plugin_shares_the_cores_out_among_xdist_workers_unless_jobs_are_given():
    class Options:
        def __init__(self, **given: str) -> None:
            self.given = {f"--killpoint-{name.replace('_', '-')}": value for name, value in given.items()}

        def getoption(self, flag: str) -> object:
            return self.given.get(flag)

    alone = pytest_plugin.settings_from(Options(), drawn_seed=1)
    assert alone.jobs is None and build_spec(load_scenario(DEMO), **pytest_plugin.session_choices(
        alone, RUNS_DIR)).jobs == defaults.JOBS
    assert pytest_plugin.settings_from(Options(), drawn_seed=1, workers=2).jobs == max(1, defaults.JOBS // 2)
    assert pytest_plugin.settings_from(Options(), drawn_seed=1, workers=64).jobs == 1
    assert pytest_plugin.settings_from(Options(jobs="3"), drawn_seed=1, workers=2).jobs == 3


def test_a_shards_crash_free_run_is_held_only_for_the_first_kills_of_its_own_runs():
    """Another shard's run never takes a copy this session made: each would cost a hold and the budget's room."""
    points = [f"c{call}:{point}" for call in range(1, 5) for point in ("before_started", "after_started",
                                                                         "after_effect")]
    for shard in (1, 2, 3):
        spec = cli_spec("--exhaustive", "--shard", f"{shard}/3")
        wanted = spec.golden_holds_for()
        assert wanted is not None
        golden = GoldenRun(RUNS_DIR, {}, {}, tuple(points), 0.5)
        ran = {str(job.schedule[0]) for job in next(spec.batches()(golden))}
        assert ran and {point for point in points if wanted(point)} == ran
    assert all(cli_spec("--exhaustive").golden_holds_for()(point) for point in points)
    assert cli_spec("--exhaustive", "--no-pause").golden_holds_for() is None
