"""Shared fixtures: run the CLI in-process, prove no workload process outlives a test, and keep the
``integration`` marker true: the tests that start real processes carry it, and no other test starts one."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from killpoint import protocol
from killpoint.harness.backends import Backend, make_backend
from killpoint.harness.frontends import cli
from tests.helpers import CliResult

TESTS = Path(__file__).resolve().parent
# Folders say the policy: every test below these spawns and SIGKILLs real processes (a few config-error
# tests there stop before anything starts; marking the folder keeps the rule one line, not a list).
INTEGRATION_FOLDERS = ("integration", "plugin")
# The certification tests that start a tool (a command, or the certify fork server) and kill it; the rest
# of tests/certify judges literal observations in-process. A new one can carry @pytest.mark.integration itself.
CERTIFY_TESTS_THAT_KILL = frozenset({
    "test_certifying_the_whole_reference_catalogue_confirms_every_class",
    "test_a_torn_write_is_refuted_only_by_the_kill_part_way",
    "test_a_true_idempotent_write_survives_every_kill",
    "test_a_shell_tool_is_certified_with_kills_at_the_points_it_declares",
    "test_a_shell_tool_fed_on_stdin_and_snapshotted_by_a_command_is_refuted",
    "test_a_command_that_declares_no_points_is_killed_after_seeded_delays",
    "test_one_python_function_can_serve_a_whole_catalogue",
    "test_the_same_seed_reproduces_a_certification_exactly",
    "test_a_changed_script_makes_its_certificate_stale",
    "test_a_changed_python_tool_makes_its_certificate_stale",
    "test_a_catalogue_from_mcp_hints_is_certified_and_contradicted_hints_are_named",
    "test_a_kill_at_each_point_of_a_fake_tool_leaves_exactly_the_writes_before_it",
    "test_a_command_is_killed_at_its_declared_point_and_its_helpers_die_with_it",
    "test_a_command_without_points_is_killed_after_a_delay",
    "test_a_command_that_hangs_is_killed_at_the_timeout",
})
# The audit events (PEP 578) of every way this interpreter starts another process.
SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn",
                          "os.system"})


def starts_processes(item: pytest.Item) -> bool:
    """Whether ``item`` is a test that starts real processes, by its folder or, in tests/certify, by name."""
    if not item.path.is_relative_to(TESTS):
        return False
    folder = item.path.relative_to(TESTS).parts[0]
    return folder in INTEGRATION_FOLDERS or (folder == "certify"
                                               and getattr(item, "originalname", item.name) in CERTIFY_TESTS_THAT_KILL)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if starts_processes(item):
            item.add_marker(pytest.mark.integration)


class SpawnRecorder:
    """Records the processes started while ``watching``; an audit hook cannot be removed, so it is installed once."""

    def __init__(self) -> None:
        self.watching = False
        self.started: list[str] = []
        self._lock = threading.Lock()
        sys.addaudithook(self._on_event)

    def _on_event(self, event: str, args: tuple) -> None:
        if self.watching and event in SPAWN_EVENTS:
            with self._lock:
                self.started.append(f"{event} {args[1] if event == 'subprocess.Popen' else args[:1]!r}")

    @contextlib.contextmanager
    def watch(self) -> Iterator[list[str]]:
        """Record what the body starts; the list it yields holds it once the body is done."""
        self.started.clear()
        self.watching = True
        try:
            yield self.started
        finally:
            self.watching = False


SPAWNS = SpawnRecorder()


@pytest.fixture(autouse=True)
def no_process_outside_integration(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test without the ``integration`` marker starts no process, so ``-m "not integration"`` is truly fast
    and safe. It sees what this interpreter starts, not what a fork server started earlier forks for it."""
    if request.node.get_closest_marker("integration") is not None:
        yield
        return
    with SPAWNS.watch() as started:
        yield
    assert started == [], (
        f"{request.node.nodeid} starts processes but has no integration marker: {started[:3]}; "
        f"mark it @pytest.mark.integration (or move it under tests/integration)")


def workload_processes(under: Path) -> list[psutil.Process]:
    """Live processes started by killpoint for a run below ``under`` (found by their protocol env)."""
    found = []
    for process in psutil.process_iter():
        try:
            run_dir = process.environ().get(protocol.ENV_RUN_DIR, "")
            if run_dir.startswith(str(under)) and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT as Python sets it up under a terminal (it raises KeyboardInterrupt) for the test, whatever the runner
    inherited: a CI job started in the background of a script has SIGINT ignored, which the harness leaves so."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture
def killpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[..., CliResult]]:
    """Call ``killpoint ARGS`` in-process with evidence under tmp_path; afterwards assert nothing is left running."""

    def run(*args: str | Path) -> CliResult:
        argv = [str(arg) for arg in args]
        if argv[0] in ("run", "repro") and "--runs-dir" not in argv:
            argv += ["--runs-dir", str(tmp_path / f"runs-{len(list(tmp_path.glob('runs-*')))}")]
        out = io.StringIO()
        try:
            code = cli.main(argv, out=out)
        except SystemExit as exit_:
            code = exit_.code
        captured = capsys.readouterr()
        return CliResult(code, out.getvalue() + captured.out, captured.err)

    yield run
    assert workload_processes(tmp_path) == [], "a workload process outlived the run"


@pytest.fixture
def postgres_installed() -> None:
    """Debian's PostgreSQL is here (a test of the harness's own servers needs it): skipped with the fix locally,
    failed under CI, where .ci/run installs it."""
    from killpoint.errors import ConfigError
    from killpoint.harness.databases import postgres

    try:
        postgres.binaries()
    except ConfigError as missing:
        if os.environ.get("CI"):
            pytest.fail(f"{missing} (.ci/run installs it)")
        pytest.skip(str(missing))


@pytest.fixture(scope="module")
def forkserver() -> Iterator[Backend]:
    """A fork server backend for a module's runs carried out directly (``run_golden``, ``carry_out_schedule``)."""
    backend = make_backend("forkserver")
    yield backend
    backend.close()
