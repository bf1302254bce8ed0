"""run.json, the first stage of a run's evidence: written whole before the first launch, never over another,
read back exactly, and refused with the file, every problem and the fix when it is not one killpoint wrote."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, fields, replace
from typing import Any

import pytest

import killpoint
from killpoint.errors import ConfigError
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.execute import run_record
from killpoint.harness.execute.run_record import (FORMAT, new_run_record, read_run_record, scenario_digest,
                                                  write_json_atomically, write_run_record)
from killpoint.harness.execute.session import token_for
from killpoint.harness.layout import RUN_RECORD_NAME
from killpoint.harness.model import AtPoint, Job, Verdict
from tests.helpers import DEMO

JOB = Job(3, (AtPoint("after_effect", "c5"), AtPoint("after_started", "c7")), seed=99)


def demo_record(**changes: Any) -> run_record.RunRecord:
    scenario = load_scenario(DEMO)
    record = new_run_record(scenario, run=JOB.index, schedule=tuple(map(str, JOB.schedule)), seed=JOB.seed,
                            drift=None, token=token_for(scenario, JOB, Verdict(None)), backend="forkserver",
                            backend_options={}, argv=("killpoint", "run", "scenarios/demo.toml", "--random", "5"))
    return replace(record, **changes)


def test_a_record_reads_back_as_written(tmp_path):
    record = demo_record()
    path = write_run_record(tmp_path / "run-00003", record)
    assert path == tmp_path / "run-00003" / RUN_RECORD_NAME
    assert read_run_record(tmp_path / "run-00003") == record
    on_disk = json.loads(path.read_text())
    assert on_disk["schedule"] == ["c5:after_effect", "c7:after_started"] and on_disk["seed"] == 99
    assert on_disk["origin"]["scenario"] == "scenarios/demo.toml" and on_disk["format"] == FORMAT
    assert on_disk["killpoint_version"] == killpoint.__version__ and on_disk["harness_pid"] == os.getpid()
    assert on_disk["token"].startswith("kp1.") and on_disk["backend"] == "forkserver"


def test_a_record_is_never_written_over_another(tmp_path):
    write_run_record(tmp_path, demo_record())
    with pytest.raises(FileExistsError):
        write_run_record(tmp_path, demo_record(run=4))
    assert read_run_record(tmp_path).run == 3
    assert sorted(path.name for path in tmp_path.iterdir()) == [RUN_RECORD_NAME]  # no temporary left behind


def test_an_atomic_write_replaces_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "incarnations.json"
    write_json_atomically(path, [1])
    write_json_atomically(path, [{"number": 0}])
    assert json.loads(path.read_text()) == [{"number": 0}] and os.listdir(tmp_path) == ["incarnations.json"]


def test_the_checked_fields_are_the_record_fields():
    assert set(run_record._TYPES) | set(run_record._OPTIONAL_TYPES) == {field.name for field in fields(run_record.RunRecord)}


def good() -> dict[str, object]:
    return json.loads(json.dumps(asdict(demo_record())))


@pytest.mark.parametrize(("content", "named"), [
    (b"{", "not JSON"),
    (b"[]", "holds list, not an object"),
    (json.dumps({**good(), "format": "killpoint-run/9"}).encode(), "format 'killpoint-run/9': this killpoint reads"),
    (json.dumps({key: value for key, value in good().items() if key != "seed"}).encode(), "seed: missing"),
    (json.dumps({**good(), "seed": "99"}).encode(), "seed: str '99', not int or NoneType"),
    (json.dumps({**good(), "run": True}).encode(), "run: bool True, not int"),
    (json.dumps({**good(), "schedule": [5]}).encode(), "schedule: must be a list of text"),
    (json.dumps({**good(), "origin": {"scenario": 1}}).encode(), "origin: must map names to text"),
    (json.dumps({**good(), "extra": 1}).encode(), "extra: unknown field"),
])
def test_a_bad_record_is_refused_with_the_file_and_the_problem(tmp_path, content, named):
    (tmp_path / RUN_RECORD_NAME).write_bytes(content)
    with pytest.raises(ConfigError) as error:
        read_run_record(tmp_path)
    assert str(tmp_path / RUN_RECORD_NAME) in str(error.value) and named in str(error.value)


def test_a_missing_or_linked_record_is_refused_with_the_fix(tmp_path):
    with pytest.raises(ConfigError, match="no such file .*give a run directory such as killpoint-runs/"):
        read_run_record(tmp_path)
    (tmp_path / "elsewhere.json").write_text(json.dumps(good()))
    (tmp_path / RUN_RECORD_NAME).symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(ConfigError, match="cannot be read"):
        read_run_record(tmp_path)


def test_the_scenario_digest_follows_what_runs_not_the_name():
    scenario = load_scenario(DEMO)
    assert scenario_digest(scenario) == scenario_digest(load_scenario(DEMO))
    assert scenario_digest(replace(scenario, name="renamed")) == scenario_digest(scenario)
    assert scenario_digest(replace(scenario, timeout_s=scenario.timeout_s + 1)) != scenario_digest(scenario)
    assert scenario_digest(replace(scenario, world_files={"x": "y"})) != scenario_digest(scenario)


def test_the_record_says_the_harness_argv_by_default(monkeypatch):
    monkeypatch.setattr("sys.argv", ["killpoint", "run", "x.toml"])
    scenario = load_scenario(DEMO)
    record = new_run_record(scenario, run=0, schedule=(), seed=None, drift=None, token="kp1.x", backend="subprocess",
                            backend_options={})
    assert record.argv == ("killpoint", "run", "x.toml")
    assert record.origin["scenario_absolute"] == str(DEMO)
