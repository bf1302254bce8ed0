"""The reports read values: importing one loads none of what runs a session, so a report, ``show`` or ``merge`` of
runs made elsewhere (a CI artifact, another machine's shard) needs nothing that launches, kills or holds a process.

Each check runs in a fresh interpreter, the only place the modules an import loads can be seen. The model, its
codec and the run layout sit below everything: they load nothing of the harness but each other.
"""

from __future__ import annotations

import pytest

from tests.test_scenario_layering import modules_loaded_by

pytestmark = pytest.mark.integration  # a fresh interpreter per check

REPORTS = ("summary", "coverage", "report", "html_report", "progress", "show", "merge")
# What runs a session: the loop, the runner and its rendezvous, the kills, the backends, the lazy file system's mount.
RUNNING = ("killpoint.harness.execute.session", "killpoint.harness.execute.runner",
           "killpoint.harness.execute.rendezvous", "killpoint.harness.execute.watch", "killpoint.harness.execute.scratch",
           "killpoint.harness.execute.prefixes", "killpoint.harness.execute.point_snapshots",
           "killpoint.harness.faults.nemesis", "killpoint.harness.faults.power_loss",
           "killpoint.harness.faults.lazyfs.mount", "killpoint.harness.backends", "killpoint.harness.schedules.hunt",
           "docker", "hypothesis", "inotify_simple")


@pytest.mark.parametrize("report", REPORTS)
def test_a_report_loads_nothing_that_runs_a_session(report):
    loaded = modules_loaded_by(f"import killpoint.harness.reporting.{report}")
    assert f"killpoint.harness.reporting.{report}" in loaded
    assert not {name for name in loaded if name.startswith(RUNNING)}, sorted(
        name for name in loaded if name.startswith(RUNNING))


@pytest.mark.parametrize("module", ["killpoint.harness.model", "killpoint.harness.layout", "killpoint.harness.codec"])
def test_the_model_the_codec_and_the_run_layout_load_nothing_of_the_harness_but_each_other(module):
    loaded = modules_loaded_by(f"import {module}")
    assert {name for name in loaded if name.startswith("killpoint.harness.")} <= {
        "killpoint.harness.model", "killpoint.harness.codec", "killpoint.harness.layout"}, sorted(loaded)
