"""Shared fixtures: run the CLI in-process, and prove no workload process outlives a test."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from harness import cli, protocol
from tests.helpers import CliResult

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
