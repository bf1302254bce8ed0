"""Output for CI logs: quiet and machine modes, the summary table, the progress bar only on a
terminal, and the CI profile's fixed seed."""

from __future__ import annotations

import io
import json
import os
import pty
import threading
import tty
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

import pytest

from killpoint.harness.reporting.progress import SessionPrinter
from killpoint.harness.reporting.report import killpoint_command
from tests.helpers import DEMO, mutant_workload

HIDE_CURSOR, SHOW_CURSOR, ERASE_LINE = b"\x1b[?25l", b"\x1b[?25h", b"\x1b[2K"
MUTANT_ONCE = ("--workload", mutant_workload("retry_non_idempotent"), "--kill-at", "c4:after_started")


def test_quiet_prints_failures_summary_and_repro_only(killpoint):
    result = killpoint("run", DEMO, *MUTANT_ONCE, "-q")
    assert result.exit_code == 1
    assert result.out.startswith("FAIL run 0: kill at c4:after_started\n")
    assert "killpoint summary" not in result.out and "evidence in" not in result.out
    summary, repro = result.out.strip().splitlines()[-2:]
    assert summary.startswith("1 runs: 0 passed, 1 failed (interrupted-action: 1, verify-before-replay: 1)")
    assert repro.startswith(f"first failure reproduces with: {killpoint_command()} repro kp1.")


def test_machine_prints_one_json_line_per_run_then_a_summary(killpoint):
    result = killpoint("run", DEMO, "--random", "3", "--seed", "5", "--machine")
    assert result.exit_code == 0
    lines = [json.loads(line) for line in result.out.splitlines()]
    assert [line["kind"] for line in lines] == ["run", "run", "run", "summary"]
    assert sorted(line["index"] for line in lines[:3]) == [0, 1, 2] and all(line["token"] for line in lines[:3])
    assert lines[-1]["runs"] == 3 and lines[-1]["passed"] == 3 and lines[-1]["reproduce"] is None

    failing = [json.loads(line) for line in killpoint("run", DEMO, *MUTANT_ONCE, "--machine").out.splitlines()]
    assert failing[0]["valid"] is False and failing[-1]["reproduce"] == f"{killpoint_command()} repro {failing[0]['token']}"


def test_normal_mode_ends_with_a_summary_table(killpoint):
    result = killpoint("run", DEMO, *MUTANT_ONCE)
    table = result.out.split("killpoint summary", 1)[1]
    for row in ("runs", "schedules", "[interrupted-action]", "[verify-before-replay]", "coverage", "time"):
        assert f"│ {row} " in table
    assert "1 of 30 crash points of the crash-free run killed" in table


def test_ci_profile_fixes_the_seed(killpoint, monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert "2 random schedules, seed 0;" in killpoint("run", DEMO, "--random", "2").out


@contextmanager
def pseudo_terminal() -> Iterator[tuple[TextIO, bytearray]]:
    """A real terminal (a pty): yields its writable end and the bytes drawn on it, complete once the block ends."""
    master, slave = pty.openpty()
    tty.setraw(slave)  # no newline translation: the bytes read are the bytes written
    drawn = bytearray()

    def read_until_closed() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every writer of the terminal has closed it
                return
            if not chunk:
                return
            drawn.extend(chunk)

    reader = threading.Thread(target=read_until_closed)
    reader.start()
    try:
        with open(slave, "w", encoding="utf-8") as terminal:
            yield terminal, drawn
    finally:
        reader.join(10)
        os.close(master)


def print_a_header(out: TextIO, **options: str) -> None:
    with SessionPrinter(out, **options) as printer:
        printer.header("killpoint: demo")


@pytest.fixture
def rich_sees_a_terminal(monkeypatch):
    """The environment a terminal session has, whatever this one's: the bar's decision is the harness's."""
    monkeypatch.setenv("TERM", "xterm-256color")
    for name in ("CI", "TTY_COMPATIBLE", "FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)


def test_the_progress_bar_is_drawn_on_a_terminal(rich_sees_a_terminal):
    with pseudo_terminal() as (terminal, drawn):
        print_a_header(terminal)
    assert HIDE_CURSOR in drawn and SHOW_CURSOR in drawn, bytes(drawn)
    assert b"golden run" in drawn and b"0 failing" in drawn and b"schedules/s" in drawn, bytes(drawn)
    assert b"killpoint: demo\n" in drawn  # printed above the live bar, not lost
    assert drawn.endswith(ERASE_LINE)  # the bar is gone when the session ends: the summary follows on a clean line


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_the_progress_bar_is_never_drawn_in_ci(rich_sees_a_terminal, monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    with pseudo_terminal() as (terminal, drawn):
        print_a_header(terminal)
    assert bytes(drawn) == b"killpoint: demo\n"


def test_the_progress_bar_is_never_drawn_off_a_terminal_or_in_quiet_mode(rich_sees_a_terminal):
    log = io.StringIO()
    print_a_header(log)
    assert log.getvalue() == "killpoint: demo\n"
    with pseudo_terminal() as (terminal, drawn):
        print_a_header(terminal, mode="quiet")
    assert bytes(drawn) == b""  # quiet prints no header, and no bar
