"""What a session prints while it runs and when it ends, in one of three modes.

- ``normal``: a header; each failing run's block as soon as it and every run
  handed out before it are judged (so blocks come in run order, held back at
  most while the runs ahead of it finish); a progress bar (schedules done,
  failing runs so far, rate) on a terminal, else — in a CI log, a pipe — a
  progress line every ``PROGRESS_EVERY_S`` seconds; then coverage, a summary
  table, the summary line.
- ``quiet``: the failing runs' blocks (in run order) and the summary line, for CI logs.
- ``machine``: one JSON object per line: one per finished run, then a summary.

Every mode ends a failing session with the first failure's repro command
(in ``machine`` mode it is the summary's ``reproduce`` field).
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from typing import Any, TextIO

from killpoint.harness.frontends._ci import ci_profile
from killpoint.harness.model import GoldenRun, Job, JobBatches, RunOutcome, Scenario, each_batch
from killpoint.harness.reporting.report import (describe_failure, repro_command, summary_line, summary_rows,
                                                write_coverage)
from killpoint.harness.reporting.summary import Summary

MODES = ("normal", "quiet", "machine")
PROGRESS_EVERY_S = 5.0  # between two progress lines of a session printed with no bar


class ProgressLines:
    """A progress line every ``PROGRESS_EVERY_S`` seconds of a session, counted from the runs as they are judged:
    what a CI log or a pytest terminal shows where no live bar can be drawn."""

    def __init__(self, write: Callable[[str], object], clock: Callable[[], float] = time.monotonic) -> None:
        self._write, self._clock = write, clock
        self.done = self.failing = self.unknown = self.handed_out = 0
        self._started = self._last_line = clock()

    def handed(self, jobs: int) -> None:
        self.handed_out += jobs

    def judged(self, outcome: RunOutcome) -> None:
        self.done += 1
        self.failing += outcome.verdict.valid is False
        self.unknown += outcome.verdict.valid is None
        if self._clock() - self._last_line >= PROGRESS_EVERY_S:
            self._last_line = self._clock()
            elapsed = self._last_line - self._started
            self._write(f"progress: {self.done} of {self.handed_out or '?'} schedules run, {self.failing} failing, "
                        f"{self.unknown} unknown, {self.done / elapsed if elapsed > 0 else 0.0:.1f} schedules/s, "
                        f"{elapsed:.0f}s\n")


def counted(batches: JobBatches, handed: Callable[[int], object]) -> JobBatches:
    """The same batches, telling ``handed`` how many jobs each holds as it is handed out."""

    def told(batch: list[Job]) -> list[Job]:
        handed(len(batch))
        return batch

    return each_batch(batches, told)


class SessionPrinter:
    """Prints one session; use as a context manager around ``run_session`` so the bar is torn down."""

    def __init__(self, out: TextIO, *, mode: str = "normal", progress_bar: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: choose one of {', '.join(MODES)}")
        self.out, self.mode = out, mode
        self.failing = 0  # runs so far that broke a rule
        self.unknown = 0  # runs so far that could not be judged
        self._lines = ProgressLines(self._write, clock) if mode == "normal" else None
        self._order: list[int] = []  # the runs' indices in the order they were handed out
        self._handed_out: set[int] = set()
        self._judged: set[int] = set()
        self._held: dict[int, str] = {}  # failure blocks waiting for the runs ahead of them
        self._printed_up_to = 0  # how many of ``_order`` are judged and printed
        self._progress: Any = None
        self._task: Any = None
        self._wants_bar = progress_bar if progress_bar is not None else (
            mode == "normal" and not ci_profile() and hasattr(out, "isatty") and out.isatty())

    def __repr__(self) -> str:
        return (f"<SessionPrinter {self.mode}, {self.failing} failing and {self.unknown} unknown run(s) so far, "
                f"bar {'on' if self._progress else 'off'}>")

    def __enter__(self) -> SessionPrinter:
        if self._wants_bar:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("[red]{task.fields[failing]} failing"), TextColumn("{task.fields[unknown]} unknown"),
                TextColumn("{task.fields[rate]:.1f} schedules/s"),
                TimeElapsedColumn(), console=Console(file=self.out), transient=True)
            self._progress.start()
            self._task = self._progress.add_task("golden run", total=None, failing=0, unknown=0, rate=0.0)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._flush_held()  # a session stopped early (-x, Ctrl-C) still shows every block it judged
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def header(self, text: str) -> None:
        if self.mode == "normal":
            self._write(text + "\n")

    def track(self, batches: JobBatches) -> JobBatches:
        """The same batches, growing the progress bar's total as each batch is known."""
        return each_batch(batches, self._handed)

    def _handed(self, batch: list[Job]) -> list[Job]:
        self._order += [job.index for job in batch]
        self._handed_out.update(job.index for job in batch)
        if self._lines is not None:
            self._lines.handed(len(batch))
        if self._progress is not None:
            total = self._progress.tasks[0].total or 0
            self._progress.update(self._task, description="schedules", total=total + len(batch))
        return batch

    def on_outcome(self, outcome: RunOutcome) -> None:
        """Called as each run is judged, in the order runs finish."""
        self.failing += outcome.verdict.valid is False
        self.unknown += outcome.verdict.valid is None
        if self.mode == "machine":
            self._write(json.dumps({"kind": "run", **outcome.to_json()}) + "\n")
        elif not outcome.verdict.valid:
            block = io.StringIO()
            describe_failure(outcome, block)
            self._held[outcome.job.index] = block.getvalue()
        self._judged.add(outcome.job.index)
        self._print_in_order(outcome.job.index)
        if self._progress is not None:
            task = self._progress.tasks[0]
            self._progress.update(self._task, advance=1, failing=self.failing, unknown=self.unknown,
                                  rate=(task.completed + 1) / task.elapsed if task.elapsed else 0.0)
        elif self._lines is not None:
            self._lines.judged(outcome)

    def _print_in_order(self, index: int) -> None:
        """Print the held blocks of the judged runs no earlier run is still ahead of (a run the batches never
        handed out, as hunt's, prints at once)."""
        if index not in self._handed_out:
            self._write(self._held.pop(index, ""))
            return
        while self._printed_up_to < len(self._order) and self._order[self._printed_up_to] in self._judged:
            self._write(self._held.pop(self._order[self._printed_up_to], ""))
            self._printed_up_to += 1

    def _flush_held(self) -> None:
        for index in sorted(self._held):
            self._write(self._held.pop(index))

    def finish(self, scenario: Scenario, golden: GoldenRun, outcomes: list[RunOutcome], summary: Summary,
               *, show_coverage: bool = False) -> None:
        """The end of the session: summary (table in normal mode) and the first failure's repro command.

        A failure here is any run that did not pass: one that broke a rule or one that could not be judged.
        """
        self._flush_held()
        failures = [outcome for outcome in outcomes if not outcome.verdict.valid]
        if self.mode == "machine":
            self._write(json.dumps({"kind": "summary", **summary.to_json(),
                                    "reproduce": repro_command(failures[0]) if failures else None}) + "\n")
            return
        if self.mode == "normal":
            if show_coverage:
                write_coverage(scenario, golden, outcomes, self.out)
            write_summary_table(summary, self.out)
        self._write(summary_line(summary) + "\n")
        if failures:
            self._write(f"first failure reproduces with: {repro_command(failures[0])}\n")

    def _write(self, text: str) -> None:
        if not text:
            return
        if self._progress is not None:  # above the live bar, not through it
            self._progress.console.print(text, end="", markup=False, highlight=False, soft_wrap=True)
        else:
            self.out.write(text)


def write_summary_table(summary: Summary, out: TextIO) -> None:
    """The summary as a table (plain text off a terminal)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title="killpoint summary", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for label, text in summary_rows(summary):
        table.add_row(Text(label, style="red" if label.startswith("[") else ""), text)
    Console(file=out, highlight=False, width=max(100, Console(file=out).width)).print(table)
