"""Every flag of ``killpoint run`` acts in the mode chosen, or is a usage error naming it (exit 2, no
traceback): a flag is never silently ignored. Numbers that are not numbers (nan, inf, negative) are
usage errors too. These checks come before any process is started."""

from __future__ import annotations

import contextlib
import io

import pytest

from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.frontends import cli
from killpoint.harness.frontends.spec import spec_from_args
from tests.helpers import DEMO

KILL = ("--kill-at", "c3:after_effect")


def assert_usage_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.out + result.err
    assert "Traceback" not in result.err + result.out
    for fragment in fragments:
        assert fragment in result.err, result.err


@pytest.mark.parametrize(("flags", "message"), [
    ((*KILL, "--depth", "2"), "--depth goes with --exhaustive (it sets the kills per schedule), but this run's "
                              "schedules come from --kill-at/--kill-on"),
    (("--random", "3", "--depth", "2"), "--depth goes with --exhaustive"),
    (("--timed", "--depth", "2"), "--depth goes with --exhaustive"),
    ((*KILL, "--runs", "5"), "--runs goes with --timed alone"),
    (("--random", "3", "--runs", "5"), "--runs goes with --timed alone (with --random N, N is the number of runs), "
                                       "but this run's schedules come from --random"),
    (("--exhaustive", "--runs", "5"), "--runs goes with --timed alone"),
    ((*KILL, "--timed-window", "0.1"), "--timed-window goes with --timed"),
    (("--random", "3", "--timed-window", "0.1"), "--timed-window goes with --timed (alone, or mixed into --random)"),
    (("--exhaustive", "--timed-window", "0.1"), "--timed-window goes with --timed"),
    ((*KILL, "--torn-tail"), "--torn-tail goes with --exhaustive or --random (a given kill tears with /torn:N"),
    (("--timed", "--torn-tail"), "--torn-tail goes with --exhaustive or --random"),
    (("--exhaustive", "--seed", "3"), "--seed goes with --random or --timed (nothing else is drawn), but this "
                                      "run's schedules come from --exhaustive"),
    ((*KILL, "--seed", "3"), "--seed goes with --random or --timed"),
    (("--random", "3", "--no-share-prefixes"), "--no-share-prefixes goes with --exhaustive (its deeper schedules "
                                               "start from the state their shorter ones' kills left)"),
    (("--kill-on", "journal:started:c2", "--seed", "3"), "--seed goes with --random or --timed"),
    # The demo's file says [schedule] mode = "exhaustive": that is the mode the flags must fit.
    (("--seed", "3"), "this run's schedules come from demo's [schedule] (exhaustive)"),
    (("--shard", "1/2", "--min-coverage", "90"), "--min-coverage judges the coverage of a whole session, and "
                                                  "--shard runs only part of it"),
    (("--image", "mine:1"), "--image choose how containers run, so they go with --backend docker; this run's "
                            "backend is forkserver"),
    (("--backend", "subprocess", "--restart", "same"), "--restart choose how containers run, so they go with "
                                                        "--backend docker; this run's backend is subprocess"),
    (("--image", "mine:1", "--restart", "same"), "--image and --restart choose how containers run"),
])
def test_a_flag_that_would_not_act_is_a_usage_error(killpoint, flags, message):
    assert_usage_error(killpoint("run", DEMO, *flags), message)


def test_every_idle_flag_is_named_at_once(killpoint):
    result = killpoint("run", DEMO, *KILL, "--depth", "2", "--seed", "1", "--torn-tail", "--timed-window", "1")
    assert_usage_error(result, "4 flag(s) would not act in this run", "--depth goes", "--seed goes",
                       "--torn-tail goes", "--timed-window goes")


@pytest.mark.parametrize(("flags", "message"), [
    (("--kill-at", "@nan"), "--kill-at '@nan': a timed kill is @SECONDS, a finite number >= 0"),
    (("--kill-at", "@inf"), "--kill-at '@inf': a timed kill is @SECONDS"),
    (("--kill-at", "@-0.5"), "--kill-at '@-0.5': a timed kill is @SECONDS"),
    (("--timed", "--timed-window", "-1"), "--timed-window -1.0: give a number of seconds above 0 and at most 86400"),
    (("--timed", "--timed-window", "nan"), "--timed-window nan: give a number of seconds above 0 and at most 86400"),
    (("--timed", "--timed-window", "0"), "--timed-window 0.0: give a number of seconds above 0 and at most 86400"),
    (("--timeout", "nan"), "--timeout nan: give a number of seconds from 0.01 to 86400"),
    (("--timeout", "inf"), "--timeout inf: give a number of seconds from 0.01 to 86400"),
    (("--timed", "--runs", "0"), "--runs 0: give a whole number from 1 to 1000000"),
    (("--exhaustive", "--depth", "0"), "--depth 0: give a whole number from 1 to 6"),
    (("--min-coverage", "101"), "--min-coverage 101.0: give a percentage from 0 to 100"),
    (("--min-coverage", "-5"), "--min-coverage -5.0: give a percentage from 0 to 100"),
    (("--min-coverage", "nan"), "--min-coverage nan: give a percentage from 0 to 100"),
])
def test_a_number_that_is_not_one_is_a_usage_error(killpoint, flags, message):
    assert_usage_error(killpoint("run", DEMO, *flags), message)


