"""A hostile workload's world cannot hang the harness, crash it, turn it against the host, or hide what it did.

Each workload of scenarios/hostile/ is the reference runtime that plants one
thing in its world when it recovers (a FIFO, a socket, a 500 MB sparse file, hard
links to a host file, a symlink where the world writes, a 5,000-deep tree). The
demo is killed at c4:after_effect for real, so the crash-free run's world is
clean and the recovered one is not. The harness is run as a process of its own
(as root, as users run it), so a hang is a timeout and its memory is its own.
Every attack must end in bounded time with an exit code and no traceback, leave
the file outside the world as it was (content and mode), never copy that file's
content into the report or the evidence, and name what was planted in a finding.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import DEMO, ROOT
from tests.integration.test_docker_backend import (  # noqa: F401
    docker_engine,
    leftover_sweeps_serialised,
)

pytestmark = [pytest.mark.integration, pytest.mark.hostile]

KILLPOINT = Path(sys.executable).parent / "killpoint"
WALL_LIMIT_S = 180.0  # a demo run with one kill takes seconds; a hang is this long
RSS_LIMIT_MB = 400  # the harness holds small files and digests; reading the sparse file whole took 1 GB
SECRET = b"host secret: the harness must never read or change this\n"


@dataclass(frozen=True)
class Attack:
    planted: str  # the world-relative entry the finding must name
    outside: str = ""  # "file": a host file outside the world is the attack's argument; "folder": a host folder
    in_container: bool = True  # False when a container cannot reach the host file the attack needs


ATTACKS = {
    "plants_fifo": Attack("files/notes/pipe"),
    "plants_socket": Attack("files/notes/socket"),
    "plants_sparse_file": Attack("files/notes/huge.bin"),
    "plants_deep_tree": Attack("files/notes/deep/"),
    "plants_hard_link": Attack("files/orders/log.txt", outside="file", in_container=False),
    "swaps_world_file_for_symlink": Attack("state/.shell.json.tmp", outside="file", in_container=False),
    "swaps_files_folder_for_symlink": Attack("files", outside="folder", in_container=False),
}
CASES = [pytest.param(name, backend, id=f"{name}-{backend}") for name, attack in ATTACKS.items()
         for backend in ("subprocess", "forkserver", "docker") if backend != "docker" or attack.in_container]


@dataclass(frozen=True)
class Harness:
    exit_code: int | None  # None: it hung and was killed at WALL_LIMIT_S
    output: str
    seconds: float
    peak_rss_mb: float


# Starts ARGV as its child and reaps it with wait4: the child's peak RSS is its own. A process's peak RSS counts
# the memory of the process it was forked from (Linux keeps the old memory's high-water mark across exec), so a
# harness forked from this test process would report the test worker's peak, which earlier tests may have grown
# past any limit; forked from this small launcher, it reports its own.
LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as peak:
    peak.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


def run_harness(log: Path, *args: str | Path) -> Harness:
    """Run ``killpoint ARGS`` as a process of its own, killed (its whole group) if it outlives WALL_LIMIT_S;
    its peak RSS (``LAUNCHER``) is its own and its reaped children's."""
    started = time.monotonic()
    peak = log.with_suffix(".peak-kb")
    with log.open("wb") as output:
        harness = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(peak), str(KILLPOINT), *map(str, args)],
                                   cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        exit_code: int | None = harness.wait(timeout=WALL_LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(harness.pid, signal.SIGKILL)
        harness.wait()
        exit_code = None
    peak_mb = int(peak.read_text()) / 1024 if exit_code is not None else 0.0
    return Harness(exit_code, log.read_text(errors="replace"), time.monotonic() - started, peak_mb)


def make_outside(tmp_path: Path, kind: str) -> tuple[Path, dict[str, tuple[bytes, int]]]:
    """The host file or folder the attack aims at, and what each file in it holds (content, mode)."""
    outside = tmp_path / "host"
    outside.mkdir()
    if kind == "folder":
        target = outside / "files"
        for relative in ("notes/todo.txt", "orders/log.txt"):
            (target / relative).parent.mkdir(parents=True)
            (target / relative).write_bytes(SECRET)
    else:
        target = outside / "secret.txt"
        target.write_bytes(SECRET)
    for path in outside.rglob("*"):
        if path.is_file():
            path.chmod(0o640)
    return target, files_of(outside)


def files_of(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(path): (path.read_bytes(), path.stat().st_mode) for path in sorted(folder.rglob("*"))
            if path.is_file()}


def copies_of_secret(folder: Path, outside: Path) -> list[str]:
    """Files under ``folder`` holding the secret, but the outside files themselves (a hard link is one of them)."""
    outside_inodes = {(path.stat().st_dev, path.stat().st_ino) for path in outside.rglob("*") if path.is_file()}
    found = []
    for path in folder.rglob("*"):
        if path.is_symlink() or not path.is_file() or (path.stat().st_dev, path.stat().st_ino) in outside_inodes:
            continue
        if SECRET.strip() in path.read_bytes()[:1 << 20]:
            found.append(str(path))
    return found


def remove_chain(top: Path, name: str = "d") -> None:
    """Delete ``top`` and the chain ``name/name/...`` below it one level at a time, never recursing.

    shutil.rmtree recurses once a level and overflows Python's stack on a 5,000-deep
    tree (pytest's cleanup of old temporary folders would fail on it): here the
    chain is shortened from the top, renaming ``name/name`` up over its parent.
    """
    folder = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        while os.path.lexists(os.path.join(f"/proc/self/fd/{folder}", name, name)):
            os.rename(f"{name}/{name}", "up", src_dir_fd=folder, dst_dir_fd=folder)
            os.rmdir(name, dir_fd=folder)
            os.rename("up", name, src_dir_fd=folder, dst_dir_fd=folder)
        if os.path.lexists(os.path.join(f"/proc/self/fd/{folder}", name)):
            os.rmdir(name, dir_fd=folder)
    finally:
        os.close(folder)
    top.rmdir()


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[Path]:
    """Where the harness keeps its evidence; a deep tree an attack planted in a run's world is removed after."""
    yield tmp_path / "runs"
    for deep in (tmp_path / "runs").glob("*/world/files/notes/deep"):
        remove_chain(deep)


@pytest.mark.parametrize(("name", "backend"), CASES)
def test_a_hostile_world_is_reported_and_harms_nothing(request: pytest.FixtureRequest, tmp_path: Path, runs: Path,
                                                       name: str, backend: str) -> None:
    if backend == "docker":
        request.getfixturevalue("docker_engine")
    attack = ATTACKS[name]
    target, outside_before = make_outside(tmp_path, attack.outside) if attack.outside else (None, {})
    workload = f"{{python}} -m killpoint.scenarios.hostile.{name}" + (f" {target}" if target else "")
    report_path = tmp_path / "report.json"
    # A scratch folder beside the host file: a hard link to it is made in the world (on /dev/shm it could not be,
    # across devices), and the failing run's world is then copied to disk from there.
    (tmp_path / "scratch").mkdir()
    harness = run_harness(tmp_path / "killpoint.harness.log", "run", DEMO, "--backend", backend, "--kill-at", "c4:after_effect",
                          "--workload", workload, "--runs-dir", runs, "--json", report_path,
                          "--scratch", tmp_path / "scratch")

    assert harness.exit_code is not None, f"the harness hung for {WALL_LIMIT_S:.0f} s:\n{harness.output[-3000:]}"
    assert harness.exit_code in (0, 1, 2, 3) and "Traceback" not in harness.output, harness.output[-3000:]
    assert harness.peak_rss_mb < RSS_LIMIT_MB, f"the harness held {harness.peak_rss_mb:.0f} MB"
    if target is not None:
        assert files_of(target.parent) == outside_before, "the file outside the world was changed"
        leaks = copies_of_secret(runs, target.parent)
        assert leaks == [] and SECRET.strip().decode() not in harness.output, f"the outside file was copied: {leaks}"
    assert list((tmp_path / "scratch").iterdir()) == [], "the scratch folder outlived the session"

    (run,) = json.loads(report_path.read_text())["runs"]
    (world,) = [finding for finding in run["findings"] if finding["property"] == "world-equals-golden"]
    entry = re.compile(rf"(extra|changed) +{re.escape(attack.planted)}:?")
    named = [line for line in world["evidence"] if entry.fullmatch(line)]
    assert named, f"the world finding does not name {attack.planted}: {world['evidence']}"
    if target is not None:
        assert SECRET.strip().decode() not in json.dumps(run)
