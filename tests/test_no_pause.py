"""Non-pausing kills (``/now``): the text, the session choice ``--no-pause``, and the client's strict reply.

No process is started here: the kills themselves are in tests/integration/test_no_pause*.py.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from killpoint import protocol
from killpoint.client import ControlReplyError, Rendezvous
from killpoint.errors import ConfigError
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.frontends.pytest_plugin import Settings, session_choices
from killpoint.harness.frontends.spec import build_spec, spec_for_token
from killpoint.harness.model import (RENDEZVOUS_KILLS, AfterDelay, AfterPoint, AtPoint, GoldenRun, Incarnation, Job,
                                     KillSyntaxError, OnEvent, RunOutcome, TornTail, Verdict, parse_kill)
from killpoint.harness.reporting.coverage import coverage
from killpoint.harness.repro.token import ReproToken
from killpoint.harness.schedules.hunt import call_pool, draw_examples
from killpoint.harness.schedules.schedule import EveryKill, non_pausing
from tests.helpers import DEMO
from tests.test_kills import CALLS, FAULTS, KILLS

NOW_KILLS = st.one_of(
    *(st.builds(kind, st.sampled_from(protocol.ALL_POINTS), CALLS, FAULTS, st.just(True)) for kind in RENDEZVOUS_KILLS),
    *(st.builds(kind, st.just(protocol.AFTER_DECISIONS), st.none(), FAULTS, st.just(True)) for kind in RENDEZVOUS_KILLS))


@given(NOW_KILLS | KILLS)
def test_every_kill_with_or_without_pause_round_trips_through_its_text(kill):
    text = str(kill)
    assert parse_kill(text) == kill
    assert str(parse_kill(text)) == text
    assert ("/now" in text) == (isinstance(kill, RENDEZVOUS_KILLS) and kill.now)


@pytest.mark.parametrize(("text", "kill"), [
    ("c3:after_effect/now", AtPoint(protocol.AFTER_EFFECT, "c3", now=True)),
    ("c3:after_started+/now", AfterPoint(protocol.AFTER_STARTED, "c3", now=True)),
    ("c3:after_effect/now/torn:500", AtPoint(protocol.AFTER_EFFECT, "c3", TornTail(500), now=True)),
    ("after_decisions/now", AtPoint(protocol.AFTER_DECISIONS, now=True)),
])
def test_each_non_pausing_spelling_is_its_kill(text, kill):
    assert parse_kill(text) == kill and str(kill) == text


def test_the_kill_marker_and_coverage_name_the_moment_without_now():
    kill = parse_kill("c3:after_started+/now/torn:500")
    assert kill.trigger == "c3:after_started+"  # what nemesis.mark_kill writes as the marker's point
    killed = Incarnation(0, 1, None, killed_at="c3:after_effect/now", points=("c3:after_effect",))
    outcome = RunOutcome(Job(0, (parse_kill("c3:after_effect/now"),)), Path("run"), Verdict(True), (killed,), "", 0.0)
    assert coverage([outcome]) == {0: {"c3:after_effect": 1}}


@pytest.mark.parametrize(("text", "message"), [
    ("c3:after_effect/torn:500/now", "/now comes before the fault: write c3:after_effect/now/torn:500"),
    ("@0.05/now", "--kill-at '@0.05/now': /now goes with a crash-point kill"),
    ("ledger:effect:c3/now", "--kill-on 'ledger:effect:c3/now': /now goes with a crash-point kill"),
    ("c3:after_effect/now/now", "unknown point 'after_effect/now'"),
])
def test_now_misplaced_says_where_it_goes(text, message):
    with pytest.raises(KillSyntaxError, match=message.replace("+", r"\+")):
        parse_kill(text)


def test_non_pausing_changes_crash_point_kills_only_and_keeps_their_faults():
    schedule = (AtPoint(protocol.AFTER_STARTED, "c1", TornTail(7)), AfterPoint(protocol.AFTER_EFFECT, "c2"),
                AfterDelay(0.5), OnEvent("ledger", protocol.LEDGER_EFFECT, "c3"))
    assert [str(kill) for kill in non_pausing(schedule)] == [
        "c1:after_started/now/torn:7", "c2:after_effect+/now", "@0.5000", "ledger:effect:c3"]


def golden_of_demo() -> GoldenRun:
    points = tuple(f"c{n}:{point}" for n in range(1, 7) for point in protocol.CALL_POINTS)
    return GoldenRun(Path("golden"), {}, {}, points, 0.1)


@pytest.mark.parametrize("choices", [{"exhaustive": True}, {"random": 5, "seed": 3}, {"kill_at": ["c2:after_effect"]},
                                     {"exhaustive": True, "shard": "2/3"}])
def test_no_pause_makes_every_crash_point_kill_of_the_session_now(choices):
    spec = build_spec(load_scenario(DEMO), no_pause=True, **choices)
    jobs = [job for batch in spec.batches()(golden_of_demo()) for job in batch]
    kills = [kill for job in jobs for kill in job.schedule]
    assert kills and all(kill.now for kill in kills if isinstance(kill, RENDEZVOUS_KILLS))
    assert "no pause" in spec.describe()
    paused = build_spec(load_scenario(DEMO), **choices)
    assert not any(kill.now for batch in paused.batches()(golden_of_demo()) for job in batch
                   for kill in job.schedule if isinstance(kill, RENDEZVOUS_KILLS))


def test_no_pause_kills_at_depth_two_grow_from_the_points_reached_and_stay_now():
    spec = build_spec(load_scenario(DEMO), no_pause=True, exhaustive=True, depth=2)
    batches = spec.batches()(golden_of_demo())
    first = next(batches)
    outcomes = [RunOutcome(job, Path("run"), Verdict(True), (
        Incarnation(0, 1, None, killed_at=str(job.schedule[0])),
        Incarnation(1, 2, 0, points=(f"c1:{protocol.BEFORE_STARTED}", protocol.AFTER_DECISIONS))), "", 0.0)
        for job in first]
    second = batches.send(outcomes)
    assert len(second) == 2 * len(first)
    assert {str(job.schedule[1]) for job in second} == {"c1:before_started/now", "after_decisions/now"}
    assert all(kill.now for job in second for kill in job.schedule)


@pytest.mark.parametrize(("choices", "message"), [
    ({"timed": True}, "--no-pause goes with kills at crash points"),
    ({"kill_on": ["ledger:effect:c3"]}, "are timed or event kills, which never pause"),
])
def test_no_pause_where_no_kill_pauses_is_a_usage_error(choices, message):
    with pytest.raises(ConfigError) as raised:
        build_spec(load_scenario(DEMO), no_pause=True, **choices)
    assert message in str(raised.value)


def test_a_token_carries_now_in_its_kill_texts():
    schedule = ("c3:after_effect/now/torn:500", "after_decisions/now")
    scenario = load_scenario(DEMO)
    token = ReproToken(origin={"scenario": str(DEMO)}, plan_digest=scenario.plan.digest,
                       catalogue_digest=scenario.catalogue_digest, schedule=schedule)
    spec = spec_for_token(ReproToken.decode(token.encode()), scenario)
    assert tuple(str(kill) for kill in spec.mode.schedule) == schedule


def test_the_plugin_hands_no_pause_to_the_session_keyword_over_option():
    settings = Settings(seed=0, seed_drawn=False, runs=None, depth=None, shard=None, backend=None, report_dir=None,
                        no_pause=True)
    assert session_choices(settings, Path("runs"))["no_pause"] is True
    assert session_choices(settings, Path("runs"), no_pause=False)["no_pause"] is False
    assert build_spec(load_scenario(DEMO), **session_choices(settings, Path("runs"))).no_pause


def test_a_hunt_without_pause_draws_only_now_kills():
    pool = call_pool([DEMO])
    drawn = draw_examples(pool, 20, seed=1, every_kill=EveryKill(no_pause=True))
    kills = [kill for example in drawn for kill in example.schedule]
    assert kills and all(isinstance(kill, RENDEZVOUS_KILLS) and kill.now for kill in kills)
    assert [example.plan for example in drawn] == [example.plan for example in draw_examples(pool, 20, seed=1)]


def answering(path: str, reply: bytes) -> threading.Thread:
    """A harness end in a thread: accept one connection, read one point, send ``reply``."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def serve() -> None:
        connection, _ = listener.accept()
        connection.makefile("rb").readline()
        connection.sendall(reply)
        connection.close()
        listener.close()

    thread = threading.Thread(target=serve)
    thread.start()
    return thread


@pytest.mark.parametrize("reply", [b"yes\n", b"killall\n", b"ok"])
def test_a_reply_neither_ok_nor_kill_is_a_protocol_error(tmp_path, reply):
    thread = answering(str(tmp_path / "c.sock"), reply)
    rendezvous = Rendezvous(str(tmp_path / "c.sock"), 0)
    with pytest.raises(ControlReplyError, match="protocol v1 replies are b'ok\\\\n' and b'kill\\\\n'"):
        rendezvous.point(protocol.AFTER_EFFECT, call="c1", op="t-op1")
    rendezvous.close()
    thread.join(5)
