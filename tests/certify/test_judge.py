"""The verdict is a pure function of the claim and literal observations: every branch, and the hint sentences."""

from __future__ import annotations

from typing import Any

import pytest

from killpoint import protocol as p
from killpoint.harness.certify.certificate import (
    CONFIRMED,
    CONSERVATIVE,
    INCONCLUSIVE,
    REFUTED,
    evidence_digest,
    hint_contradiction,
    hints_in,
    judge,
    strongest_supported,
)
from killpoint.harness.certify.trials import (
    KILL,
    REPLAY,
    Evidence,
    Observation,
    SearchResult,
    breaks_promise,
    wants_kill,
)

ARGS: dict[str, Any] = {"path": "a.txt"}
READ = Observation(REPLAY, ARGS, ok=True, error=None, changed=False, differs=False, points=1)
PUT = Observation(REPLAY, ARGS, ok=True, error=None, changed=True, differs=False, points=3)
APPEND = Observation(REPLAY, ARGS, ok=True, error=None, changed=True, differs=True, points=3)
REFUSED = Observation(REPLAY, ARGS, ok=False, error="no file 'a.txt'", changed=False, differs=False, points=1)
KILL_OK = Observation(KILL, ARGS, ok=True, error=None, changed=True, differs=False, points=2, kill_at=2,
                      kill_label="write a.txt")
TORN = Observation(KILL, ARGS, ok=True, error=None, changed=True, differs=True, points=2, kill_at=2,
                   kill_label="write a.txt")


MEMORY = "the server's memory"  # what an MCP target's snapshots do not see (McpTarget.unseen)
NO_EVIDENCE = "an effect kept in the server's memory cannot be seen, so this is no evidence of READ_ONLY"
HINTED = "readOnlyHint and idempotentHint not true; destructiveHint: false"  # a toggle's hints (catalogue_cli.classify)


def result(*observations: Observation, found: Observation | None = None, error: str | None = None,
           unseen: str = "") -> SearchResult:
    return SearchResult(observations, Evidence(found, {}) if found else None, error, 0.1, unseen=unseen)


@pytest.mark.parametrize(("claim", "observations", "found", "verdict", "strongest", "words"), [
    (p.READ_ONLY, (READ, READ), None, CONFIRMED, p.READ_ONLY, "no call changed the world"),
    (p.READ_ONLY, (READ, APPEND), APPEND, REFUTED, p.NON_IDEMPOTENT, "one call changed the world, and its replay"),
    (p.READ_ONLY, (PUT,), PUT, REFUTED, p.IDEMPOTENT_WRITE, "one call changed the world"),
    (p.IDEMPOTENT_WRITE, (PUT, KILL_OK), None, CONFIRMED, p.IDEMPOTENT_WRITE, "every replay"),
    (p.IDEMPOTENT_WRITE, (READ,), None, CONFIRMED, p.READ_ONLY, "READ_ONLY fits too"),
    (p.IDEMPOTENT_WRITE, (APPEND,), APPEND, REFUTED, p.NON_IDEMPOTENT, "a replay changed the world again"),
    (p.IDEMPOTENT_WRITE, (PUT, TORN), TORN, REFUTED, p.NON_IDEMPOTENT, "killed at point 2 of the call (before write a.txt)"),
    (p.NON_IDEMPOTENT, (APPEND,), APPEND, CONFIRMED, p.NON_IDEMPOTENT, "a replay changed the world again"),
    (p.NON_IDEMPOTENT, (PUT, KILL_OK), None, INCONCLUSIVE, p.IDEMPOTENT_WRITE, "looks over-cautious"),
    (p.UNKNOWN, (APPEND,), APPEND, CONFIRMED, p.NON_IDEMPOTENT, "always accepted"),
    (p.UNKNOWN, (READ,), None, CONFIRMED, p.READ_ONLY, "supports READ_ONLY"),
    (p.UNKNOWN, (REFUSED,), None, CONFIRMED, None, "always accepted"),
    (p.READ_ONLY, (REFUSED, REFUSED), None, INCONCLUSIVE, None, "every drawn call was refused"),
    (p.IDEMPOTENT_WRITE, (REFUSED,), None, INCONCLUSIVE, None, "first: no file 'a.txt'"),
])
def test_verdicts(claim: str, observations: tuple[Observation, ...], found: Observation | None, verdict: str,
                  strongest: str | None, words: str) -> None:
    judgement = judge(claim, interactive=False, result=result(*observations, found=found))
    assert (judgement.verdict, judgement.strongest) == (verdict, strongest), judgement
    assert words in judgement.reason


