"""``killpoint certify --mcp`` against hostile MCP servers: a clear outcome every time, nothing left behind.

Each attack is a real server process (tests/certify/servers/hostile.py, JSON-RPC
spoken by hand so it can misbehave) certified by ``killpoint`` run as a process
of its own, in a session of its own, with its temporary folders in a folder of
the test's. Whatever the server does, certify must end within WALL_LIMIT_S with
an exit code of its table and a message naming the server and the problem,
never a traceback; no process the server started may outlive it (each carries
the test's marker in its argv), and no killpoint-certify-* or killpoint-mcp-*
folder may be left.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from killpoint.harness.backends import _cgroup
from killpoint.harness.certify import mcp_client
from killpoint.harness.frontends._command import killpoint_command
from tests.helpers import ROOT
from tests.integration.test_containment import (marker, sleepers,  # noqa: F401  (marker: a fixture)
                                                sleepers_after_deadline)

pytestmark = [pytest.mark.integration, pytest.mark.hostile]

HOSTILE = ROOT / "tests" / "certify" / "servers" / "hostile.py"
WALL_LIMIT_S = 120.0  # each certification takes seconds (tens on a machine at load 100); a hang is this long
EXIT_OK, EXIT_BAD_INPUT, EXIT_INCONCLUSIVE = 0, 2, 3


@dataclass(frozen=True)
class Certify:
    exit_code: int | None  # None: it hung and was killed at WALL_LIMIT_S
    output: str
    seconds: float
    left_in_tmp: list[str]


def certify(attack: str, marker: str, tmp_path: Path, *flags: str) -> Certify:
    """``killpoint certify --mcp`` on the attack's server: 2 draws, 5 s per call, killed whole past WALL_LIMIT_S."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    server = shlex.join([sys.executable, str(HOSTILE), attack, "{world}", marker])
    argv = [*shlex.split(killpoint_command()), "certify", "--mcp", server, "--seed", "0", "--trials", "2",
            "--call-timeout", "5", "--out", str(tmp_path / "certificates"), *flags]
    started = time.monotonic()
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "TMPDIR": str(tmp)}, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=WALL_LIMIT_S)
        exit_code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        exit_code = None
    return Certify(exit_code, output, time.monotonic() - started, sorted(path.name for path in tmp.iterdir()))


def assert_clean_end(result: Certify, marker: str, exit_code: int, *said: str) -> None:
    assert result.exit_code == exit_code, f"exit {result.exit_code} after {result.seconds:.1f}s:\n{result.output[-3000:]}"
    assert "Traceback" not in result.output, result.output[-3000:]
    for text in said:
        assert text in result.output, result.output[-3000:]
    assert sleepers_after_deadline(marker) == []
    assert result.left_in_tmp == []


def test_a_grandchild_that_double_forked_and_called_setsid_dies_with_its_server(tmp_path, marker):
    result = certify("orphan", marker, tmp_path)
    assert_clean_end(result, marker, EXIT_OK, "read_note", "CONFIRMED")


def test_a_server_that_stops_reading_its_stdin_is_timed_out_not_waited_for(tmp_path, marker):
    """It floods the client with requests: the answers to them fill its stdin, which it never reads."""
    result = certify("no-read", marker, tmp_path)
    assert_clean_end(result, marker, EXIT_INCONCLUSIVE, "INCONCLUSIVE read_note",
                     "the call had no answer within 5s (and it had not read ")
    assert result.seconds < WALL_LIMIT_S / 2, result.seconds


def test_a_tool_list_without_end_is_cut_at_a_bound(tmp_path, marker):
    result = certify("endless-pages", marker, tmp_path)
    assert_clean_end(result, marker, EXIT_BAD_INPUT, "killpoint: --mcp ", "hostile.py endless-pages",
                     "its tools/list has a nextCursor on each of 100 pages (100 tools so far); "
                     "killpoint reads at most 100 pages of tools")


@pytest.mark.parametrize(("attack", "exit_code", "said"), [
    ("deep-list", EXIT_BAD_INPUT, "hostile.py deep-list"),
    ("deep-answer", EXIT_INCONCLUSIVE, "INCONCLUSIVE read_note"),
])
def test_a_message_nested_too_deep_is_named_not_a_recursion_error(tmp_path, marker, attack, exit_code, said):
    result = certify(attack, marker, tmp_path)
    assert_clean_end(result, marker, exit_code, said, "it printed a message nested deeper than 100 levels")
    assert "RecursionError" not in result.output


def test_a_tool_name_too_long_for_a_file_is_refused_and_the_other_tool_can_be_certified(tmp_path, marker):
    refused = certify("long-name", marker, tmp_path)
    assert_clean_end(refused, marker, EXIT_BAD_INPUT, "the server (hostile-long-name 1) lists tools killpoint cannot "
                     "certify", "'xxxxxxxxx", "(400 characters): not an MCP tool name (1 to 128 characters")
    assert not (tmp_path / "certificates").exists()
    alone = certify("long-name", marker, tmp_path, "--tool", "read_note")
    assert_clean_end(alone, marker, EXIT_OK, "read_note")
    assert [path.name for path in (tmp_path / "certificates").iterdir()] == ["read_note.json"]


def test_two_tools_of_one_name_are_refused_not_certified_over_each_other(tmp_path, marker):
    result = certify("duplicate", marker, tmp_path)
    assert_clean_end(result, marker, EXIT_BAD_INPUT, "the server (hostile-duplicate 1) lists tools killpoint cannot "
                     "certify", "'read_note': listed 2 times; one certificate cannot be about two tools")
    assert not (tmp_path / "certificates").exists()


def test_without_cgroups_certify_says_so_once_and_kills_each_servers_tree(monkeypatch, capsys, tmp_path, marker):
    """The fallback's limit, said and shown: the server and its tree die, the grandchild that left both does not."""
    monkeypatch.setattr(_cgroup, "_own_cgroup_dir", lambda: _cgroup.Unavailable("no cgroup2 mount (test)"))
    _cgroup.usable_parent.cache_clear()
    mcp_client._say_no_cgroups.cache_clear()
    try:
        servers = [mcp_client.McpServer([sys.executable, str(HOSTILE), "orphan", str(tmp_path), marker], cwd=tmp_path,
                                        env={"PATH": os.environ["PATH"]}, stderr_path=tmp_path / f"server-{number}.stderr",
                                        call_timeout_s=WALL_LIMIT_S) for number in range(2)]
        for server in servers:
            server.initialize()
            server.close()
    finally:
        _cgroup.usable_parent.cache_clear()
        mcp_client._say_no_cgroups.cache_clear()
    assert [server.returncode for server in servers] == [-signal.SIGKILL] * 2
    assert capsys.readouterr().err.count("killpoint certify: no cgroup per MCP server (see above); a server's processes "
                                        "are found by walking its process tree and its process group") == 1
    assert len(sleepers(marker)) == 2  # the two grandchildren (the marker fixture kills them)
