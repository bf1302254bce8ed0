"""A workload that cannot do its task even without a crash is a workload error (exit 2),
never a recovery verdict; and no process of it survives the run."""

from __future__ import annotations

import json

from tests.helpers import DEMO
from tests.helpers import workload_command as workload


def test_missing_command_is_a_workload_error(killpoint):
    result = killpoint("run", DEMO, "--workload", "/nonexistent/agent --serve", "--kill-at", "c1:after_started")
    assert result.exit_code == 2
    assert "workload '/nonexistent/agent --serve' cannot start: No such file or directory" in result.err
    assert "Traceback" not in result.err


def test_workload_exiting_at_once_reports_its_stderr(killpoint):
    result = killpoint("run", DEMO, "--workload", workload("exits_at_once.py"), "--exhaustive")
    assert result.exit_code == 2
    assert "workload error:" in result.err
    assert "exited with code 3" in result.err
    assert "fatal: cannot load the agent configuration" in result.err
    assert "FAIL" not in result.out


def test_workload_that_hangs_is_killed_at_the_timeout(killpoint):
    result = killpoint("run", DEMO, "--workload", workload("hangs.py"), "--timeout", "0.5", "--exhaustive")
    assert result.exit_code == 2
    assert "hung past the timeout of 0.5s" in result.err


def test_workload_that_never_connects_cannot_be_killed_at_points(killpoint):
    result = killpoint("run", DEMO, "--workload", "{python} -m killpoint.scenarios.silent killpoint.scenarios.reference_runtime", "--exhaustive")
    assert result.exit_code == 2
    assert "never connected to the control socket ($KILLPOINT_CONTROL)" in result.err


def test_escaped_grandchild_is_killed_and_reported(killpoint, tmp_path):
    result = killpoint("run", DEMO, "--workload", workload("spawns_escapee.py"), "--kill-at", "c4:after_effect",
                       "--json", tmp_path / "report.json")
    assert result.exit_code == 0, result.out + result.err
    run = json.loads((tmp_path / "report.json").read_text())["runs"][0]
    leftovers = [leftover for incarnation in run["incarnations"] for leftover in incarnation["leftovers"]]
    # The killed incarnation's escapee dies with its tree; the last one's is adopted and swept.
    assert any("time.sleep(600)" in leftover for leftover in leftovers), run["incarnations"]
    assert any("the sweep killed it" in note for note in run["notes"])
