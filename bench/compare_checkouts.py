"""Benchmark: the same killpoint session in two checkouts, interleaved, with a profile of the second.

    python bench/compare_checkouts.py BEFORE_DIR AFTER_DIR [--rounds 5] [-- RUN ARGS...]

Each checkout needs its own venv (``BEFORE_DIR/.venv``, set up as the README
says). Its bytecode caches are removed first, so both start cold the first
time, then the session (default: the demo, exhaustive to depth 2, forkserver,
-j 1) runs ``--rounds`` times in each, alternating, so drift in the machine's
load falls on both alike. Prints each checkout's median and spread of wall
seconds and the ratio after/before, then a cProfile of one more run in AFTER_DIR:
the functions with the most cumulative time, which say where a session's time goes.
"""

from __future__ import annotations

import argparse
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_SESSION = ("run", "scenarios/demo.toml", "--exhaustive", "--depth", "2", "--backend", "forkserver", "-q")


def drop_bytecode(checkout: Path) -> None:
    for cache in checkout.rglob("__pycache__"):
        if ".venv" not in cache.parts:
            shutil.rmtree(cache, ignore_errors=True)


def timed_session(checkout: Path, session: tuple[str, ...]) -> float:
    with tempfile.TemporaryDirectory(prefix="kp-bench-") as runs:
        started = time.perf_counter()
        done = subprocess.run([str(checkout / ".venv" / "bin" / "killpoint"), *session, "--runs-dir", f"{runs}/r"],
                              cwd=checkout, capture_output=True, text=True)
        seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{checkout}: the session exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return seconds


def profile(checkout: Path, session: tuple[str, ...]) -> None:
    """One more run of the session in ``checkout``'s interpreter under cProfile; the top entries by cumulative time."""
    with tempfile.TemporaryDirectory(prefix="kp-profile-") as runs:
        stats_file = Path(runs) / "session.prof"
        subprocess.run([str(checkout / ".venv" / "bin" / "python"), "-m", "cProfile", "-o", str(stats_file),
                        "-m", "killpoint", *session, "--runs-dir", f"{runs}/r"], cwd=checkout, check=True,
                       capture_output=True)
        pstats.Stats(str(stats_file)).sort_stats("cumulative").print_stats(18)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("session", nargs="*", help="killpoint arguments after --")
    args = parser.parse_args()
    session = tuple(args.session) or DEFAULT_SESSION
    for checkout in (args.before, args.after):
        drop_bytecode(checkout)
    times: dict[Path, list[float]] = {args.before: [], args.after: []}
    for _ in range(args.rounds):
        for checkout in (args.before, args.after):
            times[checkout].append(timed_session(checkout, session))
    print(f"session: killpoint {' '.join(session)}; {args.rounds} rounds, interleaved")
    for label, checkout in (("before", args.before), ("after", args.after)):
        seconds = times[checkout]
        print(f"{label:>6}: median {statistics.median(seconds):.2f} s, min {min(seconds):.2f}, "
              f"max {max(seconds):.2f} ({checkout})")
    ratio = statistics.median(times[args.after]) / statistics.median(times[args.before])
    print(f"after / before: {ratio:.3f}")
    profile(args.after, session)


if __name__ == "__main__":
    main()
