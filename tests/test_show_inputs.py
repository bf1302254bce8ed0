"""``killpoint show`` on literal run directories: each stage of the evidence, a harness still running, and
every input that is not a run directory refused with its path and the fix (ConfigError: exit 2)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from killpoint.errors import ConfigError
from killpoint.harness.execute._process_tree import process_identity
from killpoint.harness.execute.run_record import write_run_record
from killpoint.harness.model import (FAILED, PASSED, Finding, Incarnation, Job, RuleResult, RunOutcome, Verdict,
                                     parse_kill)
from killpoint.harness.reporting.show import describe_run_dir
from tests.test_run_record import demo_record

pytestmark = pytest.mark.hostile  # the bad-input fuzz of the hostile-input suite (docs/security.md)

KILLED = Incarnation(number=0, pid=4242, exit_code=None, killed_at="c5:after_effect", points=("c1:before_started",),
                     seconds=0.41)
RECOVERED = Incarnation(number=1, pid=4243, exit_code=0, seconds=0.38)
LONG_AGO = "2000-01-01T00:00:00.000+00:00"  # before this process started: its pid is then another harness's


def shown(run_dir: Path) -> str:
    return "\n".join(describe_run_dir(run_dir))


def started_run(tmp_path: Path, **changes: Any) -> Path:
    run_dir = tmp_path / "run-00003"
    # A record naming no identity is judged by its wall-clock start: long ago, so its harness is gone.
    write_run_record(run_dir, demo_record(**{"started": LONG_AGO, "harness_identity": None, **changes}))
    return run_dir


def refusal(run_dir: Path) -> str:
    with pytest.raises(ConfigError) as error:
        describe_run_dir(run_dir)
    return str(error.value)


def test_a_run_killed_before_its_first_incarnation_ended_says_what_it_was_running(tmp_path):
    text = shown(started_run(tmp_path))
    assert "scenario: demo (scenarios/demo.toml); digest " in text
    assert "schedule: run 3, kill at c5:after_effect, c7:after_started, seed 99" in text
    assert "backend: forkserver" in text and "argv: killpoint run scenarios/demo.toml --random 5" in text
    assert "incarnations: none finished" in text
    assert "verdict: none: the harness stopped before judging (interrupted or killed)" in text
    assert "reproduce: " in text and " repro kp1." in text


def test_the_incarnations_recorded_so_far_are_listed(tmp_path):
    run_dir = started_run(tmp_path)
    (run_dir / "incarnations.json").write_text(json.dumps([asdict(KILLED)]))
    text = shown(run_dir)
    assert "incarnations: 1 finished\n  incarnation 0 (pid 4242, 0.410s): KILLED at c5:after_effect" in text
    assert "verdict: none" in text


def test_an_empty_list_of_incarnations_is_none_finished(tmp_path):
    """What the runner writes when its first incarnation is broken off (Ctrl-C during it)."""
    run_dir = started_run(tmp_path)
    (run_dir / "incarnations.json").write_text("[]")
    assert "incarnations: none finished" in shown(run_dir)


def test_an_interrupted_run_names_the_signal(tmp_path):
    run_dir = started_run(tmp_path)
    (run_dir / "interrupted.json").write_text(json.dumps({"outcome": "interrupted", "signal": "SIGTERM"}))
    assert "verdict: none: the harness was stopped by SIGTERM while this run was under way" in shown(run_dir)


def test_a_run_whose_harness_still_runs_is_not_called_stopped(tmp_path):
    now = demo_record().started  # this process, which started before now: it is the harness, alive
    assert "verdict: none: not yet: the harness (pid " f"{os.getpid()}) is still running" in shown(
        started_run(tmp_path, started=now))
    # The same pid started at another tick: the pid was reused, the record's harness is gone.
    assert "the harness stopped before judging" in shown(started_run(tmp_path / "reused", harness_pid=os.getpid(),
                                                                     harness_identity=f"{os.getpid()}:1"))
    # A record of an older killpoint names no identity: its wall-clock start is compared with the process's.
    assert "the harness stopped before judging" in shown(started_run(tmp_path / "old", harness_pid=os.getpid()))


def test_a_running_harness_is_told_by_its_identity_not_the_wall_clock(tmp_path):
    """The wall clock may be stepped after the record was written (NTP, a VM resumed): a record that says it
    started long ago, or in the future, still names this live process by its pid and start in ticks."""
    for started in (LONG_AGO, "2999-01-01T00:00:00.000+00:00"):
        assert "is still running" in shown(started_run(tmp_path / started[:4], started=started,
                                                       harness_identity=process_identity(os.getpid())))


def verdict_json(**changes: object) -> dict[str, object]:
    """A failed run's verdict.json, as the session writes it (``RunOutcome.to_json``), with ``changes``."""
    finding = Finding("interrupted-action", "c5 ran twice", "c5", "c5:after_effect", ("ledger.jsonl:3: {}",))
    verdict = Verdict(False, (finding,), rules=(RuleResult("interrupted-action", FAILED),))
    outcome = RunOutcome(Job(3, (parse_kill("c5:after_effect"),)), Path("run-00003"), verdict, (KILLED, RECOVERED),
                         demo_record().token, 1.2)
    return {**json.loads(json.dumps(outcome.to_json())), **changes}


