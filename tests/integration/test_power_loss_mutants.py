"""Power loss tells a durable write from one left to the page cache; a kill alone cannot.

A runtime that fsyncs every record (and the folder of every file it creates or
renames) before it relies on it passes when every kill is also a power loss.
Each power-loss mutant of the zoo leaves one write to the page cache: it passes
every kill that spares the cache (every SIGKILL-only mode here), and the zoo's
own test (test_mutant_zoo.py) holds that ``--power-loss`` catches it with its
property named. The SQLite-journal runtime is durable exactly where SQLite's
documentation says it is.
"""

from __future__ import annotations

import pytest

from killpoint.scenarios.mutants import zoo
from tests.helpers import DEMO, ROOT
from tests.integration.test_blackbox_runs import SHORT_PLAN

POWER_LOSS_MUTANTS = [mutant for mutant in zoo() if "--power-loss" in mutant.caught_with]
STANDALONE = f"{{python}} {ROOT / 'scenarios' / 'standalone' / 'runtime.py'}"
SQLITE_SHORT = ROOT / "scenarios" / "sqlite_journal" / "short.toml"
SQLITE_RUNTIME = "{python} -m killpoint.scenarios.sqlite_journal.runtime"
# The modes that kill without losing the page cache; a store judged black-box is not torn (bad input).
SIGKILL_MODES = {"exhaustive": ("--exhaustive",), "random": ("--random", "20", "--seed", "1"),
                 "torn-tail": ("--exhaustive", "--torn-tail")}


@pytest.fixture
def short_scenario(tmp_path):
    """The reference runtime on three calls (READ_ONLY, NON_IDEMPOTENT, UNKNOWN): 150 schedules of two kills."""
    path = tmp_path / "short.toml"
    path.write_text(SHORT_PLAN)
    return path


def test_the_zoo_holds_a_mutant_for_every_write_a_power_loss_can_take():
    assert {mutant.name for mutant in POWER_LOSS_MUTANTS} >= {
        "journal_never_fsynced", "started_fsynced_after_tool", "standalone_never_fsyncs",
        "foreign_rename_no_dir_fsync", "foreign_rename_no_file_fsync", "sqlite_synchronous_off"}


SIGKILL_CASES = [pytest.param(mutant, flags, id=f"{mutant.name}-{mode}")
                 for mutant in POWER_LOSS_MUTANTS for mode, flags in SIGKILL_MODES.items()
                 if not (mode == "torn-tail" and mutant.scenario != "demo")]


@pytest.mark.parametrize(("mutant", "flags"), SIGKILL_CASES)
def test_a_power_loss_mutant_passes_every_kill_that_spares_the_page_cache(killpoint, mutant, flags):
    result = killpoint("run", ROOT / "scenarios" / f"{mutant.scenario}.toml", *flags,
                       "--workload", mutant.workload, "-q")
    assert result.exit_code == 0, result.out[-2000:] + result.err[-2000:]
    assert " 0 failed" in result.out


@pytest.mark.parametrize(("scenario", "workload", "flags"), [
    pytest.param("short", None, ("--depth", "2"), id="reference-depth-2"),
    pytest.param(DEMO, None, (), id="reference-demo"),
    pytest.param("short", STANDALONE, (), id="standalone"),
    pytest.param("short", STANDALONE, ("--depth", "2", "--shard", "1/8"), id="standalone-depth-2-shard"),
    pytest.param(ROOT / "scenarios" / "foreign" / "short.toml", None, (), id="foreign-agent"),
    pytest.param(SQLITE_SHORT, None, ("--depth", "2"), id="sqlite-wal-full-depth-2"),
])
def test_a_runtime_that_makes_each_write_durable_before_relying_on_it_passes_every_power_loss(
        killpoint, short_scenario, scenario, workload, flags):
    path = short_scenario if scenario == "short" else scenario
    result = killpoint("run", path, "--exhaustive", "--power-loss", *flags, "-j", "2", "-q",
                       *(("--workload", workload) if workload else ()))
    assert result.exit_code == 0, result.out[-3000:] + result.err[-2000:]
    assert " 0 failed" in result.out


@pytest.mark.parametrize("scenario", [DEMO, SQLITE_SHORT], ids=["reference", "sqlite-wal-full"])
def test_a_durable_runtime_passes_torn_power_losses_too(killpoint, scenario):
    # Part of the last unsynced write kept, or some of the unsynced writes: never a durable one lost.
    result = killpoint("run", scenario, "--exhaustive", "--power-loss", "--torn-tail", "-j", "2", "-q")
    assert result.exit_code == 0, result.out[-3000:] + result.err[-2000:]
    assert " 0 failed" in result.out


@pytest.mark.parametrize(("journal_mode", "synchronous", "durable"), [
    ("wal", "full", True),  # the WAL fsynced at every commit
    ("delete", "extra", True),  # the rollback journal's unlink fsynced into its folder too
    ("wal", "normal", False),  # the WAL fsynced only at checkpoints: consistent, not durable
    ("delete", "full", False),  # the unlink not synced: the journal comes back hot and rolls the commit back
    ("wal", "off", False),
    ("delete", "off", False),
])
def test_the_sqlite_journal_survives_a_power_loss_exactly_where_sqlite_says_a_commit_is_durable(
        killpoint, journal_mode, synchronous, durable):
    workload = f"{SQLITE_RUNTIME} --journal-mode {journal_mode} --synchronous {synchronous}"
    result = killpoint("run", SQLITE_SHORT, "--exhaustive", "--power-loss", "-x", "-q", "--workload", workload)
    assert result.exit_code == (0 if durable else 1), result.out[-3000:] + result.err[-2000:]
    assert ("[write-ahead]" in result.out) is not durable  # a commit the tool relied on was lost


@pytest.mark.parametrize("synchronous", ["off", "full"])
def test_the_sqlite_journal_passes_every_kill_whatever_it_fsyncs(killpoint, synchronous):
    workload = f"{SQLITE_RUNTIME} --journal-mode delete --synchronous {synchronous}"
    result = killpoint("run", SQLITE_SHORT, "--exhaustive", "-q", "--workload", workload)
    assert result.exit_code == 0, result.out[-3000:] + result.err[-2000:]
