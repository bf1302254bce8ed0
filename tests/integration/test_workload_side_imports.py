"""The workload side loads nothing of the harness.

Every incarnation imports the fake tools (and the reference runtime and its
mutants); a harness module among them would cost each start its import time
and make the two sides of the protocol depend on each other again. Checked in
a fresh interpreter, where nothing a test imported earlier can hide it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT

# What each incarnation may import: the fake tools (their command line too), and the shipped runtimes.
WORKLOAD_SIDE = {
    "fake_tools": "import killpoint.fake_tools",
    "fake_tools_catalogue": "import killpoint.catalogue",
    "fake_tools_command": "import killpoint.fake_tools.__main__",
    "reference_runtime": "import killpoint.scenarios.reference_runtime",
    "every_mutant": "import killpoint.scenarios.mutants as mutants; mutants.zoo()",
    "framework_instrumentation": "import killpoint.frameworks, killpoint.frameworks.langgraph, killpoint.frameworks.dbos",
    "framework_workloads": "import killpoint.scenarios.frameworks.langgraph_graph, killpoint.scenarios.frameworks.dbos_workflow",
}


def harness_modules_loaded_by(code: str) -> list[str]:
    """The killpoint.harness modules a fresh interpreter has loaded once ``code`` has run."""
    probe = (f"{code}; import json, sys; "
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith('killpoint.harness'))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          check=True)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("code", WORKLOAD_SIDE.values(), ids=WORKLOAD_SIDE.keys())
def test_the_workload_side_imports_no_harness_module(code):
    assert harness_modules_loaded_by(code) == []


def test_the_probe_sees_a_harness_import():
    # Without this the test above could pass because the probe never sees anything.
    assert "killpoint.harness.judge.checker" in harness_modules_loaded_by("import killpoint.harness.judge.checker")
