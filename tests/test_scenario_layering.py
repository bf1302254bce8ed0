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
    loaded = modules_loaded_by("from killpoint.harness.config.scenario import load_scenario\n"
                               f"load_scenario({str(DEMO)!r})")
    machinery = {name for name in loaded if name in ("psutil", "inotify_simple") or name.startswith(
        ("killpoint.harness.backends", "killpoint.harness.execute.runner", "killpoint.harness.faults.nemesis"))}
    assert not machinery, sorted(machinery)


def test_the_catalogue_loads_no_harness():
    loaded = modules_loaded_by("from killpoint.catalogue import REFERENCE_CATALOGUE, load_catalogue\n"
                               "load_catalogue(REFERENCE_CATALOGUE)")
    assert not {name for name in loaded if name.startswith("killpoint.harness")}, sorted(loaded)


def test_no_module_of_the_package_imports_itself_back():
    """Counted from the source, lazy imports too: certify's _child and adapters imported each other (issue 13)."""
    from bench.import_graph import cycles, imports_of, modules_of

    root = DEMO.parent.parent
    known = modules_of(root)
    assert cycles({name: imports_of(name, path, known) for name, path in known.items()}) == []


def test_the_model_imports_only_the_standard_library_the_protocol_names_the_error_root_and_its_codec():
    from bench.import_graph import imports_of, modules_of

    known = modules_of(DEMO.parent.parent)
    model, codec = "killpoint.harness.model", "killpoint.harness.codec"
    # the catalogue only for a type hint (under TYPE_CHECKING), never at run time; the error root (KillSyntaxError);
    # the codec its values' from_json are made of, which imports the error root alone
    assert imports_of(model, known[model], known) <= {"killpoint.protocol", "killpoint.errors", "killpoint.catalogue",
                                                      codec}
    assert imports_of(codec, known[codec], known) <= {"killpoint.errors"}
