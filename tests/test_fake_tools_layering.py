"""The fake tools depend on the protocol's workload side, never on the harness.

Read from the source, so an import inside a function (which the fresh-interpreter
check in tests/integration/test_workload_side_imports.py would not see until the
function runs) is caught too.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import ROOT

FAKE_TOOLS = ROOT / "fake_tools"
# What a fake tool may import of killpoint: the protocol's names, its client, the error root, strict JSON.
ALLOWED = ("killpoint.protocol", "killpoint.client", "killpoint.errors", "killpoint._json", "killpoint.fake_tools")


def killpoint_imports(path: Path) -> list[str]:
    """Every killpoint module ``path`` imports, anywhere in it (``from killpoint import x`` counts as killpoint.x)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == "killpoint":
            found += [f"killpoint.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
    return [name for name in found if name == "killpoint" or name.startswith("killpoint.")]


def is_allowed(module: str) -> bool:
    return any(module == allowed or module.startswith(allowed + ".") for allowed in ALLOWED)


def test_the_fake_tools_import_nothing_of_killpoint_but_the_workload_side():
    wrong = {f"{path.relative_to(ROOT)}: {module}" for path in sorted(FAKE_TOOLS.rglob("*.py"))
             for module in killpoint_imports(path) if not is_allowed(module)}
    assert not wrong, sorted(wrong)


def test_the_check_reads_lazy_and_from_imports(tmp_path):
    source = tmp_path / "tool.py"
    source.write_text("from killpoint import protocol, harness\n"
                      "def f():\n    from killpoint.harness.config.scenario import strict_json\n")
    assert [module for module in killpoint_imports(source) if not is_allowed(module)] == [
        "killpoint.harness", "killpoint.harness.config.scenario"]
