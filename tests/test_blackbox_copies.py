"""The copies of a runtime's own store: made without following a link, read back into durable states or refused."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from killpoint import protocol as p
from killpoint.catalogue import REFERENCE_CATALOGUE, load_catalogue
from killpoint.errors import ConfigError
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.faults.nemesis import copy_store
from killpoint.harness.judge.evidence import StoreReading, read_evidence
from killpoint.harness.judge.stores import reader_for
from killpoint.harness.layout import STORE_FINAL, RunPaths, refusal_path
from killpoint.harness.model import Incarnation
from tests.test_checker import PLAN

STARTED_C1 = {"kind": "started", "op": "t-op1", "call": "c1", "tool": "read_file", "class": "READ_ONLY",
              "interactive": False, "attempt": 1}
FINISHED_C1 = {"kind": "finished", "op": "t-op1", "status": "SUCCEEDED"}


def journal(*records: dict) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "host-secret"
    path.write_text("root's secret\n")
    return path


def test_a_store_is_copied_file_by_file_into_its_folders_and_an_absent_file_is_not_invented(tmp_path):
    workload = tmp_path / "workload"
    (workload / "db").mkdir(parents=True)
    (workload / "db" / "state.sqlite").write_bytes(b"main")
    assert copy_store(workload, ("db/state.sqlite", "db/state.sqlite-wal"), tmp_path / "copy") == []
    assert (tmp_path / "copy" / "db" / "state.sqlite").read_bytes() == b"main"
    assert not (tmp_path / "copy" / "db" / "state.sqlite-wal").exists()


@pytest.mark.parametrize("plant", ["symlink", "fifo", "linked folder"])
def test_a_store_file_swapped_for_a_link_or_a_fifo_is_refused_never_followed_and_the_copy_withdrawn(
        tmp_path, secret, plant):
    workload = tmp_path / "workload"
    workload.mkdir()
    (workload / "other.json").write_text("{}")
    if plant == "symlink":
        os.symlink(secret, workload / "store.json")
    elif plant == "fifo":
        os.mkfifo(workload / "store.json")  # an open that waited for a writer would hang the harness here
    else:
        (tmp_path / "elsewhere").mkdir()
        os.symlink(secret, tmp_path / "elsewhere" / "store.json")
        os.symlink(tmp_path / "elsewhere", workload / "db")
    name = "db/store.json" if plant == "linked folder" else "store.json"
    copy = tmp_path / "store-at-kill-0"

    problems = copy_store(workload, ("other.json", name), copy)

    expected = {"symlink": "store.json is a symlink; it was not followed", "fifo": "store.json is a FIFO",
                "linked folder": "db on its path is a symlink; it was not followed"}[plant]
    assert len(problems) == 1 and expected in problems[0], problems
    assert not copy.exists()  # never judged on what is left
    assert expected in refusal_path(copy).read_text()
    assert not any(b"root's secret" in path.read_bytes() for path in tmp_path.rglob("*")
                   if path.is_file() and not path.is_symlink() and path != secret)


def _run_dir(tmp_path: Path) -> tuple[Path, StoreReading]:
    """A run killed once, with its store copied at the kill and at the end, beside a crash-free run's."""
    run, golden = tmp_path / "run", tmp_path / "golden"
    incarnations = [Incarnation(0, 100, None, "c1:after_started"), Incarnation(1, 101, 0, None)]
    run.mkdir()
    (run / "incarnations.json").write_text(json.dumps([asdict(incarnation) for incarnation in incarnations]))
    (run / "catalogue.json").write_text(json.dumps(load_catalogue(REFERENCE_CATALOGUE).to_protocol()))
    for folder, records in ((RunPaths(run).store_at_kill(0), (STARTED_C1,)),
                            (RunPaths(run).store_final, (STARTED_C1, FINISHED_C1)),
                            (RunPaths(golden).store_final, (STARTED_C1, FINISHED_C1))):
        folder.mkdir(parents=True)
        (folder / p.JOURNAL_NAME).write_text(journal(*records))
    return run, StoreReading(reader_for({"format": "killpoint"}), PLAN, golden)


def test_the_copies_are_read_into_durable_states_through_the_reader(tmp_path):
    run, reading = _run_dir(tmp_path)
    evidence = read_evidence(run, reading)
    assert evidence.unreadable == {}
    assert evidence.stores_at_kill[0].records["c1"].status == p.RUNNING
    assert evidence.store_final is not None and evidence.store_final.records["c1"].status == p.SUCCEEDED
    assert evidence.golden_store_final == evidence.store_final
    assert read_evidence(run).stores_at_kill == ()  # judged from the journal, the store is not read


def test_a_refused_a_lost_or_an_unreadable_copy_is_unreadable_with_its_reason(tmp_path):
    run, reading = _run_dir(tmp_path)
    copy = RunPaths(run).store_at_kill(0)
    (copy / p.JOURNAL_NAME).unlink()
    copy.rmdir()
    assert read_evidence(run, reading).unreadable == {"store-at-kill-0": "store-at-kill-0 is missing"}
    refusal_path(copy).write_text("the store file journal.jsonl: journal.jsonl is a symlink; it was not followed\n")
    assert "store-at-kill-0 was refused: the store file journal.jsonl: journal.jsonl is a symlink" in \
        read_evidence(run, reading).unreadable["store-at-kill-0"]
    (run / STORE_FINAL / p.JOURNAL_NAME).write_text('{"kind": "started", "op": ["not", "a", "string"]}\n')
    evidence = read_evidence(run, reading)
    assert evidence.store_final is None and evidence.unreadable[STORE_FINAL].startswith("store-final cannot be read")


def test_a_journal_table_with_problems_is_refused_with_the_scenario_naming_field_and_fix(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text('workload = ["true"]\n[plan]\ntask_id = "t"\n[[plan.calls]]\ncall_id = "c1"\n'
                        'tool = "read_file"\n[journal]\nformat = "killpont"\n')
    with pytest.raises(ConfigError) as refused:
        load_scenario(scenario)
    (problem,) = refused.value.problems
    assert problem.startswith(f"{scenario}: journal.format: unknown format 'killpont' (did you mean 'killpoint'?)")
    scenario.write_text(scenario.read_text().replace('format = "killpont"', 'format = "killpoint"'))
    assert load_scenario(scenario).journal.table == {"format": "killpoint"}
    scenario.write_text('journal = 3\n' + scenario.read_text().replace('[journal]\nformat = "killpoint"\n', ''))
    with pytest.raises(ConfigError) as refused:
        load_scenario(scenario)
    assert refused.value.problems == (f"{scenario}: journal: 3 is not a table; write [journal] format = \"killpoint\" "
                                      "(the runtime's own durable record: docs/journal-mapping.md)",)


def test_a_store_file_that_cannot_be_read_is_a_refusal_not_a_crash(tmp_path, monkeypatch):
    # Root reads through a chmod 000; an I/O error (or a non-root harness) does not: the copy says why.
    from killpoint.harness.faults import nemesis

    def failing_copy(source, target):
        raise OSError(5, "Input/output error")

    workload = tmp_path / "workload"
    workload.mkdir()
    (workload / "dbos.sqlite").write_bytes(b"SQLite format 3\0")
    monkeypatch.setattr(nemesis, "copy_evidence", failing_copy)
    copy = tmp_path / "store-at-kill-0"
    assert copy_store(workload, ("dbos.sqlite",), copy) == [
        "the store file dbos.sqlite could not be copied: Input/output error"]
    assert not copy.exists() and "Input/output error" in refusal_path(copy).read_text()
