"""The pytest plugin, through pytester: five-line chaos tests pass and fail as they should,
under pytest-xdist, with the repro command last; its options reach the session; bad options
are usage errors naming the flag; the CI profile fixes the seed."""

from __future__ import annotations

import re
import subprocess
import sys
from xml.etree import ElementTree

import pytest

from tests.helpers import DEMO

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def quiet_rewrite_warning(pytester):
    """Inline runs load the plugin again, whose package the outer run has imported already."""
    pytester.makeini("[pytest]\nfilterwarnings = ignore::pytest.PytestAssertRewriteWarning\n")

CHAOS_TESTS = f"""
DEMO = {str(DEMO)!r}

def test_reference_runtime_recovers(killpoint_run):
    killpoint_run(DEMO, workload="{{python}} -m killpoint.scenarios.reference_runtime", kill_at="c4:after_started")

def test_mutant_recovers(killpoint_run):
    killpoint_run(DEMO, workload="{{python}} -m killpoint.scenarios.mutants.retry_non_idempotent", kill_at="c4:after_started")
"""


def test_chaos_tests_under_xdist_fail_with_the_repro_command_last(pytester):
    pytester.makepyfile(test_chaos=CHAOS_TESTS)
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess("-n", "2", "-p", "killpoint", f"--junitxml={junit}",
                                           "--killpoint-report-dir", "report")
    result.assert_outcomes(passed=1, failed=1)
    output = result.stdout.str()
    assert "killpoint repro kp1." in output
    assert "[interrupted-action] c4 (kill c4:after_started)" in output
    # The message ends with the repro command, alone on its line.
    lines = output.splitlines()
    after = lines.index(next(line for line in lines if line.endswith("reproduce the first failure with:"))) + 1
    # The command runs as printed here: ``killpoint`` when on PATH, else the script's path.
    assert re.fullmatch(r"\S*killpoint repro kp1\.\S+", lines[after].lstrip("E "))
    # Only the failing session's evidence and HTML report are kept for CI artifacts; every session's JSON report.
    report = pytester.path / "report"
    passed, kept = report / "test_chaos.py_test_reference_runtime_recovers", report / "test_chaos.py_test_mutant_recovers"
    assert sorted(report.iterdir()) == sorted([passed, kept])
    assert [path.name for path in passed.iterdir()] == ["killpoint-1.json"]
    assert sorted(path.name for path in kept.iterdir()) == ["killpoint-1", "killpoint-1.json"]
    assert (kept / "killpoint-1" / "report.html").is_file() and (kept / "killpoint-1" / "run-00000").is_dir()
    assert f"evidence: {kept / 'killpoint-1' / 'run-00000'}" in output
    # Each xdist worker ran its session under its own base directory.
    goldens = {golden.resolve() for golden in pytester.path.glob("runpytest-*/popen-gw*/*/killpoint-1/golden")}
    assert len(goldens) == 2 and len({golden.parts[-4] for golden in goldens}) == 2

    cases = {case.get("name"): case for case in ElementTree.parse(junit).getroot().iter("testcase")}
    assert set(cases) == {"test_reference_runtime_recovers", "test_mutant_recovers"}
    assert cases["test_reference_runtime_recovers"].find("failure") is None
    failure = cases["test_mutant_recovers"].find("failure")
    assert failure is not None and "killpoint repro kp1." in (failure.get("message", "") + (failure.text or ""))


def test_the_shards_json_reports_merge_into_the_unsharded_sessions_verdict(pytester):
    # A CI matrix: each job runs one shard with its own report directory; a last job merges the reports.
    pytester.makepyfile(test_shards=f"""
        def test_reference_runtime_recovers(killpoint_run):
            killpoint_run({str(DEMO)!r}, workload="{{python}} -m killpoint.scenarios.reference_runtime", depth=1)
    """)
    for shard in (1, 2):
        result = pytester.runpytest("--killpoint-shard", f"{shard}/2", "--killpoint-report-dir", f"shard-{shard}")
        result.assert_outcomes(passed=1)
    reports = [str(pytester.path / f"shard-{shard}" / "test_shards.py_test_reference_runtime_recovers" /
                   "killpoint-1.json") for shard in (1, 2)]
    merged = subprocess.run([sys.executable, "-m", "killpoint.harness.frontends.cli", "merge", *reports],
                            capture_output=True, text=True, timeout=120)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert "30 runs: 30 passed, 0 failed" in merged.stdout


