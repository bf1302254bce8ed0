"""Benchmark of issue 18: the depth-2 sweeps against today's code path and the physical floor, in one run.

    .venv/bin/python bench/bench_speed.py [--rounds 2] [--after DIR] [--baseline COMMIT] [--flat] [--write-doc]

- The baseline is a ``git worktree`` of ``--baseline`` (default c90d7ca, the code path before issue 18) in a
  temporary folder; the current code is ``--after`` (default this checkout). Both run as
  ``python -m killpoint.harness.frontends.cli`` with this venv's interpreter, ``PYTHONPATH`` and ``cwd`` set to the
  checkout (its ``killpoint/`` links to its own ``harness/``), after their bytecode caches are dropped.
  Rounds alternate baseline and current, so drift in the machine's load falls on both; medians are printed.
- The sweeps run with default settings otherwise, their runs directories on this checkout's disk.
- The floor of a sweep: the incarnations it started × a fork()+wait of a warm interpreter, plus the journal
  records its runtime writes (counted in one ``--keep-all`` run of the current code) × an fsync where the runs
  are carried out (the scratch tmpfs), plus the kills it struck × a SIGKILL and reap of a sleeping child, all
  divided by the jobs. An incarnation shared between runs (harness/execute/prefixes.py) was started and killed once.
- A cProfile of the harness process of one current-code session (-j 1, one shard) says where the time goes.
- ``--flat``: one 30,000-schedule session of the current code; ms per schedule over its first and last
  1,000 schedules, the harness's peak memory at 1k, 10k and 30k schedules, and its reports' sizes.
``--write-doc`` replaces only this script's sections of docs/performance.md (between its markers).
"""

from __future__ import annotations

import argparse
import json
import marshal
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: the bench package beside it

from bench.bench_backends import fork_floor, fsync_floor
from bench.compare_checkouts import drop_bytecode

DOC = ROOT / "docs" / "performance.md"
PYTHON = ROOT / ".venv" / "bin" / "python"
BASELINE = "c90d7ca"
RUNS_PARENT = ROOT / "killpoint-runs"  # the default runs directory's parent: this checkout's disk, ignored by git
JOBS = 2
SWEEP_TIMEOUT = 900.0  # seconds; a hung session is reported, not waited for
FLAT_SCHEDULES = 30_000
FLAT_WINDOW = 1_000
FLAT_MARKS = (1_000, 10_000, 30_000)
PROFILE_SHARD = "1/4"
PROFILE_TOP = 25


@dataclass(frozen=True)
class Sweep:
    """One target: a scenario swept exhaustively to depth 2 on the fork server at -j 2."""

    name: str
    scenario: str  # relative to the current checkout; both checkouts run this same file
    target_seconds: float

    def arguments(self, checkout: Path, *extra: str) -> list[str]:
        return ["run", str(checkout / self.scenario), "--exhaustive", "--depth", "2", "--backend", "forkserver",
                "-j", str(JOBS), *extra]


SWEEPS = (Sweep("restock", "scenarios/restock.toml", 8.0), Sweep("demo", "scenarios/demo.toml", 4.0))


@dataclass(frozen=True)
class Counts:
    """What a session did, from its JSON report."""

    schedules: int
    incarnations: int  # started, the golden run's included
    kills: int  # struck
    shared: int  # incarnations a run took from the state another run's kills left, never started again


def counts_of(report: dict) -> Counts:
    """Only the work done: a shared incarnation (a report before sharing has none) was started, and killed, once."""
    runs = report["runs"]
    shared = sum(run.get("shared_incarnations", 0) for run in runs)
    return Counts(schedules=report["summary"]["schedules"],
                  incarnations=1 + sum(len(run["incarnations"]) for run in runs) - shared,
                  kills=report["summary"]["kills"] - shared, shared=shared)


@dataclass(frozen=True)
class Floors:
    """The least each part of an incarnation's work costs on this machine, in seconds."""

    fork: float  # fork()+wait of a warm interpreter
    fsync: float  # write + fsync of one journal record, in the runs directory's file system
    kill: float  # SIGKILL of a sleeping child and its reap


def floor_seconds(counts: Counts, journal_records: int, floors: Floors, jobs: int) -> float:
    return (counts.incarnations * floors.fork + journal_records * floors.fsync + counts.kills * floors.kill) / jobs


