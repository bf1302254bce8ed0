"""A run that tested nothing is not a pass: the coverage gate (exit 3), sessions in which no kill
landed (exit 3), timed kills drawn inside the workload's working period, and a golden run that
fails because a runtime in another language was given no Python to call the fake tools with."""

from __future__ import annotations

from pathlib import Path

import pytest

from killpoint.harness.config.scenario import load_scenario, with_workload
from killpoint.harness.execute.runner import run_golden
from killpoint.harness.model import AfterDelay, GoldenRun
from killpoint.harness.schedules import explore
from killpoint.harness.schedules.schedule import RandomFaults
from tests.helpers import DEMO, mutant_workload, workload_command

SILENT_REFERENCE = "{python} -m killpoint.scenarios.silent killpoint.scenarios.reference_runtime"


def test_exhaustive_runs_meet_full_coverage_by_construction(killpoint):
    result = killpoint("run", DEMO, "--exhaustive", "--min-coverage", "100")
    assert result.exit_code == 0, result.out[-1500:] + result.err
    assert "not enough was tested" not in result.err


def test_one_kill_falls_short_of_the_gate_and_names_the_points_never_killed(killpoint):
    result = killpoint("run", DEMO, "--kill-at", "c3:after_effect", "--min-coverage", "50")
    assert result.exit_code == 3, result.out[-1500:] + result.err
    never = [f"c{call}:{point}" for call in range(1, 6)
             for point in ("before_started", "after_started", "after_effect", "before_finished", "after_finished")]
    never.remove("c3:after_effect")
    assert (f"killpoint: not enough was tested: coverage 3.3% is below the minimum of 50%: 29 of the 30 crash "
            f"points of the crash-free run were never killed: {', '.join(never[:20])} ... 9 more\n") in result.err


def test_a_gate_that_is_met_passes(killpoint):
    assert killpoint("run", DEMO, "--kill-at", "c3:after_effect", "--min-coverage", "3").exit_code == 0


def test_a_kill_after_a_point_counts_for_the_point_it_landed_at(killpoint):
    """``c3:after_effect+`` kills at the next point announced, c3:before_finished: that one is covered."""
    result = killpoint("run", DEMO, "--kill-at", "c3:after_effect+", "--min-coverage", "100")
    assert result.exit_code == 3
    named = result.err.split("were never killed: ")[1]
    assert "c3:after_effect," in named and "c3:before_finished" not in named


def test_a_session_in_which_no_kill_landed_exits_3_without_a_gate(killpoint):
    """The demo finishes in a fraction of a second: a kill at 15 s never comes, so nothing was tested."""
    result = killpoint("run", DEMO, "--kill-at", "@15")
    assert result.exit_code == 3, result.out + result.err
    assert ("not enough was tested: nothing was tested: 1 run(s) had kills scheduled and not one landed"
            in result.err)


def test_a_broken_rule_outranks_the_gate(killpoint):
    result = killpoint("run", DEMO, "--workload", mutant_workload("retry_non_idempotent"),
                       "--kill-at", "c4:after_started", "--min-coverage", "100")
    assert result.exit_code == 1 and "not enough was tested" not in result.err


@pytest.mark.parametrize("workload", [None, SILENT_REFERENCE], ids=["crash-points", "journal-writes"])
def test_the_golden_run_measures_the_working_period(tmp_path, forkserver, workload):
    """From the first to the last crash point, or (a runtime that announces none) journal/ledger write, counted
    from the first: a timed kill counts from each incarnation's own first, not from its launch."""
    scenario = load_scenario(DEMO)
    if workload:
        scenario = with_workload(scenario, workload)
    golden = run_golden(scenario, tmp_path / "golden", forkserver)
    assert bool(golden.points) == (workload is None)
    first, last = golden.work_window_s
    assert first == 0 < last < golden.seconds


PLAN = load_scenario(DEMO).plan
GOLDEN = GoldenRun(Path("golden"), {}, {}, ("c1:before_started",), 0.5, work_window_s=(0.2, 0.3))


def delays(batches, golden: GoldenRun = GOLDEN) -> list[float]:
    (jobs,) = list(batches(golden))
    return [kill.seconds for job in jobs for kill in job.schedule if isinstance(kill, AfterDelay)]


def test_timed_kills_are_drawn_in_the_working_period_not_the_whole_run():
    drawn = delays(explore.TimedMode(200, 7).batches(PLAN))
    assert len(drawn) == 200 and all(0.2 <= delay <= 0.3 for delay in drawn)
    assert drawn == delays(explore.TimedMode(200, 7).batches(PLAN))  # same seed, same delays


def test_an_explicit_timed_window_is_an_upper_bound_from_zero():
    drawn = delays(explore.TimedMode(200, 7, 0.05).batches(PLAN))
    assert all(0 <= delay <= 0.05 for delay in drawn) and min(drawn) < 0.01


def test_a_golden_run_with_no_measured_window_falls_back_to_its_duration():
    unmeasured = GoldenRun(Path("golden"), {}, {}, (), 0.5)
    drawn = delays(explore.TimedMode(200, 7).batches(PLAN), unmeasured)
    assert all(0 <= delay <= 0.5 for delay in drawn) and max(drawn) > 0.3


def test_random_mode_mixes_its_timed_kills_into_the_working_period():
    faults = RandomFaults(timed_rate=1.0)
    drawn = delays(explore.RandomMode(100, 7, faults).batches(PLAN))
    assert len(drawn) > 100 and all(0.2 <= delay <= 0.3 for delay in drawn)


HINT = ("a runtime in another language calls the fake tools at $KILLPOINT_TOOLS_URL (POST /calls/TOOL, one request per "
        "call), or through `{python} -m killpoint.fake_tools` — pass `{python}` in its command, e.g. --workload "
        "'node my-agent.js --python {python}'")


def test_a_failing_golden_run_with_no_python_in_the_command_says_how_to_call_the_fake_tools(killpoint):
    result = killpoint("run", DEMO, "--workload", "sh -c 'echo cannot reach the tools >&2; exit 3'",
                       "--kill-at", "c1:after_started")
    assert result.exit_code == 2 and "Traceback" not in result.err
    assert "exited with code 3" in result.err and HINT in result.err


def test_a_failing_python_golden_run_gets_no_such_hint(killpoint):
    result = killpoint("run", DEMO, "--workload", workload_command("exits_at_once.py"), "--kill-at", "c1:after_started")
    assert result.exit_code == 2 and "could not run the plan even without a crash" in result.err
    assert "another language" not in result.err