def test_an_interactive_tool_is_reported_as_such_and_refuted_only_when_asking_again_changes_the_world() -> None:
    asked = judge(p.NON_IDEMPOTENT, interactive=True, result=result(READ, READ))
    assert asked.verdict == CONFIRMED and asked.reason.startswith("interactive: an interrupted question is asked again")
    unsafe = judge(p.NON_IDEMPOTENT, interactive=True, result=result(APPEND, found=APPEND))
    assert unsafe.verdict == REFUTED and "RETRY of an interrupted question is unsafe" in unsafe.reason


def test_a_harness_error_is_inconclusive_with_the_error_never_a_verdict_on_the_tool() -> None:
    judgement = judge(p.READ_ONLY, interactive=False, result=result(READ, error="snapshot command exited 3"))
    assert judgement.verdict == INCONCLUSIVE
    assert judgement.reason == "the trials could not go on: snapshot command exited 3"


def test_strongest_supported_orders_the_evidence() -> None:
    assert strongest_supported(()) is None
    assert strongest_supported((READ, REFUSED)) == p.READ_ONLY
    assert strongest_supported((READ, PUT, KILL_OK)) == p.IDEMPOTENT_WRITE
    assert strongest_supported((PUT, TORN)) == p.NON_IDEMPOTENT


def test_what_breaks_a_promise_and_where_kills_are_tried() -> None:
    assert breaks_promise(p.READ_ONLY, False, PUT) and not breaks_promise(p.IDEMPOTENT_WRITE, False, PUT)
    assert breaks_promise(p.IDEMPOTENT_WRITE, False, TORN)
    assert wants_kill(p.IDEMPOTENT_WRITE, False, PUT) and wants_kill(p.NON_IDEMPOTENT, False, PUT)
    assert not wants_kill(p.IDEMPOTENT_WRITE, False, APPEND), "a replay that differs needs no kill to be caught"
    assert not wants_kill(p.READ_ONLY, False, PUT) and not wants_kill(p.NON_IDEMPOTENT, True, PUT)
    assert not wants_kill(p.IDEMPOTENT_WRITE, False, READ), "nothing changed: nothing can be half-done"


MCP_WHY = "idempotentHint: true, readOnlyHint not true"


def test_hints_are_read_from_the_why_that_catalogue_from_mcp_writes() -> None:
    assert hints_in(MCP_WHY) == ["idempotentHint", "readOnlyHint"]
    assert hints_in("readOnlyHint and idempotentHint not true; destructiveHint: true") == [
        "readOnlyHint", "idempotentHint", "destructiveHint"]
    assert hints_in("appends; every replay adds again") == []


def test_a_certificate_says_where_the_evidence_contradicts_a_hint() -> None:
    refuted = judge(p.IDEMPOTENT_WRITE, interactive=False, result=result(APPEND, found=APPEND))
    assert hint_contradiction(p.IDEMPOTENT_WRITE, refuted, MCP_WHY) == (
        f"the evidence contradicts the MCP hints ({MCP_WHY}) that made it IDEMPOTENT_WRITE: "
        "a replay changed the world again")
    cautious = judge(p.NON_IDEMPOTENT, interactive=False, result=result(PUT, KILL_OK), why="destructiveHint: true")
    assert cautious.verdict == CONSERVATIVE and cautious.reason.startswith("safer than its hints")
    written_by_hand = judge(p.NON_IDEMPOTENT, interactive=False, result=result(PUT, KILL_OK), why="it appends")
    assert written_by_hand.verdict == INCONCLUSIVE and written_by_hand.reason.startswith("looks over-cautious")
    assert hint_contradiction(p.NON_IDEMPOTENT, written_by_hand, "it appends") is None
    assert "no trial showed a replay repeating an effect (the evidence supports IDEMPOTENT_WRITE)" in str(
        hint_contradiction(p.NON_IDEMPOTENT, cautious, "destructiveHint: true"))
    confirmed = judge(p.READ_ONLY, interactive=False, result=result(READ))
    assert hint_contradiction(p.READ_ONLY, confirmed, "readOnlyHint: true") is None
    assert hint_contradiction(p.IDEMPOTENT_WRITE, refuted, "appends") is None, "no hint, nothing to contradict"