@pytest.mark.hostile
def test_a_shard_that_holds_no_schedule_is_skipped_saying_so(pytester):
    """Not passed: it tested nothing (the demo's 30 schedules all fall in other shards of 40). Skipped, not failed:
    the other shards run them, and the shard's report is still written for ``killpoint merge``."""
    pytester.makepyfile(test_empty_shard=f"""
        def test_reference_runtime_recovers(killpoint_run):
            killpoint_run({str(DEMO)!r}, depth=1)
    """)
    result = pytester.runpytest("--killpoint-shard", "1/40", "--killpoint-report-dir", "shard-1", "-rs")
    result.assert_outcomes(skipped=1)
    assert ("shard 1/40 holds no schedule: all 30 schedule(s) of the session fall in the other shards"
            in result.stdout.str())
    assert (pytester.path / "shard-1" / "test_empty_shard.py_test_reference_runtime_recovers" / "killpoint-1.json").is_file()


def test_options_reach_every_session(pytester):
    pytester.makepyfile(test_options=f"""
        from killpoint.harness.schedules.explore import shard_of
        from killpoint.harness.schedules.schedule import derived_seed

        def test_random_runs_and_seed(killpoint_run):
            result = killpoint_run({str(DEMO)!r})
            assert result.described == "3 random schedules, seed 11, shard 2/3"
            assert all(outcome.job.seed == derived_seed(11, outcome.job.index) for outcome in result.outcomes)
            assert all(shard_of(outcome.job, 3) == 2 for outcome in result.outcomes)

        def test_exhaustive_shard(killpoint_run):
            result = killpoint_run({str(DEMO)!r}, depth=1)
            assert result.described == "exhaustive to depth 1, shard 2/3"
            assert 0 < len(result.outcomes) < 30
            assert all(shard_of(outcome.job, 3) == 2 for outcome in result.outcomes)
            assert (result.runs_dir / "golden").is_dir()
    """)
    result = pytester.runpytest("--killpoint-runs", "3", "--killpoint-seed", "11", "--killpoint-shard", "2/3",
                                "--killpoint-backend", "subprocess", "-m", "killpoint")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["killpoint: seed 11, shard 2/3, backend subprocess"])


