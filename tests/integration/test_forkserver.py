"""The fork-server backend: the same findings as the subprocess backend on every schedule of every
mutant, children that start clean, and a server that survives its own death. The contract every
backend passes (tests/integration/test_docker_backend.py) runs on it too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.helpers import DEMO, MUTANTS, WORKLOADS, mutant_workload, workload_command


def findings_by_schedule(path) -> dict[str, tuple[str, ...]]:
    runs = json.loads(path.read_text())["runs"]
    return {" ".join(run["schedule"]): tuple(f["property"] for f in run["findings"]) for run in runs}


@pytest.mark.parametrize("mutant", MUTANTS)
def test_mutants_get_the_same_findings_on_both_backends(killpoint, tmp_path, mutant):
    reports = {}
    for backend in ("subprocess", "forkserver"):
        reports[backend] = tmp_path / f"{backend}.json"
        result = killpoint("run", DEMO, "--exhaustive", "--backend", backend, "--workload", mutant_workload(mutant),
                           "--json", reports[backend])
        assert result.exit_code == 1
    assert findings_by_schedule(reports["subprocess"]) == findings_by_schedule(reports["forkserver"])


def test_child_starts_with_only_standard_descriptors(killpoint, tmp_path):
    result = killpoint("run", DEMO, "--backend", "forkserver", "--kill-at", "c2:after_started",
                       "--workload", workload_command("lists_fds.py"), "--runs-dir", tmp_path / "runs", "--keep-all")
    assert result.exit_code == 0, result.out + result.err
    for number in (0, 1):
        stdout = (tmp_path / "runs" / "run-00000" / f"incarnation-{number}.stdout").read_text()
        assert stdout == "descriptors: [0, 1, 2]\n"


def test_a_workload_module_that_reads_the_environment_at_import_sees_each_incarnation(killpoint, tmp_path):
    # The fork server imports `-m MODULE` before any incarnation: the workload's own modules it pulled in
    # must be imported again in each child, under that child's environment (installed libraries stay warm).
    result = killpoint("run", DEMO, "--backend", "forkserver", "--kill-at", "c2:after_started",
                       "--workload", f"{sys.executable} -m tests.workloads.env_at_import", "--runs-dir", tmp_path)
    assert result.exit_code == 0, result.out + result.err


# A project of the user's own (below the harness's working directory, so not an installed library): the module it
# runs, a module that declares it may stay warm, one that does not, and a declared one in an undeclared package.
WARM_PROJECT = {
    "__init__.py": "__killpoint_warm__ = True\n",
    "declared.py": "import os\n__killpoint_warm__ = True\nIMPORTED_IN = os.getpid()\n",
    "undeclared.py": "import os\nIMPORTED_IN = os.getpid()\n",
    "cold/__init__.py": "",
    "cold/declared.py": "import os\n__killpoint_warm__ = True\nIMPORTED_IN = os.getpid()\n",
    "main.py": (
        "import json, os, sys\n"
        "from warmproj import declared, undeclared\n"
        "from warmproj.cold import declared as in_cold_package\n"
        "from killpoint.scenarios.reference_runtime import main\n"
        "if __name__ == '__main__':\n"
        "    print(json.dumps({name: module.IMPORTED_IN != os.getpid() for name, module in (\n"
        "        ('declared', declared), ('undeclared', undeclared), ('in_cold_package', in_cold_package))}))\n"
        "    sys.exit(main())\n"),
}


def test_a_workload_module_that_declares_it_may_stay_warm_is_imported_once_in_the_server(killpoint, tmp_path,
                                                                                          monkeypatch):
    for name, text in WARM_PROJECT.items():
        (tmp_path / "warmproj" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "warmproj" / name).write_text(text)
    monkeypatch.chdir(tmp_path)  # the project the harness runs in: its own modules are the workload's
    monkeypatch.syspath_prepend(str(tmp_path))
    result = killpoint("run", DEMO, "--backend", "forkserver", "--kill-at", "c2:after_started", "--keep-all",
                       "--workload", "{python} -m warmproj.main", "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 0, result.out + result.err
    for number in (0, 1):
        stdout = (tmp_path / "runs" / "run-00000" / f"incarnation-{number}.stdout").read_text()
        assert json.loads(stdout) == {"declared": True, "undeclared": False, "in_cold_package": False}


# A script of the user's own: what it imports of installed libraries is imported once, in the server (LangGraph's
# second of imports, in a user's script, was paid by every incarnation); its own module beside it never is there.
SCRIPT_PROJECT = {
    "helper.py": "import os\nIMPORTED_IN = os.getpid()\n"
                 "with open(os.path.join(os.path.dirname(__file__), 'imports.txt'), 'a') as log:\n"
                 "    log.write(f'{IMPORTED_IN}\\n')\n",
    "my_runtime.py": (
        "import json, os, sys\n"
        "WARM_AT_START = {name: name in sys.modules for name in ('email.mime.text', 'helper')}\n"
        "import email.mime.text\n"
        "import helper\n"
        "from killpoint.scenarios.reference_runtime import main\n"
        "if __name__ == '__main__':\n"
        "    print(json.dumps({**WARM_AT_START, 'helper_imported_here': helper.IMPORTED_IN == os.getpid()}))\n"
        "    sys.exit(main())\n"),
}


def test_a_scripts_installed_libraries_are_imported_in_the_server_and_its_own_modules_in_each_child(
        killpoint, tmp_path, monkeypatch):
    for name, text in SCRIPT_PROJECT.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)  # the project the harness runs in: its own modules are the workload's
    monkeypatch.syspath_prepend(str(tmp_path))
    result = killpoint("run", DEMO, "--backend", "forkserver", "--kill-at", "c2:after_started", "--keep-all",
                       "--workload", f"{{python}} {tmp_path / 'my_runtime.py'}", "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 0, result.out + result.err
    children = []
    for number in (0, 1):
        stdout = (tmp_path / "runs" / "run-00000" / f"incarnation-{number}.stdout").read_text()
        assert json.loads(stdout) == {"email.mime.text": True, "helper": False, "helper_imported_here": True}
        children.append(json.loads((tmp_path / "runs" / "run-00000" / "incarnations.json").read_text())[number]["pid"])
    golden = json.loads((tmp_path / "runs" / "golden" / "incarnations.json").read_text())[0]["pid"]
    assert (tmp_path / "imports.txt").read_text().split() == [str(pid) for pid in (golden, *children)]


def test_a_package_runs_its_main_module_on_the_fork_server_as_python_m_would(killpoint, tmp_path):
    # The reference runtime is a package (killpoint/scenarios/reference_runtime/__main__.py).
    result = killpoint("run", DEMO, "--backend", "forkserver", "--kill-at", "c2:after_started",
                       "--workload", "{python} -m killpoint.scenarios.reference_runtime", "--runs-dir", tmp_path / "r")
    assert result.exit_code == 0 and "1 passed" in result.out, result.out + result.err


def test_dead_server_is_restarted_and_said(tmp_path, capsys):
    from killpoint.harness.backends.forkserver import ForkServerBackend
    from killpoint.harness.config.scenario import load_scenario
    from killpoint.harness.execute.runner import carry_out_schedule

    scenario = load_scenario(DEMO)
    backend = ForkServerBackend()
    try:
        carry_out_schedule(scenario, (), tmp_path / "first", backend, max_incarnations=1)
        assert backend.server._server is not None
        os.kill(backend.server._server.process.pid, signal.SIGKILL)
        backend.server._server.process.wait()
        incarnations = carry_out_schedule(scenario, (), tmp_path / "second", backend, max_incarnations=1)
        assert incarnations[0].exit_code == 0
        assert backend.server.restarts and "restarted" in backend.server.restarts[0]
        assert "fork server pid" in capsys.readouterr().err
    finally:
        backend.close()


def test_child_reaped_before_it_is_watched_is_an_exit_not_a_crash(tmp_path):
    """The server reaps its children itself, so a workload that exits at once may be gone
    before the runner opens its pidfd; that is an exit with its code, every time."""
    from killpoint.harness.backends.forkserver import ForkServerBackend
    from killpoint.harness.config.scenario import load_scenario, with_workload
    from killpoint.harness.execute.runner import carry_out_schedule

    scenario = with_workload(load_scenario(DEMO), workload_command("exits_at_once.py"))
    backend = ForkServerBackend()
    try:
        codes = {carry_out_schedule(scenario, (), tmp_path / f"run-{n}", backend, max_incarnations=1)[0].exit_code
                 for n in range(30)}
    finally:
        backend.close()
    assert codes == {3}


def test_missing_module_fails_in_the_child_as_python_would(killpoint, tmp_path):
    result = killpoint("run", DEMO, "--backend", "forkserver", "--workload", "{python} -m no_such_runtime",
                       "--kill-at", "c1:after_effect", "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 2 and "No module named 'no_such_runtime'" in result.err
    assert "Traceback" not in result.err


def test_kill_before_the_child_opened_its_streams_still_leaves_them(tmp_path):
    """A kill at once after the launch (a harness stopped then makes one) can land while the forked child is
    still setting itself up; its stdout and stderr files are evidence all the same. (A timed kill no longer
    lands there: it counts from the incarnation's first sign of work.)"""
    from killpoint import protocol
    from killpoint.harness.backends.forkserver import ForkServerBackend
    from killpoint.harness.config.scenario import load_scenario
    from killpoint.harness.faults.nemesis import kill_confirmed

    scenario = load_scenario(DEMO)
    backend = ForkServerBackend()
    try:
        for n in range(40):
            stdout, stderr = tmp_path / f"incarnation-{n}.stdout", tmp_path / f"incarnation-{n}.stderr"
            kill_confirmed(backend.launch(scenario.workload, cwd=scenario.cwd,
                                          env={protocol.ENV_RUN_DIR: str(tmp_path)}, stdout=stdout, stderr=stderr))
            assert stdout.exists() and stderr.exists()
    finally:
        backend.close()


def test_children_hash_strings_as_every_other_incarnation_does(killpoint, tmp_path):
    """Hash randomisation is fixed when an interpreter starts: the server itself must start with the seed."""
    printed = set()
    for backend in ("forkserver", "forkserver", "subprocess"):  # a new fork server per session
        runs = tmp_path / f"runs-{len(printed)}-{backend}-{len(list(tmp_path.iterdir()))}"
        result = killpoint("run", DEMO, "--backend", backend, "--workload", f"{{python}} {WORKLOADS / 'prints_hash.py'}",
                           "--kill-at", "c1:after_effect", "--runs-dir", runs)
        assert result.exit_code == 0, result.out + result.err
        printed.add((runs / "golden" / "incarnation-0.stdout").read_text())
    assert len(printed) == 1, printed


def test_a_relative_script_is_found_from_the_scenarios_folder_as_python_would(killpoint):
    """The demo's workloads run in scenarios/: ``standalone/runtime.py`` is found there on every backend."""
    for backend in ("forkserver", "subprocess"):
        result = killpoint("run", DEMO, "--backend", backend, "--workload", "{python} standalone/runtime.py",
                           "--kill-at", "c1:after_effect")
        assert result.exit_code == 0, (backend, result.out + result.err)


def test_a_fork_server_that_dies_is_an_infrastructure_failure_not_bad_input(killpoint):
    result = killpoint("run", DEMO, "--backend", "forkserver", "--workload",
                       f"{{python}} {WORKLOADS / 'kills_fork_server.py'}", "--kill-at", "c1:after_effect", "--timeout", "2")
    assert result.exit_code == 4, result.out + result.err
    assert "the harness failed, so there is no verdict" in result.err and "fork server" in result.err
    assert "Traceback" not in result.err


# Scripts whose libraries import more once they are used: DBOS its SQLite system database's module and
# SQLAlchemy's dialect when the workflow launches, Pydantic AI the provider its model string names when the
# Agent is made. The server imports those too, once, so no incarnation pays them; only the provider named.
FIRST_USE_SCRIPTS = {
    "dbos": ("import dbos\n", {"dbos._sys_db_sqlite": True, "sqlalchemy.dialects.sqlite": True}),
    "pydantic_ai": ("import pydantic_ai\ndef model():\n    return 'openai:gpt-4o'\n",
                    {"pydantic_ai.models.openai": True, "pydantic_ai.models.anthropic": False}),
}


@pytest.mark.parametrize("library", FIRST_USE_SCRIPTS)
def test_what_a_warm_library_imports_at_its_first_use_is_imported_in_the_server(killpoint, tmp_path, library):
    pytest.importorskip(library)
    imports, warm = FIRST_USE_SCRIPTS[library]
    (tmp_path / "my_runtime.py").write_text(
        f"import json, sys\nWARM_AT_START = {{name: name in sys.modules for name in {sorted(warm)!r}}}\n{imports}"
        "from killpoint.scenarios.reference_runtime import main\n"
        "if __name__ == '__main__':\n"
        "    print(json.dumps(WARM_AT_START))\n"
        "    sys.exit(main())\n")
    result = killpoint("run", DEMO, "--backend", "forkserver", "--kill-at", "c2:after_started", "--keep-all",
                       "--workload", f"{{python}} {tmp_path / 'my_runtime.py'}", "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 0, result.out + result.err
    for number in (0, 1):
        stdout = (tmp_path / "runs" / "run-00000" / f"incarnation-{number}.stdout").read_text()
        assert json.loads(stdout) == warm


def test_the_server_stays_threadless_with_every_first_use_import_warm():
    """A fork copies only the forking thread: a library that started a thread when imported would leave its
    children a lock held by no one. Every module of the tables, with its library, starts none."""
    pytest.importorskip("pydantic_ai")
    probe = ("import json, os, sys\n"
             "from killpoint.harness.backends import _forkserver_main as server\n"
             "tables = [*server.FIRST_USE_IMPORTS.items(), ('pydantic_ai', sum(server.MODEL_PROVIDERS.values(), ()))]\n"
             "for library, modules in tables:\n"
             "    server._import_all_warm((library, *modules))\n"
             "print(json.dumps({'threads': len(os.listdir('/proc/self/task')),\n"
             "                  'cold': [name for _, modules in tables for name in modules if name not in sys.modules]}))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout.splitlines()[-1]) == {"threads": 1, "cold": []}
