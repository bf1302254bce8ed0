"""Reading a scenario loads no process machinery, and the fake tools' catalogue loads no harness.

A scenario is checked before anything runs, so its reader sits below the
backends, the runner and the nemesis: importing it must not pull in psutil or a
backend (it once imported ``harness.backends`` to check a backend's name). The
catalogue is read inside every workload incarnation, which must not load the
harness at all. Each check runs in a fresh interpreter, the only place the
modules an import loads can be seen.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import DEMO

pytestmark = pytest.mark.integration  # a fresh interpreter per check


def modules_loaded_by(statement: str) -> set[str]:
    shown = subprocess.run([sys.executable, "-c", f"{statement}\nimport sys\nprint('\\n'.join(sys.modules))"],
                           capture_output=True, text=True, check=True, timeout=60)
    return set(shown.stdout.split())


def test_reading_a_scenario_loads_no_backend_runner_nemesis_or_psutil():
    loaded = modules_loaded_by("from killpoint.harness.scenario import load_scenario\n"
                               f"load_scenario({str(DEMO)!r})")
    machinery = {name for name in loaded if name in ("psutil", "inotify_simple") or name.startswith(
        ("killpoint.harness.backends", "killpoint.harness.runner", "killpoint.harness.nemesis"))}
    assert not machinery, sorted(machinery)


def test_the_catalogue_loads_no_harness():
    loaded = modules_loaded_by("from killpoint.catalogue import REFERENCE_CATALOGUE, load_catalogue\n"
                               "load_catalogue(REFERENCE_CATALOGUE)")
    assert not {name for name in loaded if name.startswith("killpoint.harness")}, sorted(loaded)