@pytest.mark.parametrize(("flag", "value"), [
    ("--killpoint-seed", "seven"), ("--killpoint-runs", "0"), ("--killpoint-depth", "-1"),
    ("--killpoint-shard", "4/3"), ("--killpoint-shard", "two"), ("--killpoint-backend", "vm"),
    ("--killpoint-min-coverage", "101"), ("--killpoint-min-coverage", "most"), ("--killpoint-jobs", "0"),
])
def test_a_bad_option_is_a_usage_error_naming_its_flag(pytester, flag, value):
    result = pytester.runpytest(f"{flag}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{flag} {value!r}" in result.stderr.str()


def test_every_bad_option_is_named_at_once(pytester):
    result = pytester.runpytest("--killpoint-runs=x", "--killpoint-shard=0/2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--killpoint-runs 'x'" in result.stderr.str() and "--killpoint-shard '0/2'" in result.stderr.str()


@pytest.mark.parametrize(("options", "message"), [
    (["--killpoint-runs=3", "--killpoint-depth=2"], "--killpoint-depth goes with exhaustive sessions, and "
                                                    "--killpoint-runs makes them random"),
    (["--killpoint-shard=1/2", "--killpoint-min-coverage=90"], "--killpoint-min-coverage judges the coverage of "
                                                               "a whole session, and --killpoint-shard runs only part"),
    (["--killpoint-scratch=/no/such/folder"], "--killpoint-scratch /no/such/folder: no such folder"),
    (["--killpoint-scratch=/tmp", "--killpoint-no-scratch"], "--killpoint-scratch and --killpoint-no-scratch are "
                                                             "exclusive"),
])
def test_options_that_would_not_act_together_are_a_usage_error(pytester, options, message):
    result = pytester.runpytest(*options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_a_session_that_tested_too_little_fails_with_the_gate_message(pytester):
    pytester.makepyfile(test_gate=f"""
        def test_one_point_of_thirty(killpoint_run):
            killpoint_run({str(DEMO)!r}, kill_at="c3:after_effect")

        def test_no_kill_landed(killpoint_run):
            killpoint_run({str(DEMO)!r}, kill_at="@15")
    """)
    result = pytester.runpytest("--killpoint-min-coverage", "50")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*killpoint: demo (kill at c3:after_effect): not enough was tested: coverage 3.3% is below the minimum of "
        "50%: 29 of the 30 crash points of the crash-free run were never killed: c1:before_started, * ... 9 more",
        "*killpoint: demo (kill at @15.0000): not enough was tested: nothing was tested: 1 run(s) had kills scheduled "
        "and not one landed*",
    ])


def test_keep_all_keeps_a_passing_runs_whole_evidence(pytester):
    pytester.makepyfile(test_keep=f"""
        import sys

        def test_evidence(killpoint_run):
            result = killpoint_run({str(DEMO)!r}, kill_at="c4:after_started")
            (run,) = result.outcomes
            print("KEPT", sorted(path.name for path in run.run_dir.iterdir()))
    """)
    reduced = pytester.runpytest("-s").stdout.str()
    kept = pytester.runpytest("-s", "--killpoint-keep-all").stdout.str()
    assert "KEPT ['run.json', 'verdict.json']" in reduced
    assert "'ledger.jsonl'" in kept and "'journal-at-kill-0.jsonl'" in kept and "'verdict.json'" in kept


def test_ci_profile_fixes_the_seed(pytester, monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert "killpoint: seed 0\n" in pytester.runpytest().stdout.str()
    monkeypatch.delenv("CI")
    assert "(drawn; --killpoint-seed " in pytester.runpytest().stdout.str()


def test_a_bad_scenario_fails_the_test_with_the_message(pytester):
    pytester.makepyfile(test_bad="""
        def test_missing(killpoint_run):
            killpoint_run("no/such.toml")
    """)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*killpoint: *no/such.toml: cannot read the scenario*"])


def test_the_plugin_imports_no_harness_until_used(pytester):
    """A pytest run that uses no chaos test loads the plugin and nothing else of killpoint."""
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    code = ("import sys, pytest; pytest.main(['-q', '-p', 'no:cacheprovider']); "
            "print(sorted(name for name in sys.modules if name.startswith(('killpoint', 'rich'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=pytester.path).stdout
    assert "1 passed" in loaded
    # _ci and defaults import nothing, limits only the error root: the plugin reads the CI profile, words its
    # help and checks its options' values with them.
    assert loaded.strip().splitlines()[-1] == (
        "['killpoint', 'killpoint.errors', 'killpoint.harness', 'killpoint.harness.config', "
        "'killpoint.harness.config.defaults', 'killpoint.harness.config.limits', 'killpoint.harness.frontends', "
        "'killpoint.harness.frontends._ci', 'killpoint.harness.frontends.pytest_plugin']")


def test_power_loss_option_and_keyword_make_every_kill_lose_what_was_never_fsynced(pytester):
    pytester.makepyfile(test_power=f"""
        NEVER_FSYNCED = "{{python}} -m killpoint.scenarios.mutants.journal_never_fsynced"

        def test_by_option(killpoint_run):
            killpoint_run({str(DEMO)!r}, workload=NEVER_FSYNCED, kill_at="c3:after_effect")

        def test_by_keyword(killpoint_run):
            killpoint_run({str(DEMO)!r}, workload=NEVER_FSYNCED, kill_at="c3:after_effect", power_loss=True)
    """)
    pytester.runpytest().assert_outcomes(passed=1, failed=1)
    result = pytester.runpytest("--killpoint-power-loss")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["killpoint: seed *, power loss", "*[[]write-ahead[]]*survived the loss of what was "
                                 "never durable*", "*killpoint repro kp1.*"])


def test_a_long_session_shows_its_progress_past_the_output_capture(pytester, monkeypatch):
    """A 75 s chaos session once showed nothing until it ended; its progress lines reach the terminal while
    pytest captures the test's own output (here every run's line: the period is set to 0)."""
    from killpoint.harness.reporting import progress

    monkeypatch.setattr(progress, "PROGRESS_EVERY_S", 0.0)
    pytester.makepyfile(test_chaos=f"""
def test_every_kill_of_the_demo(killpoint_run):
    killpoint_run({str(DEMO)!r}, depth=1)
""")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    lines = [line for line in result.outlines if line.startswith("killpoint progress:")]
    assert len(lines) == 30 and lines[-1].startswith("killpoint progress: 30 of 30 schedules run, 0 failing"), \
        result.outlines


def test_a_long_session_under_xdist_shows_its_progress_on_standard_error(pytester):
    """An xdist worker's terminal reporter shows nothing until its test ends; its progress lines reach the
    controller's standard error as the session runs, named by the worker."""
    pytester.makeconftest("from killpoint.harness.reporting import progress\nprogress.PROGRESS_EVERY_S = 0.0\n")
    pytester.makepyfile(test_chaos=f"""
def test_every_kill_of_the_demo(killpoint_run):
    killpoint_run({str(DEMO)!r}, depth=1)
""")
    result = pytester.runpytest_subprocess("-n", "1")
    result.assert_outcomes(passed=1)
    lines = [line for line in result.errlines if line.startswith("[gw0] killpoint progress:")]
    assert len(lines) == 30 and lines[-1].startswith("[gw0] killpoint progress: 30 of 30 schedules run, 0 failing"), \
        result.errlines
