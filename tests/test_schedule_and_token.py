"""Schedules are pure data from (plan, seed); tokens round-trip and refuse damage."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from killpoint import protocol
from killpoint.errors import ConfigError
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.model import AtPoint, GoldenRun
from killpoint.harness.repro.token import ReproToken
from killpoint.harness.schedules.explore import ExhaustiveMode
from killpoint.harness.schedules.schedule import derived_seed, parse_kill_point, random_schedule
from tests.helpers import DEMO

PLAN = load_scenario(DEMO).plan


def test_exhaustive_is_every_point_reached_once_in_the_order_reached():
    """The one exhaustive generator (the product's): a schedule per distinct crash point the golden run reached."""
    reached = tuple(f"{call}:{point}" for call in PLAN.call_ids for point in protocol.CALL_POINTS)
    golden = GoldenRun(Path("golden"), {}, {}, reached + reached[:3] + ("after_decisions",), 0.5)
    (jobs,) = list(ExhaustiveMode(1).batches(PLAN)(golden))
    schedules = [job.schedule for job in jobs]
    assert len(schedules) == len(PLAN.calls) * len(protocol.CALL_POINTS) + 1 == len(set(schedules))
    assert schedules[0] == (AtPoint("before_started", "c1"),) and schedules[-1] == (AtPoint("after_decisions"),)
    assert [job.index for job in jobs] == list(range(len(jobs)))


@given(st.integers(min_value=0, max_value=2**32), st.integers(min_value=0, max_value=10_000))
def test_same_seed_same_schedule(seed, index):
    run_seed = derived_seed(seed, index)
    assert run_seed == derived_seed(seed, index)
    schedule = random_schedule(PLAN, run_seed)
    assert schedule == random_schedule(PLAN, run_seed)
    assert 1 <= len(schedule) <= 2
    assert schedule[0].point in protocol.CALL_POINTS  # incarnation 0 does no recovery


def test_different_runs_get_different_seeds():
    assert len({derived_seed(1, index) for index in range(1000)}) == 1000


def test_kill_point_parsing():
    assert parse_kill_point("c3:after_effect", PLAN) == AtPoint("after_effect", "c3")
    assert str(parse_kill_point("after_decisions", PLAN)) == "after_decisions"


@pytest.mark.parametrize(("text", "message"), [
    ("c3:after_lunch", "unknown point 'after_lunch'; points are before_started"),
    ("c99:after_effect", "the plan has no call 'c99'; its calls are c1, c2"),
    ("c99:after_effect@0.01", "the plan has no call 'c99'; its calls are c1, c2"),
    ("after_effect", "after_effect happens per call; write CALL:after_effect"),
])
def test_bad_kill_point_is_named(text, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        parse_kill_point(text, PLAN)


@given(st.lists(st.sampled_from(["c1:after_effect", "after_decisions", "c2:after_verify"]), max_size=3),
       st.none() | st.integers(min_value=0, max_value=2**48),
       st.lists(st.sampled_from(["write-ahead", "liveness"]), unique=True))  # properties, each named once
def test_token_round_trips(schedule, seed, expect):
    token = ReproToken({"scenario": "scenarios/demo.toml"}, "abc", "def", tuple(schedule), seed, tuple(expect))
    assert ReproToken.decode(token.encode()) == token
    assert token.encode().startswith("kp1.")


@pytest.mark.parametrize("text", ["kp1.", "kp1.@@@", "kp1.aGVsbG8", "kp2.xyz", ""])
def test_damaged_token_raises_config_error(text):
    with pytest.raises(ConfigError):
        ReproToken.decode(text)