def kill_floor(samples: int = 200) -> float:
    """Median of SIGKILL + waitpid of a child that is asleep (it says so through a pipe before it sleeps)."""
    timings = []
    for _ in range(samples):
        ready, told = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(told, b"x")
            signal.pause()
            os._exit(0)
        os.read(ready, 1)
        os.close(ready)
        os.close(told)
        time.sleep(0.001)  # from "about to sleep" to asleep
        started = time.perf_counter()
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def checkout_environment(checkout: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(checkout)}


def cli(arguments: Sequence[str]) -> list[str]:
    return [str(PYTHON), "-m", "killpoint", *arguments]  # the command's module in every layout a baseline has


def run_session(checkout: Path, arguments: Sequence[str], timeout: float = SWEEP_TIMEOUT) -> None:
    try:
        done = subprocess.run(cli(arguments), cwd=checkout, env=checkout_environment(checkout),
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        sys.exit(f"{checkout}: `{shlex.join(arguments)}` took more than {timeout:.0f} s; stopped")
    if done.returncode != 0:
        sys.exit(f"{checkout}: `{shlex.join(arguments)}` exited {done.returncode}:\n"
                 f"{done.stdout[-2000:]}{done.stderr[-2000:]}")


def timed_sweep(checkout: Path, sweep: Sweep, scenario_root: Path) -> tuple[float, Counts]:
    """Wall seconds and counts of one run of ``sweep`` in ``checkout``, its runs directory on RUNS_PARENT's disk."""
    with tempfile.TemporaryDirectory(prefix="bench-speed-", dir=RUNS_PARENT) as scratch:
        report = Path(scratch) / "report.json"
        arguments = sweep.arguments(scenario_root, "-q", "--json", str(report), "--runs-dir", f"{scratch}/runs")
        started = time.perf_counter()
        run_session(checkout, arguments)
        seconds = time.perf_counter() - started
        return seconds, counts_of(json.loads(report.read_text()))


def journal_records(checkout: Path, sweep: Sweep) -> int:
    """The journal records the runtime writes in the whole sweep: one --keep-all run (on tmpfs: only counted)."""
    with tempfile.TemporaryDirectory(prefix="bench-speed-records-", dir=tmpfs_or_disk()) as scratch:
        run_session(checkout, sweep.arguments(checkout, "-q", "--keep-all", "--runs-dir", f"{scratch}/runs"))
        return sum(len(journal.read_bytes().splitlines())
                   for journal in Path(scratch).glob("runs/*/workload/journal.jsonl"))


def tmpfs_or_disk() -> Path:
    shm = Path("/dev/shm")
    return shm if shm.is_dir() else RUNS_PARENT


@contextmanager
def worktree(commit: str) -> Iterator[Path]:
    """A detached git worktree of ``commit`` in a temporary folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="bench-speed-baseline-") as parent:
        path = Path(parent) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(path), commit], check=True)
        try:
            yield path
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False)


def imported_from(checkout: Path) -> str:
    """Where the checkout's interpreter imports the harness from: it must be the checkout itself."""
    probe = "import killpoint.harness as h; print(h.__file__)"
    done = subprocess.run([str(PYTHON), "-c", probe], cwd=checkout, env=checkout_environment(checkout),
                          capture_output=True, text=True, check=True)
    where = done.stdout.strip()
    if not where.startswith(str(checkout)):
        sys.exit(f"{checkout} imports killpoint.harness from {where}, not from itself")
    return where


def describe_checkout(checkout: Path) -> str:
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    edited = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True, check=True).stdout.strip()
    return f"{head} + uncommitted edits" if edited else head


def load_average() -> str:
    return " / ".join(f"{load:.1f}" for load in os.getloadavg()) + " (1 / 5 / 15 min)"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows)]


def replace_section(text: str, name: str, body: Sequence[str]) -> str:
    """``text`` with this script's section ``name`` (between its markers) replaced by ``body``, or appended."""
    begin, end = f"<!-- bench_speed:{name} begin -->", f"<!-- bench_speed:{name} end -->"
    section = "\n".join([begin, *body, end])
    if begin in text and end in text:
        before, rest = text.split(begin, 1)
        return before + section + rest.split(end, 1)[1]
    return text.rstrip("\n") + "\n\n" + section + "\n"


# --- the targets -----------------------------------------------------------------------------------------

