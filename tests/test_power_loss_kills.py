"""Power-loss kills (``/power``): the text, the session choice ``--power-loss``, and the rule it adds.

No process is started here (the lazy file system's probe mounts one for a
moment); the power losses themselves are in tests/integration/test_power_loss.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from killpoint import protocol
from killpoint.errors import ConfigError
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.faults import lazyfs
from killpoint.harness.frontends.pytest_plugin import Settings, session_choices
from killpoint.harness.frontends.spec import build_spec
from killpoint.harness.model import (AfterDelay, AtPoint, KillSyntaxError, OnEvent, PlainKill, PowerLoss, TornTail,
                                     parse_kill)
from killpoint.harness.schedules.schedule import EveryKill, power_lost
from tests.helpers import DEMO
from tests.test_no_pause import golden_of_demo


@pytest.fixture(autouse=True)
def lazy_file_systems_mount(monkeypatch):
    """The spec probes that a lazy file system mounts (a process; tests/integration/test_power_loss.py runs it)."""
    monkeypatch.setattr(lazyfs, "probe", lambda: None)


@pytest.mark.parametrize(("text", "kill"), [
    ("c3:after_effect/power", AtPoint(protocol.AFTER_EFFECT, "c3", PowerLoss())),
    ("c3:after_effect/now/power:op:7", AtPoint(protocol.AFTER_EFFECT, "c3", PowerLoss("op", 7), now=True)),
    ("@0.0100/power:seq:3", AfterDelay(0.01, PowerLoss("seq", 3))),
    ("ledger:effect:c3/power", OnEvent("ledger", "effect", "c3", PowerLoss())),
])
def test_a_power_loss_is_spelt_after_its_kill_and_read_back(text, kill):
    assert parse_kill(text) == kill
    assert str(kill) == text


@pytest.mark.parametrize(("text", "advice"), [
    ("c3:after_effect/torn:500/power", "a kill carries one fault"),
    ("c3:after_effect/power/torn:500", "write c3:after_effect/power"),
    ("c3:after_effect/power:op", "SEED a whole number"),
    ("c3:after_effect/power:half:1", "/power:op:SEED"),
    ("c3:after_effect/powered", "write c3:after_effect/power"),
])
def test_a_power_loss_misspelt_is_refused_with_the_spelling_to_use(text, advice):
    with pytest.raises(KillSyntaxError) as raised:
        parse_kill(text)
    assert advice in str(raised.value) and "--kill-at" in str(raised.value)


def test_power_lost_makes_every_kill_a_power_loss_and_tears_torn_ones():
    schedule = (AtPoint(protocol.AFTER_EFFECT, "c1"), AtPoint(protocol.AFTER_STARTED, "c2", TornTail(499)),
                AtPoint(protocol.AFTER_STARTED, "c3", TornTail(500)), AtPoint(protocol.AFTER_EFFECT, "c4", PowerLoss("op", 9)))
    assert [kill.fault for kill in power_lost(schedule)] == [PowerLoss(), PowerLoss("op", 499), PowerLoss("seq", 500),
                                                             PowerLoss("op", 9)]
    assert power_lost(power_lost(schedule)) == power_lost(schedule)


def test_every_kill_applies_both_choices_and_says_so():
    both = EveryKill(no_pause=True, power_loss=True)
    [kill] = both.apply((AtPoint(protocol.AFTER_EFFECT, "c1"),))
    assert kill == AtPoint(protocol.AFTER_EFFECT, "c1", PowerLoss(), now=True)
    assert str(both) == ", no pause, power loss" and str(EveryKill()) == ""


@pytest.mark.parametrize("choices", [{"exhaustive": True}, {"random": 5, "seed": 3}, {"kill_at": ["c2:after_effect"]},
                                     {"timed": True, "runs": 3, "seed": 1}, {"kill_on": ["ledger:effect:c3"]}])
def test_power_loss_makes_every_kill_of_every_mode_a_power_loss(choices):
    spec = build_spec(load_scenario(DEMO), power_loss=True, **choices)
    kills = [kill for batch in spec.batches()(golden_of_demo()) for job in batch for kill in job.schedule]
    assert kills and all(isinstance(kill.fault, PowerLoss) for kill in kills)
    assert "power loss" in spec.describe()


def test_exhaustive_torn_power_losses_run_both_variants_at_every_kill():
    spec = build_spec(load_scenario(DEMO), power_loss=True, torn_tail=True, exhaustive=True)
    jobs = next(spec.batches()(golden_of_demo()))
    faults = {(str(job.schedule[0].trigger), job.schedule[0].fault) for job in jobs}
    assert ("c2:after_started", PowerLoss("op", 499)) in faults and ("c2:after_started", PowerLoss("seq", 500)) in faults
    assert ("c2:after_effect", PowerLoss()) in faults and not any(isinstance(fault, TornTail | PlainKill)
                                                                  for _, fault in faults)
    # Un-synced writes may wait anywhere (a framework's pages), so every kill is torn, not only those after a record.
    assert ("c2:after_effect", PowerLoss("op", 499)) in faults and ("c2:after_effect", PowerLoss("seq", 500)) in faults


def test_a_journal_store_scenario_takes_torn_power_losses(tmp_path):
    """A torn tail cuts killpoint's journal only (a ConfigError for a [journal] store); a torn power loss
    tears whatever the runtime did not sync, so it is accepted there."""
    scenario = load_scenario(Path("scenarios/foreign/short.toml"))
    with pytest.raises(ConfigError):
        build_spec(scenario, torn_tail=True, exhaustive=True)
    assert build_spec(scenario, torn_tail=True, exhaustive=True, power_loss=True).power_loss


def test_the_plugin_option_and_keyword_choose_power_loss():
    settings = Settings(0, False, None, None, None, None, None, power_loss=True)
    assert session_choices(settings, Path("runs"))["power_loss"] is True
    assert session_choices(settings, Path("runs"), power_loss=False)["power_loss"] is False
