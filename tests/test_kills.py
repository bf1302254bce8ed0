"""A kill is a tagged union in the model: each variant spells itself as the tokens, flags and evidence always have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from killpoint import protocol
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.frontends.spec import spec_for_token
from killpoint.harness.judge.evidence import read_incarnations
from killpoint.harness.model import (EVENT_SOURCES, POWER_VARIANTS, TIMEOUT, AfterDelay, AfterPoint, AtPoint,
                                     Incarnation, KillSyntaxError, OnEvent, PlainKill, PowerLoss, TornTail, parse_kill)
from killpoint.harness.repro.token import ReproToken
from killpoint.harness.schedules.explore import GivenMode
from tests.helpers import DEMO

FAULTS = (st.just(PlainKill()) | st.builds(TornTail, st.integers(1, 999)) | st.just(PowerLoss())
          | st.builds(PowerLoss, st.sampled_from(POWER_VARIANTS), st.integers(0, 2**48)))
CALLS = st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True).filter(lambda call: call not in EVENT_SOURCES)
CALL_KILLS = [st.builds(kind, st.sampled_from(protocol.ALL_POINTS), CALLS, FAULTS) for kind in (AtPoint, AfterPoint)]
NO_CALL_KILLS = [st.builds(kind, st.just(protocol.AFTER_DECISIONS), st.none(), FAULTS) for kind in (AtPoint, AfterPoint)]
SECONDS = st.integers(0, 10**9).map(lambda tenths_of_ms: tenths_of_ms / 10_000)  # what a kill's text holds
EVENTS = st.sampled_from(sorted(EVENT_SOURCES)).flatmap(
    lambda source: st.builds(OnEvent, st.just(source), st.sampled_from(EVENT_SOURCES[source]), CALLS, FAULTS))
# A timed kill counted from a crash point (as reached: ``c3:after_started``, ``after_decisions``), or from the
# start of work.
ANCHORS = (st.none() | st.builds("{}:{}".format, CALLS, st.sampled_from(protocol.ALL_POINTS))
           | st.just(protocol.AFTER_DECISIONS))
KILLS = st.one_of(*CALL_KILLS, *NO_CALL_KILLS, st.builds(AfterDelay, SECONDS, FAULTS, ANCHORS), EVENTS)


@given(KILLS)
def test_every_kill_round_trips_through_its_text(kill):
    text = str(kill)
    assert parse_kill(text) == kill
    assert str(parse_kill(text)) == text


@pytest.mark.parametrize(("text", "kill"), [
    ("c3:after_effect", AtPoint(protocol.AFTER_EFFECT, "c3")),
    ("after_decisions", AtPoint(protocol.AFTER_DECISIONS)),
    ("c3:after_started+", AfterPoint(protocol.AFTER_STARTED, "c3")),
    ("@0.0342", AfterDelay(0.0342)),
    ("c3:after_started@0.0012", AfterDelay(0.0012, after="c3:after_started")),
    ("after_decisions@0.0012/torn:500", AfterDelay(0.0012, TornTail(500), "after_decisions")),
    ("journal:started:c5", OnEvent("journal", protocol.STARTED, "c5")),
    ("ledger:effect:c3/torn:500", OnEvent("ledger", protocol.LEDGER_EFFECT, "c3", TornTail(500))),
    ("c1:after_finished/torn:1", AtPoint(protocol.AFTER_FINISHED, "c1", TornTail(1))),
])
def test_each_spelling_is_its_variant(text, kill):
    assert parse_kill(text) == kill and str(kill) == text


@pytest.mark.parametrize(("text", "message"), [
    ("c3:after_effect/torn:0", "--kill-at 'c3:after_effect/torn:0': torn:N keeps N per mille"),
    ("c3:after_effect/torn:1000", "use 1..999"),
    ("c3:after_effect/torn:half", "use 1..999"),
    ("@-1", "--kill-at '@-1': a timed kill is @SECONDS"),
    ("@nan", "a finite number >= 0"),
    ("c3:after_started@x", "a finite number >= 0"),
    ("c3:after_started+@0.1", "a timed kill counts from a crash point or from the start of work"),
    ("c3:after_started/now@0.1", "a timed kill counts from a crash point or from the start of work"),
    ("ledger:effect:c3@0.1", "a timed kill counts from a crash point or from the start of work"),
    ("@0.1@0.2", "a timed kill counts from a crash point or from the start of work"),
    ("c3:after_lunch@0.1", "unknown point 'after_lunch'"),
    ("c3:after_started@0.1/now", "/now goes with a crash-point kill"),
    ("ledger:killed:c1", "--kill-on 'ledger:killed:c1': write SOURCE:KIND:CALL"),
    ("journal:started:", "write SOURCE:KIND:CALL"),
    ("c3:after_lunch", "unknown point 'after_lunch'"),
    ("after_effect", "after_effect happens per call"),
    (TIMEOUT, "unknown point 'timeout'"),  # the timeout's strike is no scheduled kill
])
def test_text_that_is_no_kill_says_why(text, message):
    with pytest.raises(KillSyntaxError, match=message.replace("(", r"\(").replace("+", r"\+")):
        parse_kill(text)


# Made by the code before kills were a tagged union (KillPoint, commit 268c3b6): token_for(load_scenario(DEMO),
# Job(0, schedule, seed=99), Verdict(True)) for the kills below. It must decode and replay the same schedule.
OLD_TOKEN = (
    "kp1.eNptUF1vgzAM_C95HSopFFby1P9RTcgkDssaYpQPbVLV_z6zUe1lb_b57nz2XUygbxiMUCKVaY2kMSVRPeGR1uwoJKHuj0poyOBpLjgaN2PKLDqe"
    "pJ0GtCj7jmUmOstwKN5XAr9W1Nxd3ypB0c0usI1IGgNER9vGvUy1wYUOmRbPHk90hCmRLxmZWX9SvNULuFD_J-Jsq4fwF-sMx6Y5Yt-f21e2jIVXy836HU"
    "3x7HgVulNgM8YRreWYdaYYVCcl03W7j1KGmNG8MPZBJQbwaoeU3s69yINsTw1Xv3yD2qWff_HJCZHfOgyPb_qreIA")
OLD_SCHEDULE = (AtPoint(protocol.AFTER_EFFECT, "c5", TornTail(500)), AfterPoint(protocol.AFTER_STARTED, "c3"),
                OnEvent("journal", protocol.STARTED, "c5"), AfterDelay(0.0342), AtPoint(protocol.AFTER_DECISIONS))


def test_a_token_made_before_the_tagged_union_replays_the_same_schedule():
    token = ReproToken.decode(OLD_TOKEN)
    assert token.schedule == ("c5:after_effect/torn:500", "c3:after_started+", "journal:started:c5", "@0.0342",
                              "after_decisions")
    spec = spec_for_token(token, load_scenario(DEMO))
    assert spec.mode == GivenMode(OLD_SCHEDULE, seed=99, index=0)


def test_an_incarnation_reads_its_kill_back_through_the_parser():
    killed = Incarnation(number=0, pid=1, exit_code=None, killed_at="c3:after_started+/torn:500")
    assert killed.kill == AfterPoint(protocol.AFTER_STARTED, "c3", TornTail(500))
    assert Incarnation(number=0, pid=1, exit_code=None, killed_at=TIMEOUT, timed_out=True).kill is None
    assert Incarnation(number=0, pid=1, exit_code=0).kill is None


def test_incarnations_json_whose_killed_at_is_no_kill_is_unreadable(tmp_path: Path):
    """Evidence on disk is the workload's to damage: a killed_at no kill spells makes the record unreadable."""
    entry = {"number": 0, "pid": 1, "exit_code": None, "killed_at": "c3:after_lunch", "timed_out": False,
             "points": [], "seconds": 0.1, "stderr_tail": "", "leftovers": [], "catalogue_drift": None,
             "kill_latency_s": None, "protocol_problems": [], "escaped": [], "storage_s": None,
             "storage_bound": False}
    path = tmp_path / "incarnations.json"
    path.write_text(json.dumps([entry]))
    assert read_incarnations(path) == ((), "incarnations.json: entry 0 has killed_at 'c3:after_lunch', which is no "
                                           f"kill (unknown point 'after_lunch'; points are {', '.join(protocol.ALL_POINTS)}"
                                           " (or @SECONDS, or ledger:KIND:CALL / journal:KIND:CALL))")
    path.write_text(json.dumps([{**entry, "killed_at": TIMEOUT, "timed_out": True}]))
    assert read_incarnations(path)[0][0].kill is None


def test_incarnations_json_written_before_the_later_keys_reads_as_what_their_absence_meant(tmp_path: Path):
    """escaped, storage_s and storage_bound came later: an older run directory or report is still read."""
    entry = {"number": 0, "pid": 1, "exit_code": 0, "killed_at": None, "timed_out": False, "points": ["c1:x"],
             "seconds": 0.1, "stderr_tail": "", "leftovers": [], "catalogue_drift": None, "kill_latency_s": None,
             "protocol_problems": []}
    path = tmp_path / "incarnations.json"
    path.write_text(json.dumps([entry]))
    (incarnation,), problem = read_incarnations(path)
    assert problem is None and incarnation == Incarnation(number=0, pid=1, exit_code=0, points=("c1:x",), seconds=0.1)
    path.write_text(json.dumps([{**entry, "escaped": "pid 9"}]))
    assert read_incarnations(path) == ((), "incarnations.json: entry 0 has ill-typed escaped='pid 9'")