def targets(baseline: Path, current: Path, rounds: int, labels: dict[Path, str]) -> list[str]:
    seconds: dict[tuple[Path, str], list[float]] = {}
    counts: dict[str, Counts] = {}
    for round_number in range(rounds):
        for checkout in (baseline, current):
            for sweep in SWEEPS:
                took, counts[sweep.name] = timed_sweep(checkout, sweep, current)
                seconds.setdefault((checkout, sweep.name), []).append(took)
                print(f"round {round_number + 1}: {labels[checkout]} {sweep.name}: {took:.1f} s", flush=True)
    # The runs are carried out in the session's scratch folder on tmpfs (harness/execute/scratch.py), so their journals'
    # fsyncs are paid there.
    with tempfile.TemporaryDirectory(prefix="bench-speed-floors-", dir=tmpfs_or_disk()) as scratch:
        floors = Floors(fork=fork_floor(), fsync=fsync_floor(Path(scratch)), kill=kill_floor())
    rows = []
    for sweep in SWEEPS:
        records = journal_records(current, sweep)
        before = statistics.median(seconds[(baseline, sweep.name)])
        after = statistics.median(seconds[(current, sweep.name)])
        floor = floor_seconds(counts[sweep.name], records, floors, JOBS)
        done = counts[sweep.name]
        rows.append([sweep.name, done.schedules, done.incarnations, done.shared, done.kills, records,
                     f"≤ {sweep.target_seconds:g}",
                     f"{before:.1f}", f"{after:.1f}", f"{before / after:.1f}×", f"{floor:.1f}", f"{after / floor:.1f}",
                     f"{done.schedules / after:.0f}", f"{after * JOBS / done.incarnations * 1000:.1f}"])
    header = ["sweep", "schedules", "incarnations", "shared", "kills", "journal records", "target s", "baseline s",
              "current s", "baseline / current", "floor s", "× floor", "schedules/s", "ms per incarnation"]
    return [*markdown_table(header, rows), "",
            (f"Medians of {rounds} alternating rounds; each sweep `--exhaustive --depth 2 --backend forkserver "
             f"-j {JOBS} -q`, default settings otherwise, runs directory on this checkout's disk. Incarnations "
             "and kills are the current code's, started and struck: a shared incarnation (one a run took from the "
             "state its shorter schedule's kills left, harness/execute/prefixes.py) is counted once, in the run that "
             "started it. ms per incarnation is wall time × jobs / incarnations."), "",
            ("The floor is (incarnations × fork + journal records × fsync + kills × kill) / jobs, measured in the "
             "same run:"),
            f"- fork: fork()+wait of this warm interpreter, median of 200: {floors.fork * 1000:.2f} ms",
            (f"- fsync: a 100-byte append + fsync in the file system the runs are carried out on (the scratch "
             f"folder's, {tmpfs_or_disk()}), median of 200: "
             f"{floors.fsync * 1000:.3f} ms; the records are counted in the journals of one `--keep-all` run "
             "of the current code (the golden run's included)"),
            f"- kill: SIGKILL + waitpid of a sleeping child, median of 200: {floors.kill * 1000:.3f} ms"]


# --- the profile -----------------------------------------------------------------------------------------

# A cProfile dump: (file, line, function) -> (primitive calls, calls, own seconds, cumulative seconds, callers).
ProfileTable = dict[tuple[str, int, str], tuple[int, int, float, float, dict]]


def top_cumulative(stats: ProfileTable, count: int) -> list[list[str]]:
    """The ``count`` functions with the most cumulative time in a cProfile dump, leaving out
    the interpreter's start-up frames (``exec``, runpy's, ``<string>``) that only wrap the whole session."""
    ranked = sorted(((key, value) for key, value in stats.items() if not wraps_the_session(*key)),
                    key=lambda item: item[1][3], reverse=True)[:count]
    rows = []
    for (filename, line, function), (_, calls, own, cumulative, _) in ranked:
        where = f"{short_path(filename)}:{line}" if line else filename
        rows.append([f"`{function}` ({where})", str(calls), f"{own:.2f}", f"{cumulative:.2f}"])
    return rows


def wraps_the_session(filename: str, line: int, function: str) -> bool:
    return filename.startswith("<") or function == "<built-in method builtins.exec>"


def short_path(filename: str) -> str:
    """A profiled file's name from its package on, so the table reads the same on any machine."""
    parts = Path(filename).parts
    for anchor in ("killpoint", "harness", "site-packages", "python3.11"):
        if anchor in parts:
            return "/".join(parts[parts.index(anchor):])
    return filename


