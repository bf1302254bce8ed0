"""Output for CI logs: quiet and machine modes, the summary table, the progress bar only on a
terminal, and the CI profile's fixed seed."""

from __future__ import annotations

import io
import json

from harness.progress import SessionPrinter
from tests.helpers import DEMO, mutant_workload

MUTANT_ONCE = ("--workload", mutant_workload("retry_non_idempotent"), "--kill-at", "c4:after_started")


def test_quiet_prints_failures_summary_and_repro_only(killpoint):
    result = killpoint("run", DEMO, *MUTANT_ONCE, "-q")
    assert result.exit_code == 1
    assert result.out.startswith("FAIL run 0: kill at c4:after_started\n")
    assert "killpoint summary" not in result.out and "evidence in" not in result.out
    summary, repro = result.out.strip().splitlines()[-2:]
    assert summary.startswith("1 runs: 0 passed, 1 failed (interrupted-action: 1, verify-before-replay: 1)")
    assert repro.startswith("first failure reproduces with: killpoint repro kp1.")


def test_machine_prints_one_json_line_per_run_then_a_summary(killpoint):
    result = killpoint("run", DEMO, "--random", "3", "--seed", "5", "--machine")
    assert result.exit_code == 0
    lines = [json.loads(line) for line in result.out.splitlines()]
    assert [line["kind"] for line in lines] == ["run", "run", "run", "summary"]
    assert sorted(line["index"] for line in lines[:3]) == [0, 1, 2] and all(line["token"] for line in lines[:3])
    assert lines[-1]["runs"] == 3 and lines[-1]["passed"] == 3 and lines[-1]["reproduce"] is None

    failing = [json.loads(line) for line in killpoint("run", DEMO, *MUTANT_ONCE, "--machine").out.splitlines()]
    assert failing[0]["valid"] is False and failing[-1]["reproduce"] == f"killpoint repro {failing[0]['token']}"


def test_normal_mode_ends_with_a_summary_table(killpoint):
    result = killpoint("run", DEMO, *MUTANT_ONCE)
    table = result.out.split("killpoint summary", 1)[1]
    for row in ("runs", "schedules", "[interrupted-action]", "[verify-before-replay]", "coverage", "time"):
        assert f"│ {row} " in table
    assert "1 of 30 crash points of the crash-free run killed" in table


def test_ci_profile_fixes_the_seed(killpoint, monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert "2 random schedules, seed 0;" in killpoint("run", DEMO, "--random", "2").out


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_shows_on_a_terminal_but_never_in_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with SessionPrinter(Terminal()) as printer:
        assert "bar on" in repr(printer)
    with SessionPrinter(io.StringIO()) as printer:
        assert "bar off" in repr(printer)
    with SessionPrinter(Terminal(), mode="quiet") as printer:
        assert "bar off" in repr(printer)
    monkeypatch.setenv("CI", "true")
    with SessionPrinter(Terminal()) as printer:
        assert "bar off" in repr(printer)
