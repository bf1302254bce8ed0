"""Benchmark: where `killpoint certify --mcp 'npx -y PACKAGE {world}'` spends its time, and npx resolved once.

Two parts, in one run, on the npm filesystem server (``PACKAGE``, pinned):

1. One trial's pieces, each timed ``--starts`` times as certify does them: a
   server start to the end of ``initialize`` (the server's ``HOME`` a fresh
   scratch folder, as in certify), through npx as written
   (``KILLPOINT_NPX_RESOLVE=0``), npx resolved once, and the installed
   ``node .../dist/index.js`` for reference; one ``tools/call`` of
   ``read_text_file``; one snapshot of the world; making the world.
2. ``killpoint certify --mcp 'npx -y PACKAGE {world}' --tool TOOL --seed 0
   --trials N`` for a read-only tool and a write tool, as written against
   resolved, each in its own out folder: wall time, the verdicts (which must
   agree), and the ratio.

    .venv/bin/python bench/bench_certify.py [--starts 5] [--trials 4] [--skip-certify]

``--server-memory`` times instead the whole certification of the 9 tools of
``@modelcontextprotocol/server-memory`` (pinned; its store a file of the
world, so certify sees it), seed 0, ``--trials`` draws (25, the default, as
``killpoint certify`` has), in each ``--checkout`` given (default: this one),
alternating ``--rounds`` times so a drift in the machine's load falls on each
alike: wall seconds, the load average, and each tool's verdict, evidenced class
and trials, which must agree between checkouts::

    .venv/bin/python bench/bench_certify.py --server-memory [--trials 25] [--rounds 1] [--checkout DIR]...

A checkout runs with its own ``.venv`` if it has one, else with this
interpreter from its folder (``python -m killpoint``, so its own code).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from killpoint.harness.certify import npx
from killpoint.harness.certify.mcp_client import McpServer
from killpoint.harness.certify.mcp_worlds import make_world, snapshot

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "@modelcontextprotocol/server-filesystem@2026.8.31"
MEMORY_PACKAGE = "@modelcontextprotocol/server-memory@2026.8.31"  # 9 tools; --server-memory
# certify's flags for it, its store a file of the world (bench/user_workloads.py times the same command)
MEMORY_FLAGS = ("--mcp", f"npx -y {MEMORY_PACKAGE}", "--mcp-env", "MEMORY_FILE_PATH={world}/memory.jsonl")
NPX = f"npx -y {PACKAGE} {{world}}"
INSTALLED = ROOT / "build/npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
KILLPOINT = ROOT / ".venv/bin/killpoint"


@contextmanager
def switch(resolve: bool) -> Iterator[None]:
    before = os.environ.get(npx.SWITCH)
    os.environ[npx.SWITCH] = "1" if resolve else "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ[npx.SWITCH]
        else:
            os.environ[npx.SWITCH] = before


def spread(values: list[float]) -> str:
    middle = statistics.median(values)
    return f"median {middle:7.3f}s  min {min(values):7.3f}s  max {max(values):7.3f}s  (n={len(values)})"


def start_times(argv: list[str], starts: int, folder: Path) -> tuple[list[float], list[float], list[float]]:
    """Seconds to make a world, to start a server on it through ``initialize``, and of one read_text_file call."""
    made, started, called = [], [], []
    for i in range(starts):
        trial = Path(tempfile.mkdtemp(prefix=f"trial-{i}-", dir=folder))
        began = time.monotonic()
        world = make_world(trial, "files", None)
        made.append(time.monotonic() - began)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(trial), "LANG": "C.UTF-8"}
        filled = [word.replace("{world}", str(world)) for word in argv]
        began = time.monotonic()
        server = McpServer(filled, cwd=world, env=env, stderr_path=trial / "server.stderr", call_timeout_s=120.0)
        try:
            server.initialize()
            started.append(time.monotonic() - began)
            call = server.call_tool("read_text_file", {"path": str(world / "a.txt")})
            assert call.ok, call.error
            called.append(call.seconds)
        finally:
            server.close()
        shutil.rmtree(trial, ignore_errors=True)
    return made, started, called


def snapshot_times(folder: Path, count: int) -> list[float]:
    world = make_world(Path(tempfile.mkdtemp(dir=folder)), "files", None)
    times = []
    for _ in range(count):
        began = time.monotonic()
        snapshot(world)
        times.append(time.monotonic() - began)
    return times


def certify(tool: str, trials: int, resolve: bool, out: Path) -> tuple[float, list[str], str]:
    """Wall seconds, the tool's verdict line, and the stderr notes of one certify run."""
    env = {**os.environ, npx.SWITCH: "1" if resolve else "0"}
    began = time.monotonic()
    done = subprocess.run([str(KILLPOINT), "certify", "--mcp", NPX, "--tool", tool, "--seed", "0", "--trials",
                           str(trials), "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False)
    seconds = time.monotonic() - began
    certificate = json.loads((out / f"{tool}.json").read_text())
    verdict = [certificate.get("verdict", "?"), str(certificate.get("strongest_supported", "?")),
               f"exit {done.returncode}"]
    notes = " | ".join(line for line in done.stderr.splitlines() if "npx" in line)
    return seconds, verdict, notes


def certify_memory(checkout: Path, trials: int, out: Path) -> tuple[float, int, dict[str, str]]:
    """Wall seconds, exit code, and tool -> ``VERDICT SUPPORTED replay+kill`` of server-memory's 9 tools in ``checkout``."""
    own = checkout / ".venv/bin/python"
    began = time.monotonic()
    done = subprocess.run([str(own if own.is_file() else sys.executable), "-m", "killpoint", "certify", *MEMORY_FLAGS,
                           "--seed", "0", "--trials", str(trials), "--out", str(out)], cwd=checkout,
                          capture_output=True, text=True, check=False)
    seconds = time.monotonic() - began
    verdicts = {}
    for path in sorted(out.glob("*.json")):
        data = json.loads(path.read_text())
        verdicts[path.stem] = (f"{data['verdict']} {data['strongest_supported'] or '-'} "
                               f"{data['trials']['replay']}+{data['trials']['kill']}")
    if done.returncode not in (0, 1, 3):
        print(done.stderr[-2000:], file=sys.stderr)
    return seconds, done.returncode, verdicts


def bench_memory(checkouts: list[Path], trials: int, rounds: int, folder: Path) -> None:
    """``--server-memory``: each checkout's whole certification, alternating, then the verdicts side by side."""
    print(f"killpoint certify {shlex.join(MEMORY_FLAGS)} --seed 0 --trials {trials}")
    walls: dict[Path, list[float]] = {checkout: [] for checkout in checkouts}
    last: dict[Path, dict[str, str]] = {}
    for number in range(rounds):
        for checkout in checkouts:
            load = os.getloadavg()[0]
            seconds, code, last[checkout] = certify_memory(checkout, trials, folder / f"{number}-{len(walls[checkout])}"
                                                           f"-{checkout.name}")
            walls[checkout].append(seconds)
            print(f"  {checkout}: {seconds:6.1f}s wall, exit {code}, load average {load:.1f} before, "
                  f"{os.getloadavg()[0]:.1f} after")
    for checkout in checkouts:
        print(f"  {checkout}: {spread(walls[checkout])}")
    for tool in sorted(set().union(*last.values())):
        row = [last[checkout].get(tool, "-") for checkout in checkouts]
        print(f"  {tool:<22} {' | '.join(row)}{'' if len(set(row)) == 1 else '  DIFFER'}")


def timed(label: str, run: Callable[[], tuple[list[float], list[float], list[float]]]) -> list[float]:
    made, started, called = run()
    print(f"  {label:<34} start+initialize {spread(started)}")
    print(f"  {'':<34} read_text_file call {spread(called)};  make world {spread(made)}")
    return started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--trials", type=int, help="draws per tool (default 4; 25 with --server-memory)")
    parser.add_argument("--tools", default="read_text_file,write_file")
    parser.add_argument("--skip-certify", action="store_true")
    parser.add_argument("--server-memory", action="store_true", help="time the 9-tool server-memory certification")
    parser.add_argument("--checkout", type=Path, action="append", help="with --server-memory (repeat it)")
    parser.add_argument("--rounds", type=int, default=1, help="with --server-memory")
    args = parser.parse_args()
    if shutil.which("npx") is None:
        print("bench_certify: npx not found", file=sys.stderr)
        return 2
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs; "
          f"{MEMORY_PACKAGE if args.server_memory else PACKAGE}")
    folder = Path(tempfile.mkdtemp(prefix="killpoint-bench-certify-"))
    try:
        if args.server_memory:
            bench_memory([path.resolve() for path in args.checkout or [ROOT]], args.trials or 25, args.rounds, folder)
            return 0
        print("1. one server start (fresh HOME per start, as in certify), one call, one snapshot:")
        argv = NPX.split()
        with switch(False):
            as_written = timed("npx as written", lambda: start_times(argv, args.starts, folder))
        with switch(True):
            began = time.monotonic()
            npx.started([word.replace("{world}", str(folder)) for word in argv], folder,
                        {"PATH": os.environ.get("PATH", "")})
            print(f"  (resolving once: {time.monotonic() - began:.2f}s)")
            resolved = timed("npx resolved once", lambda: start_times(argv, args.starts, folder))
        if INSTALLED.is_file():
            timed("node build/npm/.../index.js", lambda: start_times(["node", str(INSTALLED), "{world}"],
                                                                      args.starts, folder))
        print(f"  snapshot of the files world          {spread(snapshot_times(folder, 20))}")
        print(f"  start as written / resolved: {statistics.median(as_written) / statistics.median(resolved):.1f}x")
        if args.skip_certify:
            return 0
        trials = args.trials or 4
        print(f"2. killpoint certify --mcp '{NPX}' --tool TOOL --seed 0 --trials {trials}:")
        for tool in args.tools.split(","):
            runs = {}
            for resolve in (False, True):
                seconds, verdict, notes = certify(tool, trials, resolve, folder / f"{tool}-{resolve}")
                runs[resolve] = (seconds, verdict)
                label = "resolved once" if resolve else "as written"
                print(f"  {tool:<16} {label:<14} {seconds:7.1f}s  {' '.join(verdict)}")
                if notes:
                    print(f"      {notes}")
            same = "same verdicts" if runs[False][1] == runs[True][1] else "VERDICTS DIFFER"
            print(f"  {tool:<16} as written / resolved: {runs[False][0] / runs[True][0]:.1f}x ({same})")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
