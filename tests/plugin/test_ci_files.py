"""The CI files run as written: their pytest command, in a user's project with a five-line chaos
test, runs its shard under xdist, writes the JUnit XML and keeps the failing session's evidence
and HTML report where the artifact steps pick them up."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys

import pytest

from killpoint.harness.explore import shard_of
from killpoint.harness.scenario import load_scenario
from killpoint.harness.schedule import parse_kill_point
from killpoint.harness.session import Job
from tests.helpers import DEMO, ROOT

pytest_plugins = ["pytester"]

KILL = "c4:after_started"
CHAOS_TEST = f"""
def test_my_runtime_recovers(killpoint_run):
    killpoint_run("chaos/demo.toml", workload="{{python}} -m killpoint.scenarios.mutants.retry_non_idempotent", kill_at="{KILL}")
"""


def pytest_command(text: str) -> str:
    """The folded `python -m pytest ...` block of a CI file, as one command line."""
    lines = text.splitlines()
    start = next(number for number, line in enumerate(lines) if line.strip().startswith("python -m pytest"))
    indent = len(lines[start]) - len(lines[start].lstrip())
    block = [lines[start]]
    for line in lines[start + 1:]:
        if not line.strip() or len(line) - len(line.lstrip()) != indent:
            break
        block.append(line)
    return " ".join(line.strip() for line in block)


@pytest.mark.parametrize(("ci_file", "junit"), [("github-actions.yml", "junit-{shard}.xml"),
                                                 ("gitlab-ci.yml", "junit.xml")])
def test_the_ci_files_pytest_command_runs_as_written(pytester, monkeypatch, ci_file, junit):
    # The shard that holds the one schedule, as a matrix job or GitLab node would get it.
    shard = shard_of(Job(0, (parse_kill_point(KILL, load_scenario(DEMO).plan),)), 3)
    monkeypatch.setenv("CI", "true")
    for name, value in {"SHARDS": "3", "CI_NODE_INDEX": str(shard), "CI_NODE_TOTAL": "3"}.items():
        monkeypatch.setenv(name, value)
    (pytester.path / "chaos").mkdir()
    shutil.copy(DEMO, pytester.path / "chaos" / "demo.toml")
    (pytester.path / "tests" / "chaos").mkdir(parents=True)
    (pytester.path / "tests" / "chaos" / "test_recovery.py").write_text(CHAOS_TEST)

    command = pytest_command((ROOT / "ci" / ci_file).read_text()).replace("${{ matrix.shard }}", str(shard))
    words = [os.path.expandvars(word) for word in shlex.split(command)]
    assert words[:3] == ["python", "-m", "pytest"]
    result = pytester.runpytest_subprocess(*words[3:])

    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert f"killpoint: seed 0, shard {shard}/3" in output
    assert output.count("killpoint repro kp1.") >= 2
    assert (pytester.path / junit.format(shard=shard)).is_file()
    (report,) = (pytester.path / "killpoint-report").glob("*/killpoint-1/report.html")
    assert "killpoint repro kp1." in report.read_text()

    # The last line reproduces the failure from the project's root, as a developer would run it.
    token = next(line for line in reversed(output.splitlines()) if "killpoint repro kp1." in line).split()[-1]
    repro = subprocess.run([sys.executable, "-m", "killpoint.harness.cli", "repro", token, "--runs-dir", "repro-runs"],
                           cwd=pytester.path, capture_output=True, text=True, timeout=120)
    assert repro.returncode == 1 and "[interrupted-action]" in repro.stdout, repro.stdout + repro.stderr
