"""The runner's evidence in stages: a harness SIGKILLed mid-run leaves an incarnations.json listing those done,
and a run directory the session has already started with its run.json is laid out around it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from killpoint.harness.backends.subprocess import SubprocessBackend
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.execute.runner import carry_out_schedule, sweep_abandoned_control_dirs
from killpoint.harness.schedules.schedule import parse_kill_point
from tests.helpers import DEMO, ROOT

# A harness that carries out "kill at c2:after_effect" and is SIGKILLed as it launches the recovery.
HARNESS_KILLED_AT_SECOND_LAUNCH = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from killpoint.harness.backends.subprocess import SubprocessBackend
    from killpoint.harness.execute.runner import carry_out_schedule
    from killpoint.harness.config.scenario import load_scenario
    from killpoint.harness.schedules.schedule import parse_kill_point

    class DiesAtTheSecondLaunch(SubprocessBackend):
        launches = 0

        def launch(self, *args, **kwargs):
            self.launches += 1
            if self.launches == 2:
                os.kill(os.getpid(), signal.SIGKILL)
            return super().launch(*args, **kwargs)

    scenario = load_scenario(sys.argv[1])
    carry_out_schedule(scenario, (parse_kill_point("c2:after_effect", scenario.plan),), Path(sys.argv[2]),
                DiesAtTheSecondLaunch())
""")


def test_a_harness_killed_mid_run_leaves_the_incarnations_it_finished(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    harness = subprocess.run([sys.executable, "-c", HARNESS_KILLED_AT_SECOND_LAUNCH, str(DEMO), str(run_dir)],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    sweep_abandoned_control_dirs()  # the control socket's folder a SIGKILLed harness cannot remove
    assert harness.returncode == -signal.SIGKILL, harness.stderr
    (killed,) = json.loads((run_dir / "incarnations.json").read_text())
    assert killed["number"] == 0 and killed["killed_at"] == "c2:after_effect", killed
    assert [path.name for path in run_dir.glob(".incarnations.json.*")] == []  # each rewrite replaced it whole


def test_a_run_directory_holding_only_run_json_is_laid_out_around_it(tmp_path: Path) -> None:
    scenario = load_scenario(DEMO)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    record = '{"schedule": ["c2:after_effect"], "seed": 7}\n'
    (run_dir / "run.json").write_text(record)
    incarnations = carry_out_schedule(scenario, (parse_kill_point("c2:after_effect", scenario.plan),), run_dir,
                               SubprocessBackend())
    assert [incarnation.killed_at for incarnation in incarnations] == ["c2:after_effect", None]
    assert (run_dir / "run.json").read_text() == record
    assert len(json.loads((run_dir / "incarnations.json").read_text())) == 2


def test_a_run_directory_used_before_is_refused(tmp_path: Path) -> None:
    scenario = load_scenario(DEMO)
    (tmp_path / "run" / "workload").mkdir(parents=True)
    with pytest.raises(FileExistsError):
        carry_out_schedule(scenario, (), tmp_path / "run", SubprocessBackend(), max_incarnations=1)
