"""Every file a user hands the harness (scenario, ``--plan``, catalogue, ``catalogue check`` and ``from-mcp``,
the reports ``merge`` reads) that is no regular file of bounded size is refused: exit 2 naming the file, the
limit and the fix; never a traceback, never a hang, never memory grown until the harness is killed.

``/dev/zero`` is a read that never ends and a FIFO an ``open`` that never returns: each attack runs the CLI
in-process with an alarm that fails it rather than hanging the suite, and under an address-space cap that
turns an unbounded read into a MemoryError (a failure) rather than a host out of memory.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import tomli_w

from killpoint._input_files import DOCUMENT_LIMIT_BYTES, REPORT_LIMIT_BYTES
from killpoint.harness.frontends import cli
from tests.helpers import ROOT

pytestmark = pytest.mark.hostile

DEADLINE_S = 5  # reading a refused file takes microseconds; a hang is this
MEMORY_HEADROOM = 1 << 30  # above what the test process maps already: a read of /dev/zero fails past it
TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
PLAN = {"task_id": "t", "calls": [{"call_id": "c1", "tool": "read_file", "args": {"path": "a"}}]}
CATALOGUE = {"default": "UNKNOWN", "interactive": [], "tools": {"read_file": "READ_ONLY"}}


class Hung(BaseException):
    """The command did not answer by its deadline (a BaseException: the CLI's ``except Exception`` lets it by)."""


@contextlib.contextmanager
def deadline_and_memory_cap(seconds: int = DEADLINE_S) -> Iterator[None]:
    """SIGALRM raises Hung after ``seconds``, and the address space may grow by MEMORY_HEADROOM only."""

    def hung(signum: int, frame: object) -> None:
        raise Hung(f"no answer within {seconds} s")

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    mapped = int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    cap = mapped + MEMORY_HEADROOM if hard == resource.RLIM_INFINITY else min(hard, mapped + MEMORY_HEADROOM)
    previous = signal.signal(signal.SIGALRM, hung)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.signal(signal.SIGALRM, previous)


def refused(*argv: str | Path, seconds: int = DEADLINE_S) -> str:
    """``killpoint ARGV`` in-process must exit 2 within ``seconds`` with a message and no traceback: its stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), deadline_and_memory_cap(seconds):
        code = cli.main([str(arg) for arg in argv], out=out)
    assert code == 2, (code, err.getvalue()[-2000:])
    assert not TRACEBACK.search(err.getvalue() + out.getvalue()), err.getvalue()[-2000:]
    return err.getvalue()


def fifo(folder: Path, name: str) -> Path:
    path = folder / name
    os.mkfifo(path)
    return path


def unix_socket(folder: Path, name: str) -> Path:
    path = folder / name
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.close()  # the socket file stays
    return path


def directory(folder: Path, name: str) -> Path:
    path = folder / name
    path.mkdir()
    return path


def dev_zero(folder: Path, name: str) -> Path:
    return Path("/dev/zero")


def linked_dev_zero(folder: Path, name: str) -> Path:
    """/dev/zero behind a symbolic link with the document's name: followed, and still no regular file."""
    path = folder / name
    path.symlink_to("/dev/zero")
    return path


NOT_FILES: dict[str, tuple[Callable[[Path, str], Path], str]] = {
    "dev-zero": (dev_zero, "is a character device, not a regular file"),
    "linked-dev-zero": (linked_dev_zero, "is a character device, not a regular file"),
    "fifo": (fifo, "is a FIFO (named pipe), not a regular file"),
    "socket": (unix_socket, "is a socket, not a regular file"),
    "directory": (directory, "is a directory, not a regular file"),
}


@pytest.fixture
def inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder, also the working directory, holding a good plan, catalogue and scenario."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    (tmp_path / "catalogue.json").write_text(json.dumps(CATALOGUE))
    return tmp_path


def scenario_naming(folder: Path, **files: str) -> Path:
    """A scenario whose plan and catalogue are the files named (relative to it, or absolute)."""
    path = folder / "scenario.toml"
    path.write_text(tomli_w.dumps({"workload": ["true"], "plan": "plan.json", "catalogue": "catalogue.json",
                                   **files}))
    return path


# Each command and where in it the hostile file goes; {bad} is its path.
ATTACKS: dict[str, tuple[str, ...]] = {
    "run SCENARIO": ("run", "{bad}"),
    "run --plan": ("run", "--workload", "true", "--plan", "{bad}"),
    "run --catalogue": ("run", "--workload", "true", "--plan", "plan.json", "--catalogue", "{bad}"),
    "catalogue check": ("catalogue", "check", "{bad}"),
    "catalogue --file": ("catalogue", "--file", "{bad}"),
    "catalogue from-mcp": ("catalogue", "from-mcp", "{bad}"),
    "merge": ("merge", "{bad}"),
}


@pytest.mark.parametrize("kind", NOT_FILES)
@pytest.mark.parametrize("attack", ATTACKS)
def test_an_input_that_is_no_regular_file_is_refused_naming_it(inputs, attack, kind):
    make, said = NOT_FILES[kind]
    bad = make(inputs, "hostile.json")
    err = refused(*(str(bad) if word == "{bad}" else word for word in ATTACKS[attack]))
    assert f"{bad}: {said}" in err and "was not read" in err


@pytest.mark.parametrize("field", ["plan", "catalogue"])
@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
def test_a_scenario_naming_a_device_or_a_fifo_as_its_plan_or_catalogue_is_refused(inputs, field, kind):
    make, said = NOT_FILES[kind]
    bad = make(inputs, f"hostile-{field}.json")
    err = refused("run", scenario_naming(inputs, **{field: str(bad)}))
    assert f"{bad}: {said}" in err


@pytest.mark.parametrize("field", ["plan", "catalogue"])
def test_a_scenario_naming_a_path_with_a_nul_byte_is_refused(inputs, field):
    """TOML writes a NUL as "\\u0000"; no file's name holds one, and os.stat raised ValueError (a traceback)."""
    err = refused("run", scenario_naming(inputs, **{field: "hostile\0.json"}))
    assert "a path cannot hold a NUL byte" in err


def sparse(path: Path, size: int) -> Path:
    """A regular file of ``size`` bytes that takes no room on disk."""
    with path.open("wb") as stream:
        stream.truncate(size)
    return path


@pytest.mark.parametrize(("attack", "limit"), [
    ("run SCENARIO", DOCUMENT_LIMIT_BYTES), ("run --plan", DOCUMENT_LIMIT_BYTES),
    ("catalogue check", DOCUMENT_LIMIT_BYTES), ("catalogue from-mcp", DOCUMENT_LIMIT_BYTES),
    ("merge", REPORT_LIMIT_BYTES),
])
def test_an_input_over_its_kinds_size_limit_is_refused_before_it_is_read(inputs, attack, limit):
    bad = sparse(inputs / "huge.json", limit + 1)
    err = refused(*(str(bad) if word == "{bad}" else word for word in ATTACKS[attack]))
    assert f"{bad}: holds {limit + 1} bytes, over the {limit >> 20} MiB limit for" in err
    assert "so it was not read" in err


def test_a_users_own_scenario_given_by_a_symbolic_link_is_followed(inputs):
    linked = inputs / "linked.toml"
    linked.symlink_to(scenario_naming(inputs, catalogue="no-such-catalogue.json"))
    err = refused("run", linked)  # read through the link: its catalogue, beside the link, is what is missing
    assert f"{inputs / 'no-such-catalogue.json'}: cannot read the catalogue (No such file or directory)" in err


def test_the_deadline_fails_a_command_that_hangs_on_a_fifo(inputs):
    # Without this the attacks above could pass because the guard never fires.
    with pytest.raises(Hung), deadline_and_memory_cap(seconds=1):
        fifo(inputs, "pipe").read_bytes()


UNBOUNDED_READ = """
import pathlib
from tests.test_hostile_inputs import deadline_and_memory_cap
try:
    with deadline_and_memory_cap(), pathlib.Path("/dev/zero").open("rb") as zeros:
        zeros.read()
except MemoryError:
    print("MemoryError")
"""


@pytest.mark.integration
def test_the_memory_cap_fails_an_unbounded_read():
    # In a process of its own: the cap is the whole process's, so once a read reaches it every thread's allocation
    # fails, and an xdist worker's own threads (its channel to the controller) failed with it once, under load.
    done = subprocess.run([sys.executable, "-c", UNBOUNDED_READ], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.stdout == "MemoryError\n", done.stdout + done.stderr