def test_the_evidence_digest_covers_every_observation() -> None:
    assert evidence_digest((READ, PUT), None) == evidence_digest((READ, PUT), None)
    assert evidence_digest((READ, PUT), None) != evidence_digest((PUT, READ), None)
    assert evidence_digest((APPEND,), None) != evidence_digest((APPEND,), Evidence(APPEND, {}))


@pytest.mark.parametrize(("claim", "interactive", "why", "verdict"), [
    (p.NON_IDEMPOTENT, False, HINTED, INCONCLUSIVE),  # was CONSERVATIVE ("supports READ_ONLY, ... RETRY")
    (p.NON_IDEMPOTENT, False, "", INCONCLUSIVE),
    (p.NON_IDEMPOTENT, True, "", INCONCLUSIVE),
    (p.IDEMPOTENT_WRITE, False, "idempotentHint: true, readOnlyHint not true", INCONCLUSIVE),
    (p.UNKNOWN, False, "no annotations", CONFIRMED),  # UNKNOWN is always accepted; it still supports nothing
])
def test_a_server_tool_that_changed_nothing_seen_supports_no_class(claim: str, interactive: bool, why: str,
                                                                   verdict: str) -> None:
    """Issue 28: a toggle in the server's memory leaves every snapshot equal, as a read does; that is no evidence."""
    judgement = judge(claim, interactive=interactive, result=result(READ, REFUSED, READ, unseen=MEMORY), why=why)
    assert (judgement.verdict, judgement.strongest) == (verdict, None), judgement
    assert judgement.reason.endswith(NO_EVIDENCE) and "RETRY" not in judgement.reason, judgement
    assert hint_contradiction(claim, judgement, why) is None


def test_the_reason_a_server_tool_that_changed_nothing_seen_is_inconclusive() -> None:
    judgement = judge(p.NON_IDEMPOTENT, interactive=False, result=result(READ, unseen=MEMORY), why=HINTED)
    assert judgement.reason == ("no change was visible in the world (1 trial(s), 1 call(s) succeeded, 0 killed "
                                "part-way); " + NO_EVIDENCE)


def test_a_read_only_claim_stands_where_the_servers_memory_is_unseen_and_the_world_shows_no_change() -> None:
    """readOnlyHint (or a person) claimed it and nothing seen goes against it: CONFIRMED, saying what it rests on."""
    judgement = judge(p.READ_ONLY, interactive=False, result=result(READ, READ, unseen=MEMORY),
                      why="readOnlyHint: true")
    assert (judgement.verdict, judgement.strongest) == (CONFIRMED, p.READ_ONLY)
    assert judgement.reason.startswith("no call changed the world"), judgement
    assert judgement.reason.endswith("; an effect kept in the server's memory cannot be seen, so READ_ONLY rests on "
                                     "the claim"), judgement


@pytest.mark.parametrize(("claim", "observations", "found", "verdict", "strongest"), [
    (p.NON_IDEMPOTENT, (PUT, KILL_OK), None, CONSERVATIVE, p.IDEMPOTENT_WRITE),
    (p.IDEMPOTENT_WRITE, (PUT, KILL_OK), None, CONFIRMED, p.IDEMPOTENT_WRITE),
    (p.IDEMPOTENT_WRITE, (APPEND,), APPEND, REFUTED, p.NON_IDEMPOTENT),
    (p.READ_ONLY, (REFUSED,), None, INCONCLUSIVE, None),
])
def test_a_server_tool_whose_change_is_seen_is_judged_as_before(claim: str, observations: tuple[Observation, ...],
                                                                found: Observation | None, verdict: str,
                                                                strongest: str | None) -> None:
    judgement = judge(claim, interactive=False, result=result(*observations, found=found, unseen=MEMORY), why=HINTED)
    assert (judgement.verdict, judgement.strongest) == (verdict, strongest), judgement
    assert "memory" not in judgement.reason


def test_where_the_world_holds_all_a_tools_state_no_change_is_evidence_of_read_only() -> None:
    """A fake, Python or command tool keeps its state in its world: a world left as it was shows READ_ONLY."""
    cautious = judge(p.NON_IDEMPOTENT, interactive=False, result=result(READ), why=HINTED)
    assert (cautious.verdict, cautious.strongest) == (CONSERVATIVE, p.READ_ONLY)
    write = judge(p.IDEMPOTENT_WRITE, interactive=False, result=result(READ))
    assert (write.verdict, write.strongest) == (CONFIRMED, p.READ_ONLY) and write.reason.endswith("READ_ONLY fits too")