def profile(current: Path) -> list[str]:
    sweep = SWEEPS[0]
    with tempfile.TemporaryDirectory(prefix="bench-speed-profile-", dir=RUNS_PARENT) as scratch:
        stats_file = Path(scratch) / "session.prof"
        arguments = ["-m", "cProfile", "-o", str(stats_file), "-m", "killpoint.harness.frontends.cli",
                     *sweep.arguments(current, "-q", "--shard", PROFILE_SHARD, "--runs-dir", f"{scratch}/runs")]
        arguments[arguments.index("-j") + 1] = "1"
        subprocess.run([str(PYTHON), *arguments], cwd=current, env=checkout_environment(current), check=True,
                       capture_output=True, timeout=SWEEP_TIMEOUT)
        table: ProfileTable = marshal.loads(stats_file.read_bytes())  # what cProfile's -o writes
    shown = sweep.arguments(Path("."), "-q", "--shard", PROFILE_SHARD)
    shown[shown.index("-j") + 1] = "1"
    return [(f"cProfile of the harness process (its children are not in it) of `killpoint {shlex.join(shown)}`, "
             f"current code; {sum(entry[2] for entry in table.values()):.1f} s in all, the top {PROFILE_TOP} "
             "functions by cumulative seconds:"), "",
            *markdown_table(["function", "calls", "own s", "cumulative s"], top_cumulative(table, PROFILE_TOP))]


# --- flatness --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MemorySample:
    at: float  # perf_counter seconds
    harness: int  # RSS bytes of the harness process
    tree: int  # RSS bytes of the harness and every process under it


def window_ms(arrivals: Sequence[float], start: int, size: int) -> float:
    """Wall ms per schedule over the ``size`` runs that finished from the ``start``-th on."""
    return (arrivals[start + size - 1] - arrivals[start]) / (size - 1) * 1000


def peak_until(samples: Sequence[MemorySample], arrivals: Sequence[float], done: int) -> MemorySample:
    """The largest harness and tree RSS sampled until the ``done``-th run finished."""
    until = arrivals[min(done, len(arrivals)) - 1]
    seen = [sample for sample in samples if sample.at <= until] or list(samples[:1])
    return MemorySample(until, max(sample.harness for sample in seen), max(sample.tree for sample in seen))


def poll_memory(pid: int, samples: list[MemorySample], stop: threading.Event) -> None:
    try:
        harness = psutil.Process(pid)
        while not stop.wait(1.0):
            own = harness.memory_info().rss
            tree = own
            for child in harness.children(recursive=True):
                try:
                    tree += child.memory_info().rss
                except psutil.Error:
                    pass  # it ended between the listing and the reading
            samples.append(MemorySample(time.perf_counter(), own, tree))
    except psutil.Error:
        pass  # the harness ended


def flat_session(scenario_root: Path) -> list[str]:
    return ["run", str(scenario_root / "scenarios/demo.toml"), "--random", str(FLAT_SCHEDULES), "--seed", "1",
            "--backend", "forkserver", "-j", str(JOBS), "--machine"]


