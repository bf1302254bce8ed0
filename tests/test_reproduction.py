"""A rerun of a token reproduces it only with the same properties broken (or a pass again); anything else exits
``EXIT_DID_NOT_REPRODUCE`` with the reason, never 0 (Hypothesis's DidNotReproduce)."""

from __future__ import annotations

import pytest

from killpoint.harness.frontends import cli
from killpoint.harness.model import Finding, Verdict
from killpoint.harness.repro.reproduced import (EXIT_DID_NOT_REPRODUCE, EXIT_REPRODUCED_FAILURE, EXIT_REPRODUCED_PASS,
                                                EXIT_UNKNOWN, reproduction)

PASSED = Verdict(True)


def broke(*properties: str) -> Verdict:
    return Verdict(False, tuple(Finding(name, f"{name} broken") for name in properties))


def test_the_same_properties_broken_reproduce_it_with_the_failure_code():
    assert reproduction(("write-ahead", "interrupted-action"), broke("interrupted-action", "write-ahead")) == (
        EXIT_REPRODUCED_FAILURE, "reproduced: this run broke interrupted-action, write-ahead, as the token recorded")


def test_a_pass_again_reproduces_a_passing_token():
    assert reproduction((), PASSED) == (EXIT_REPRODUCED_PASS, "reproduced: this run passed, as the token recorded")


def test_a_failure_that_now_passes_did_not_reproduce():
    code, message = reproduction(("write-ahead",), PASSED, ("c5:after_effect",))
    assert code == EXIT_DID_NOT_REPRODUCE != 0
    assert message.startswith("did not reproduce: the token recorded write-ahead, and this run passed. ")
    assert "behaves differently at this kill (its moment never came)." in message


@pytest.mark.parametrize(("expected", "found", "change"), [
    (("write-ahead",), ("interrupted-action",), "no longer broken: write-ahead; newly broken: interrupted-action"),
    (("write-ahead", "interrupted-action"), ("write-ahead",), "no longer broken: interrupted-action"),
    (("write-ahead",), ("write-ahead", "world"), "newly broken: world"),
    ((), ("world",), "newly broken: world"),
])
def test_other_properties_broken_did_not_reproduce_and_say_what_changed(expected, found, change):
    code, message = reproduction(expected, broke(*found))
    assert code == EXIT_DID_NOT_REPRODUCE
    assert f"and this run broke {', '.join(found)} ({change}). The failure above is real" in message


def test_a_run_that_could_not_be_judged_says_nothing_either_way():
    code, message = reproduction(("write-ahead",), Verdict(None, error="journal copy at kill 0 is missing"))
    assert code == EXIT_UNKNOWN
    assert message == ("unknown: this run could not be judged (journal copy at kill 0 is missing), so whether it "
                       "reproduces is not known; the token recorded write-ahead")


def test_the_codes_are_the_commands_codes():
    """One meaning per code: 5 is free in ``cli.EXIT_CODES`` and the others are its pass and violation codes."""
    assert (EXIT_REPRODUCED_PASS, EXIT_REPRODUCED_FAILURE) == (cli.EXIT_PASSED, cli.EXIT_VIOLATION)
    assert EXIT_UNKNOWN == cli.EXIT_NOT_ESTABLISHED  # an unknown rerun established nothing: never exit 1
    assert EXIT_DID_NOT_REPRODUCE not in (cli.EXIT_PASSED, cli.EXIT_VIOLATION, cli.EXIT_USAGE, cli.EXIT_NOT_ESTABLISHED,
                                          cli.EXIT_INFRASTRUCTURE)
