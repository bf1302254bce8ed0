"""Real storage engines under power loss: what each loses with its defaults and with the settings its docs recommend.

LangGraph's SqliteSaver sets ``journal_mode = WAL`` and leaves ``synchronous``
at SQLite's FULL, under which the WAL is fsynced at every commit: a step whose
writes were saved survives the power failing. DBOS opens its SQLite system
database with SQLite's defaults, the rollback journal with ``synchronous =
FULL``: the commit is the journal's unlink, never fsynced into its folder, so
a power loss right after a commit brings the journal back hot and SQLite rolls
the commit back. DBOS then re-runs a step it had recorded and returned, and
the shop's card is charged twice. ``synchronous = EXTRA``, which SQLite's docs
give for exactly this, set the way SQLAlchemy documents it
(scenarios/frameworks/durable_sqlite.py), loses nothing. The measured table:
docs/power-loss.md, "Real storage engines".

The SQLite-journal runtime's matrix of settings is test_power_loss_mutants.py's;
here the property its OFF setting breaks is named, and what was lost is read.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.judge.stores import reader_for
from tests.helpers import ROOT
from tests.integration.test_framework_workloads import findings

FRAMEWORKS = ROOT / "scenarios" / "frameworks"
EXAMPLES = FRAMEWORKS / "examples"
SQLITE_ORDER = ROOT / "scenarios" / "sqlite_journal" / "order.toml"
SQLITE_RUNTIME = "{python} -m killpoint.scenarios.sqlite_journal.runtime"
HOT_JOURNAL = {"path": "dbos.sqlite-journal", "change": "unlink"}


def drop_reports(runs: Path) -> list[dict[str, Any]]:
    """Every power-loss-N.json of the session's runs."""
    return [json.loads(path.read_text()) for path in sorted(runs.glob("run-*/power-loss-*.json"))]


def undone(report: dict[str, Any]) -> list[dict[str, str]]:
    """The directory changes a drop undid, without the wording of why."""
    return [{"path": entry["path"], "change": entry["change"]} for entry in report["entries"]]


def recorded_steps(scenario: Path, store: Path) -> set[str]:
    """The planned steps the store copy in ``store`` holds, read as the harness reads it."""
    state = reader_for(tomllib.loads(scenario.read_text())["journal"]).read(store, load_scenario(scenario).plan)
    assert state.problems == (), state
    return set(state.records)


@pytest.mark.parametrize("name", ["langgraph_graph_guarded", "langgraph_functional_guarded"])
def test_langgraph_sqlite_saver_with_its_defaults_passes_every_power_loss(killpoint, tmp_path, name):
    """WAL + FULL: a power loss takes only what was never fsynced, SQLite's -shm index and the WAL past its
    last commit (a commit still in flight on a background saver), never a directory entry."""
    runs = tmp_path / "runs"
    result = killpoint("run", FRAMEWORKS / f"{name}.toml", "--exhaustive", "--power-loss", "-j", "2",
                       "--keep-all", "--runs-dir", runs)
    assert result.exit_code == 0, result.out[-3000:] + result.err[-2000:]
    assert "20 runs: 20 passed, 0 failed" in result.out, result.out[-3000:]  # 5 points of 4 steps: step_saving too
    reports = drop_reports(runs)
    assert len(reports) == 20
    assert all(report["entries"] == [] for report in reports), reports
    lost = {file["path"] for report in reports for file in report["files"]}
    assert lost <= {"checkpoints.sqlite-shm", "checkpoints.sqlite-wal", "killpoint-steps.jsonl"}, lost


@pytest.mark.parametrize(("scenario", "rerun"), [
    (FRAMEWORKS / "dbos_workflow_guarded.toml", "c3"),
    (EXAMPLES / "shop_dbos.toml", "c3"),
])
def test_dbos_on_sqlite_with_its_defaults_forgets_the_step_it_committed_last(killpoint, tmp_path, scenario, rerun):
    """Killed once c3's output is committed (the same kill without a power loss passes: test_framework_workloads):
    the drop undoes the rollback journal's unlink and nothing else, every byte having been fsynced, so DBOS
    recovers from a hot journal without c3 and runs it again, its guard trusting the step's record."""
    runs = tmp_path / "runs"
    result = killpoint("run", scenario, "--kill-at", "c3:step_recorded/power", "--runs-dir", runs)
    assert result.exit_code == 1, result.out[-3000:] + result.err[-2000:]
    named = findings(result.out, "verify-before-replay")
    assert named and all(line.split()[1] == rerun for line in named), result.out[-3000:]
    [report] = drop_reports(runs)
    assert undone(report) == [HOT_JOURNAL] and report["files"] == [], report
    run = runs / "run-00000"
    assert recorded_steps(scenario, run / "store-at-kill-0") == {"c1", "c2", "c3"}
    assert recorded_steps(scenario, run / "store-at-kill-0.found") == {"c1", "c2"}
    if scenario.parent == EXAMPLES:
        assert (run / "world" / "charges.txt").read_text().count("charged") == 2


@pytest.mark.parametrize("scenario", [FRAMEWORKS / "dbos_workflow_guarded_durable.toml",
                                      EXAMPLES / "shop_dbos_durable.toml"])
def test_dbos_with_synchronous_extra_keeps_the_step_it_committed_last(killpoint, tmp_path, scenario):
    """EXTRA fsyncs the folder after the unlink: the same power loss finds c3 recorded and nothing is undone."""
    runs = tmp_path / "runs"
    result = killpoint("run", scenario, "--kill-at", "c3:step_recorded/power", "--keep-all", "--runs-dir", runs)
    assert result.exit_code == 0, result.out[-3000:] + result.err[-2000:]
    [report] = drop_reports(runs)
    assert undone(report) == [] and not report["files"], report
    assert recorded_steps(scenario, runs / "run-00000" / "store-at-kill-0.found") == {"c1", "c2", "c3"}


@pytest.mark.parametrize(("journal_mode", "synchronous", "files", "entries"), [
    # Nothing fsynced, not even the folder after the database's create: the file itself is lost.
    ("delete", "off", {"agent.db"}, [{"path": "agent.db", "change": "create"}]),
    # Every byte fsynced, the journal's unlink (the commit) not: the journal comes back hot.
    ("delete", "full", set(), [{"path": "agent.db-journal", "change": "unlink"}]),
    ("delete", "extra", set(), []),
    ("wal", "full", {"agent.db-shm"}, []),  # the WAL index, never fsynced and rebuilt from the WAL
])
def test_what_the_sqlite_journal_loses_is_exactly_what_its_setting_never_made_durable(
        killpoint, tmp_path, journal_mode, synchronous, files, entries):
    """Killed after c5's tap, the power lost: the drop takes what SQLite's setting left to the page cache, each
    byte taken never fsynced; the runtime passes exactly when that took no commit (test_power_loss_mutants
    sweeps every point of every setting)."""
    runs = tmp_path / "runs"
    workload = f"{SQLITE_RUNTIME} --journal-mode {journal_mode} --synchronous {synchronous}"
    result = killpoint("run", SQLITE_ORDER, "--workload", workload, "--kill-at", "c5:after_effect/power",
                       "--keep-all", "--runs-dir", runs)
    [report] = drop_reports(runs)
    assert {file["path"] for file in report["files"]} == files, report
    assert not any(file["ever_fsynced"] for file in report["files"]), report
    assert undone(report) == entries, report
    assert result.exit_code == (1 if entries else 0), result.out[-3000:] + result.err[-2000:]
    if entries:
        assert any(line.split()[1] == "c5" for line in findings(result.out, "write-ahead")), result.out[-3000:]
