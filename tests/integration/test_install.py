"""The installed killpoint is one import name: it lives beside a user's own ``harness`` and ``scenarios``.

A wheel is built from this checkout and installed into a fresh venv (its
dependencies from the package index, as a user's ``pip install killpoint``
would). A user project next to it has its own ``harness``, ``scenarios`` and
``fake_tools`` packages; from that project's folder both the user's modules and
killpoint's command and API work, and the venv holds no top-level module of
killpoint's but ``killpoint`` itself.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import ROOT

USER_MODULES = ("harness", "scenarios", "fake_tools")
INSTALL_TIMEOUT_S = 600


def _run(argv: list[str | Path], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(part) for part in argv], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with killpoint installed from a wheel of this checkout; returns its bin folder."""
    where = tmp_path_factory.mktemp("install")
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", where / "wheel", ROOT],
         cwd=where, timeout=INSTALL_TIMEOUT_S)
    wheel = next((where / "wheel").glob("killpoint-*.whl"))
    _run([sys.executable, "-m", "venv", where / "venv"], cwd=where)
    _run([where / "venv" / "bin" / "python", "-m", "pip", "install", "--quiet", wheel], cwd=where,
         timeout=INSTALL_TIMEOUT_S)
    return where / "venv" / "bin"


@pytest.fixture
def user_project(tmp_path: Path) -> Path:
    """A project with packages named like killpoint's folders, each saying whose it is."""
    for name in USER_MODULES:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("OWNER = 'the user'\n")
    return tmp_path


def test_the_install_adds_one_top_level_name(installed: Path) -> None:
    site = Path(_run([installed / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                     cwd=installed).stdout.strip())
    ours = {path.name for path in site.iterdir() if not path.name.startswith(("_", "killpoint-"))
            and path.name in ("killpoint", *USER_MODULES)}
    assert ours == {"killpoint"}


def test_a_user_project_keeps_its_own_harness_and_scenarios_beside_killpoint(installed: Path,
                                                                             user_project: Path) -> None:
    probe = textwrap.dedent("""
        import harness, scenarios, fake_tools
        import killpoint
        from killpoint.harness.config.scenario import load_scenario
        import killpoint.fake_tools, killpoint.scenarios
        print(harness.OWNER, scenarios.OWNER, fake_tools.OWNER)
        print(sorted(killpoint.__all__))
        print(killpoint.load_scenario is load_scenario, killpoint.fake_tools.__name__)
    """)
    lines = _run([installed / "python", "-c", probe], cwd=user_project).stdout.splitlines()
    assert lines[0] == "the user the user the user"
    assert "load_scenario" in lines[1] and lines[2] == "True killpoint.fake_tools"


def test_the_installed_command_runs_the_demo_from_the_user_project(installed: Path, user_project: Path) -> None:
    demo = _run([installed / "python", "-c",
                 "import killpoint.scenarios, pathlib; print(pathlib.Path(killpoint.scenarios.__file__).parent)"],
                cwd=user_project).stdout.strip()
    done = _run([installed / "killpoint", "run", Path(demo) / "demo.toml", "--kill-at", "c2:after_effect",
                 "--runs-dir", user_project / "runs"], cwd=user_project)
    assert "1 passed" in done.stdout, done.stdout
