"""``killpoint repro``: exact reruns, and plain words when a token no longer reproduces."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.execute.session import token_for
from killpoint.harness.model import AtPoint, Job, Verdict
from killpoint.harness.repro.reproduced import EXIT_DID_NOT_REPRODUCE
from killpoint.harness.repro.token import ReproToken
from tests.helpers import DEMO, mutant_workload

KILL = (AtPoint("after_effect", "c5"),)
PASSED_AGAIN = "verdict: PASS\nreproduced: this run passed, as the token recorded"


def demo_token(**changes: Any) -> str:
    token = ReproToken.decode(token_for(load_scenario(DEMO), Job(0, KILL, seed=99), Verdict(True)))
    return replace(token, **changes).encode()


def test_repro_prints_the_timeline_of_exactly_that_run(killpoint):
    repro = killpoint("repro", demo_token())
    assert repro.exit_code == 0, repro.out + repro.err
    assert "kill at c5:after_effect, seed 99" in repro.out
    assert "incarnation 0" in repro.out and "KILLED at c5:after_effect" in repro.out
    assert "c5 UNKNOWN->VERIFY" in repro.out
    assert "probe   c5 effect_present" in repro.out
    assert repro.out.rstrip().endswith(PASSED_AGAIN)


def test_token_whose_finding_is_gone_says_it_did_not_reproduce(killpoint):
    """It exited 0 before: a token whose failure is gone read as a pass (issue 13, finding 7)."""
    repro = killpoint("repro", demo_token(expect=("write-ahead",)))
    assert repro.exit_code == EXIT_DID_NOT_REPRODUCE == 5
    assert "did not reproduce: the token recorded write-ahead, and this run passed" in repro.out


# A shipped mutant: at this kill it breaks these two properties, every time.
MUTANT_ORIGIN = {"scenario": str(DEMO), "workload": mutant_workload("retry_non_idempotent")}
MUTANT_KILL = ("c4:after_started",)
MUTANT_BREAKS = ("interrupted-action", "verify-before-replay")


def test_a_failure_that_reproduces_exits_1_and_says_so(killpoint):
    repro = killpoint("repro", demo_token(origin=MUTANT_ORIGIN, schedule=MUTANT_KILL, expect=MUTANT_BREAKS))
    assert repro.exit_code == 1, repro.out + repro.err
    assert "reproduced: this run broke interrupted-action, verify-before-replay, as the token recorded" in repro.out


def test_a_failure_of_other_properties_did_not_reproduce_and_is_still_described(killpoint):
    repro = killpoint("repro", demo_token(origin=MUTANT_ORIGIN, schedule=MUTANT_KILL, expect=("write-ahead",)))
    assert repro.exit_code == EXIT_DID_NOT_REPRODUCE, repro.out + repro.err
    assert "FAIL run 0: kill at c4:after_started" in repro.out  # the failure found is shown in full
    assert ("did not reproduce: the token recorded write-ahead, and this run broke interrupted-action, "
            "verify-before-replay (no longer broken: write-ahead; newly broken: interrupted-action, "
            "verify-before-replay)") in repro.out


def test_token_for_a_changed_plan_is_refused_with_the_reason(killpoint):
    repro = killpoint("repro", demo_token(plan_digest="000000000000"))
    assert repro.exit_code == 2
    assert "the plan changed since it was made (token pins plan 000000000000" in repro.err


def test_damaged_token_is_a_usage_error(killpoint):
    token = demo_token()
    assert killpoint("repro", token[:-9]).exit_code == 2
    result = killpoint("repro", "hello")
    assert result.exit_code == 2 and "not a killpoint token" in result.err


def test_a_token_reproduces_from_another_directory(killpoint, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the token records scenarios/demo.toml from the project root, and its absolute path
    repro = killpoint("repro", demo_token())
    assert repro.exit_code == 0 and repro.out.rstrip().endswith(PASSED_AGAIN), repro.out + repro.err


def test_a_command_the_token_carries_runs_only_with_the_flag(killpoint, tmp_path):
    marker = tmp_path / "ran"
    forged = demo_token(origin={"scenario": str(DEMO), "workload": f"sh -c 'touch {marker}'"})
    refused = killpoint("repro", forged)
    assert refused.exit_code == 2 and "this token carries its own workload command" in refused.err, refused.err
    assert "repro --run-embedded-command kp1." in refused.err and not marker.exists()
    ran = killpoint("repro", "--run-embedded-command", forged)
    assert "running the workload command this token carries" in ran.out and marker.exists()



# Made by the code before kills were a tagged union (KillPoint, commit 268c3b6), in a checkout of that commit, from
# its root: token_for(load_scenario(Path("scenarios/demo.toml")), Job(0, (c5:after_started/torn:500,), seed=99),
# Verdict(True)). Its scenario is recorded relative to that checkout's root, so it resolves in any checkout; a token
# whose only path is absolute resolves only where that path still exists (the one CI that lacked it failed here).
OLD_TORN_TOKEN = (
    "kp1.eNptkNFqwzAMRf9Fz9nsdEvW5FfKCI6tZKaOZSwZBqX_PhVW9rI36aJ77kU3WJ2_Yg4wA7e1VPLIDN1TXqhIpMww3-4deCcu0d5wCXFHFjX173ZbJ9zQ"
    "joPaQo2byrml1AF-F_S6XT47oBr3mBUD7DG7GumR-DuyCXjQq9CRlPFUF7cypSaol0aOYiiFa3nh6s1_Ru1Xkst_1c6uP516HMfz24dia9N4-8B_YWhJqRfw"
    "w-w2wbqwuCoYjFDN82AtaGVG1LdM0_0HbzFjyA")


def test_a_token_made_before_kills_were_a_tagged_union_still_reproduces(killpoint):
    repro = killpoint("repro", OLD_TORN_TOKEN)
    assert repro.exit_code == 0, repro.out + repro.err
    assert "kill at c5:after_started/torn:500, seed 99" in repro.out
    assert "KILLED at c5:after_started/torn:500" in repro.out
    assert repro.out.rstrip().endswith(PASSED_AGAIN)
