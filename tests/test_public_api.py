"""``killpoint.__all__`` is the public API: these names, each the object its home module defines, and no other.

A user's script (judge a run directory they kept, load a scenario, read a
verdict) imports from ``killpoint`` alone; a change to the list below is a
change to what they may rely on, made here on purpose, never by a move.
"""

from __future__ import annotations

import importlib

import pytest

import killpoint
from tests.helpers import DEMO

PUBLIC = {
    "ConfigError", "Evidence", "Finding", "GoldenRun", "HarnessError", "InfrastructureError", "Plan", "RunOutcome",
    "RunPaths", "Scenario", "Verdict", "WorkloadError", "__version__", "check", "load_scenario", "read_evidence",
}


def test_the_public_names_are_the_settled_ones():
    assert set(killpoint.__all__) == PUBLIC
    assert len(killpoint.__all__) == len(PUBLIC)


@pytest.mark.parametrize("name", sorted(PUBLIC - {"__version__"}))
def test_each_public_name_is_its_home_modules_object(name):
    home = importlib.import_module(killpoint._HOMES[name])
    assert getattr(killpoint, name) is getattr(home, name)
    assert getattr(getattr(killpoint, name), "__module__", home.__name__).startswith("killpoint.")


def test_a_name_that_is_not_public_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'run_session'"):
        killpoint.run_session  # noqa: B018


def test_a_run_directory_is_judged_with_the_public_names_alone(tmp_path):
    """What a user does with a kept run: read its evidence where ``RunPaths`` says, and check it."""
    scenario = killpoint.load_scenario(DEMO)
    paths = killpoint.RunPaths(tmp_path / "run")
    paths.workload.mkdir(parents=True)
    paths.ledger.write_text("")
    paths.journal.write_text("")
    evidence = killpoint.read_evidence(paths.run_dir)
    golden = killpoint.GoldenRun(tmp_path / "golden", {}, {}, (), 0.0)
    verdict = killpoint.check(scenario, evidence, golden)
    assert isinstance(verdict, killpoint.Verdict)
    # Read where RunPaths says: the journal and ledger found, the incarnations' record missing, so unknown.
    assert verdict.valid is None and "incarnations.json is missing" in (verdict.error or ""), verdict
    assert not evidence.unreadable.keys() - {paths.incarnations.name}, evidence.unreadable