def flat(current: Path) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="bench-speed-flat-", dir=RUNS_PARENT) as scratch:
        report, html = Path(scratch) / "report.json", Path(scratch) / "report.html"
        arguments = [*flat_session(current), "--json", str(report), "--html", str(html),
                     "--runs-dir", f"{scratch}/runs"]
        started = time.perf_counter()
        process = subprocess.Popen(cli(arguments), cwd=current, env=checkout_environment(current),
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        samples: list[MemorySample] = []
        stop = threading.Event()
        poller = threading.Thread(target=poll_memory, args=(process.pid, samples, stop), daemon=True)
        poller.start()
        arrivals = []
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith('{"kind": "run"'):
                arrivals.append(time.perf_counter())
                if len(arrivals) % 5000 == 0:
                    print(f"flat: {len(arrivals)} runs, {arrivals[-1] - started:.0f} s", flush=True)
        code = process.wait()
        seconds = time.perf_counter() - started
        stop.set()
        poller.join()
        if code not in (0, 1) or len(arrivals) < 2 * FLAT_WINDOW:
            sys.exit(f"the flat session exited {code} after {len(arrivals)} runs")
        runs = json.loads(report.read_text())["runs"]
        report_bytes, html_bytes = report.stat().st_size, html.stat().st_size
    run_seconds = [run["seconds"] for run in sorted(runs, key=lambda run: run["index"])]
    first_ms = window_ms(arrivals, 0, FLAT_WINDOW)
    last_ms = window_ms(arrivals, len(arrivals) - FLAT_WINDOW, FLAT_WINDOW)
    first_run, last_run = (statistics.mean(run_seconds[:FLAT_WINDOW]) * 1000,
                           statistics.mean(run_seconds[-FLAT_WINDOW:]) * 1000)
    marks = [mark for mark in FLAT_MARKS if mark <= len(arrivals)]
    peaks = [peak_until(samples, arrivals, mark) for mark in marks]
    memory_rows = [[f"{mark:,}", f"{peak.harness / 2**20:.0f}", f"{peak.tree / 2**20:.0f}"]
                   for mark, peak in zip(marks, peaks)]
    memory_rows.append(["the end (reports written)", f"{max(sample.harness for sample in samples) / 2**20:.0f}",
                        f"{max(sample.tree for sample in samples) / 2**20:.0f}"])
    growth = (peaks[-1].harness - peaks[0].harness) / max(marks[-1] - marks[0], 1) / 2**10
    return [(f"`killpoint {shlex.join(flat_session(Path('.')))}` (current code, runs directory on this checkout's "
             f"disk): {len(arrivals):,} runs in {seconds:.0f} s, exit {code}; load average at the end "
             f"{load_average()}."), "",
            *markdown_table(["schedules", "wall ms per schedule", "mean run seconds (report) ms"],
                            [[f"first {FLAT_WINDOW:,}", f"{first_ms:.1f}", f"{first_run:.1f}"],
                             [f"last {FLAT_WINDOW:,}", f"{last_ms:.1f}", f"{last_run:.1f}"],
                             ["last / first", f"{last_ms / first_ms:.2f}", f"{last_run / first_run:.2f}"]]), "",
            ("Wall ms per schedule: the time between the machine-mode lines of the window's first and last run, "
             "per run; a run's seconds are its own, from the JSON report."), "",
            *markdown_table(["schedules done", "harness peak RSS MiB", "harness + workers peak RSS MiB"],
                            memory_rows), "",
            (f"The harness's peak RSS grows {growth:.1f} KiB per schedule from {marks[0]:,} to {marks[-1]:,} "
             "schedules. RSS is polled once a second (psutil, the harness and every process under it). At the end "
             f"the JSON report is {report_bytes / 2**10:,.0f} KiB and the HTML report {html_bytes / 2**10:,.0f} KiB.")]


# --- the run ---------------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="alternating baseline/current rounds (default 2)")
    parser.add_argument("--after", type=Path, default=ROOT, help="the current code's checkout (default: this one)")
    parser.add_argument("--baseline", default=BASELINE, help=f"the baseline's commit (default {BASELINE})")
    parser.add_argument("--flat", action="store_true", help=f"also one {FLAT_SCHEDULES:,}-schedule session")
    parser.add_argument("--only-flat", action="store_true", help="the flatness session alone")
    parser.add_argument("--write-doc", action="store_true", help="replace this script's sections of the doc")
    args = parser.parse_args()
    current = args.after.resolve()
    RUNS_PARENT.mkdir(exist_ok=True)
    sections: dict[str, list[str]] = {}
    command = "python bench/bench_speed.py" + "".join(
        f" {flag}" for flag, given in (("--flat", args.flat), ("--only-flat", args.only_flat)) if given)
    drop_bytecode(current)
    print(f"current code: {current} ({describe_checkout(current)}), imports {imported_from(current)}", flush=True)
    if not args.only_flat:
        with worktree(args.baseline) as baseline:
            drop_bytecode(baseline)
            print(f"baseline: {args.baseline} in {baseline}, imports {imported_from(baseline)}", flush=True)
            labels = {baseline: "baseline", current: "current"}
            table = targets(baseline, current, args.rounds, labels)
        sections["targets"] = ["## Issue 18's targets: depth-2 sweeps against the baseline and the floor", "",
                               (f"`{command}` on this 2-core machine; baseline {args.baseline}, current "
                                f"{describe_checkout(current)}; load average at the end {load_average()} "
                                "(other jobs share the machine)."), "", *table]
        print("\n".join(sections["targets"]), flush=True)
        sections["profile"] = ["## Where a sweep's time goes", "", *profile(current)]
        print("\n".join(sections["profile"]), flush=True)
    if args.flat or args.only_flat:
        sections["flat"] = ["## Cost per schedule from 1,000 to 30,000 schedules", "", *flat(current)]
        print("\n".join(sections["flat"]), flush=True)
    if args.write_doc:
        text = DOC.read_text()
        for name, body in sections.items():
            text = replace_section(text, name, body)
        DOC.write_text(text)
        print(f"wrote {', '.join(sections)} in {DOC}")


if __name__ == "__main__":
    main()