@pytest.mark.parametrize("flags", [
    ("--exhaustive", "--depth", "2", "--torn-tail", "--drift", "append=READ_ONLY", "--min-coverage", "100"),
    ("--depth", "2", "--torn-tail"),  # the demo's own mode is exhaustive
    ("--random", "5", "--seed", "1", "--torn-tail", "--timed", "--timed-window", "0.2"),
    ("--timed", "--runs", "4", "--seed", "1", "--timed-window", "0.2", "--drift", "append=READ_ONLY"),
    ("--kill-at", "c3:after_finished/torn:400", "--kill-at", "after_decisions", "--drift", "append=READ_ONLY"),
    ("--exhaustive", "--shard", "1/2"),
])
def test_flags_that_act_together_are_accepted(flags):
    """The same checks pass every combination in which each flag given does something."""
    args = cli.build_parser().parse_args(["run", str(DEMO), *flags])
    spec = spec_from_args(args, load_scenario(DEMO))
    assert callable(spec.batches()) and spec.describe()


def test_defaults_are_resolved_after_the_flags():
    """--runs and --depth default to None so a given flag can be told apart; the mode fills them in."""
    scenario = load_scenario(DEMO)
    parse = cli.build_parser().parse_args
    assert spec_from_args(parse(["run", str(DEMO), "--timed", "--seed", "1"]), scenario).describe() == "20 timed kills, seed 1"
    assert spec_from_args(parse(["run", str(DEMO), "--exhaustive"]), scenario).describe() == "exhaustive to depth 1"


def test_help_lists_the_exit_codes(killpoint):
    result = killpoint("run", "--help")
    assert result.exit_code == 0
    for code in ("0  every run passed", "1  a recovery rule was broken", "3  nothing broken, but not established",
                 "4  the harness itself failed", "5  killpoint repro: the token did not reproduce"):
        assert code in result.out
    assert "3 not\nestablished (a run unknown" in cli.__doc__


def make_session(root, name: str):
    (root / name / "golden").mkdir(parents=True)
    (root / name / "golden" / "plan.json").write_text("{}")
    return root / name


def test_prune_needs_to_be_told_what_goes(killpoint, tmp_path):
    assert_usage_error(killpoint("prune", "--runs-dir", tmp_path), "say what goes: --keep N", "--older-than DAYS")


@pytest.mark.parametrize(("flags", "message"), [
    (("--keep", "-1"), "--keep -1: give a whole number from 0 to 1000000"),
    (("--older-than", "nan"), "--older-than nan: give a number of days from 0 to 36500"),
])
def test_prune_refuses_bad_numbers(killpoint, tmp_path, flags, message):
    assert_usage_error(killpoint("prune", "--runs-dir", tmp_path, *flags), message)


def test_prune_keeps_the_newest_sessions_and_says_what_it_removed(killpoint, tmp_path):
    import os

    sessions = [make_session(tmp_path, f"2026010{day}-demo") for day in (1, 2, 3)]
    for age, session in zip((300, 200, 100), sessions):
        os.utime(session, (os.path.getmtime(session) - age,) * 2)
    (tmp_path / "notes.txt").write_text("not a session")
    result = killpoint("prune", "--runs-dir", tmp_path, "--keep", "1")
    assert result.exit_code == 0, result.err
    assert result.out.splitlines() == [f"removed {sessions[0]}", f"removed {sessions[1]}",
                                       f"killpoint prune: 2 session(s) removed from {tmp_path}"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["20260103-demo", "notes.txt"]


def _usage(argv: list[str]) -> str:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(argv, out=io.StringIO())
    assert code == 2 and "Traceback" not in err.getvalue(), err.getvalue()
    return err.getvalue()


def test_outputs_are_checked_before_anything_runs(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    err = _usage(["run", str(DEMO), "--kill-at", "c1:after_effect", "--runs-dir", str(a_file / "runs"),
                  "--json", str(tmp_path / "missing" / "report.json"), "--html", str(tmp_path)])
    assert "3 output(s) cannot be written; nothing was run" in err
    assert f"{a_file} is a file, not a folder" in err
    assert f"the folder {tmp_path / 'missing'} does not exist" in err
    assert "--html" in err and "is a folder; give the file to write" in err
    assert not (tmp_path / "missing").exists()


def test_a_depth_past_the_bound_says_what_it_would_mean():
    err = _usage(["run", str(DEMO), "--exhaustive", "--depth", "99"])
    assert "--depth 99: each level multiplies the schedules" in err and "give 1..6" in err