PASSED_RULES = {"interrupted-action": {"status": PASSED, "reason": None}}


def test_a_judged_run_shows_its_verdict_and_findings(tmp_path):
    run_dir = started_run(tmp_path)
    (run_dir / "verdict.json").write_text(json.dumps(verdict_json()))
    text = shown(run_dir)
    assert "incarnations: 2 finished" in text and "incarnation 1 (pid 4243, 0.380s): exited 0" in text
    assert "verdict: failed\n  [interrupted-action] c5 (kill c5:after_effect): c5 ran twice" in text


def test_a_run_reduced_to_its_verdict_is_shown_from_it(tmp_path):
    (tmp_path / "verdict.json").write_text(json.dumps(verdict_json(outcome="passed", valid=True, findings=[], rules=PASSED_RULES)))
    text = shown(tmp_path)
    assert "schedule: kill at c5:after_effect (from verdict.json: this run kept no run.json" in text
    assert "verdict: passed" in text and "reproduce: " in text


def test_what_is_not_a_directory_is_refused(tmp_path):
    assert "no such directory; give a run's directory: killpoint show killpoint-runs/" in refusal(tmp_path / "nope")
    (tmp_path / "file").write_text("")
    assert f"{tmp_path / 'file'}: not a directory" in refusal(tmp_path / "file")


def test_a_session_folder_points_at_its_runs(tmp_path):
    assert "not a run directory: it holds no run.json" in refusal(tmp_path)
    (tmp_path / "run-00000").mkdir()
    (tmp_path / "golden").mkdir()
    assert f"holding 1 run(s) (run-00000): show one, e.g. killpoint show {tmp_path / 'run-00000'}" in refusal(tmp_path)


@pytest.mark.parametrize(("name", "content", "named"), [
    ("incarnations.json", "[{\"number\": 0}]", "  - entry 0 has no"),
    ("incarnations.json", "{", "not JSON"),
    ("incarnations.json", "{}", "holds dict, not a list of the incarnations"),
    ("verdict.json", "{", "not JSON"),
    ("verdict.json", json.dumps(verdict_json(outcome="great")), "outcome: 'great' is not one of passed"),
    ("verdict.json", json.dumps(verdict_json(findings=[{"property": "x"}])), "findings[0].message: missing"),
    ("verdict.json", json.dumps(verdict_json(incarnations=[{}])), "incarnations: entry 0 has no"),
    ("verdict.json", json.dumps(verdict_json(token=None)), "token: NoneType None, not str"),
    ("run.json", "[]", "holds list, not an object"),
])
def test_an_unreadable_stage_is_refused_with_its_path(tmp_path, name, content, named):
    run_dir = started_run(tmp_path)
    (run_dir / name).unlink(missing_ok=True)
    (run_dir / name).write_text(content)
    message = refusal(run_dir)
    assert str(run_dir / name) in message and named in message, message


def test_a_record_from_a_newer_killpoint_says_so(tmp_path):
    run_dir = tmp_path / "run-00000"
    write_run_record(run_dir, replace(demo_record(), format="killpoint-run/2"))
    assert "format 'killpoint-run/2': this killpoint reads 'killpoint-run/1'" in refusal(run_dir)
