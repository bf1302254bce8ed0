"""``killpoint certify --mcp`` against real MCP servers: the npm filesystem server, mcp-server-git, and a liar.

The servers run as real processes and are SIGKILLed part-way for real. The
three certifications run at once (each a ``killpoint`` process) with few draws
per tool, so the module stays within a few minutes on a busy machine; the
verdicts asserted are the ones measured at seed 0 with those draws (docs/certify.md
has the table, and the full-budget commands).

The filesystem server is installed by ``ci/install-mcp-servers`` into
build/npm; mcp-server-git comes with the dev extras. Missing one skips its test
locally, saying how to install it; with ``CI`` set it fails instead.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from killpoint.harness.frontends._ci import ci_profile
from killpoint.harness.frontends._command import killpoint_command
from tests.helpers import ROOT

pytestmark = pytest.mark.integration

FILESYSTEM_JS = ROOT / "build/npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
GIT_SERVER = Path(sys.executable).parent / "mcp-server-git"
LIAR = Path(__file__).parent / "servers" / "liar.py"
TRIALS = "2"  # per tool, in the tests; the CLI's default (25) is the full budget
DEADLINE_S = 600.0


def filesystem_command() -> str:
    return f"node {shlex.quote(str(FILESYSTEM_JS))} {{world}}"


def git_command() -> str:
    return f"{shlex.quote(str(GIT_SERVER))} --repository {{world}}"


def liar_command(*flags: str) -> str:
    return shlex.join([sys.executable, str(LIAR), "{world}", *flags])


def missing(what: str, how: str) -> None:
    """Skip locally with the reason; in CI a missing server is a failure, never a skip."""
    message = f"{what} is not installed: {how}"
    if ci_profile():
        pytest.fail(message + " (CI is set: the MCP server tests must run)")
    pytest.skip(message)


def need_filesystem_server() -> None:
    if not FILESYSTEM_JS.is_file():
        missing("@modelcontextprotocol/server-filesystem", "run ci/install-mcp-servers (needs node and npm)")


def need_git_server() -> None:
    if not GIT_SERVER.is_file():
        missing("mcp-server-git", "pip install -e '.[dev]' (it pins mcp-server-git)")


@dataclass
class Certification:
    exit_code: int
    out: str
    err: str
    folder: Path
    seconds: float

    def certificate(self, tool: str) -> dict:
        return json.loads((self.folder / f"{tool}.json").read_text())

    def verdicts(self) -> dict[str, str]:
        return {path.stem: json.loads(path.read_text())["verdict"] for path in sorted(self.folder.glob("*.json"))}


def start_certify(folder: Path, *args: str, worlds: Path | None = None) -> subprocess.Popen[str]:
    """``killpoint certify`` writing its certificates to ``folder``, and its worlds under ``worlds`` if given."""
    argv = [*shlex.split(killpoint_command()), "certify", *args, "--seed", "0", "--out", str(folder)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **({"TMPDIR": str(worlds)} if worlds is not None else {})}
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def worlds_of(certified: dict[str, Certification]) -> Path:
    """Where the fixture's certifications make their worlds: a server started on one names it in its command line."""
    return certified["liar"].folder.parent / "worlds"


def finish(process: subprocess.Popen[str], folder: Path, started: float) -> Certification:
    try:
        out, err = process.communicate(timeout=max(1.0, DEADLINE_S - (time.monotonic() - started)))
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"killpoint certify did not finish within {DEADLINE_S:.0f}s:\n{out[-3000:]}\n{err[-2000:]}")
    return Certification(process.returncode, out, err, folder, time.monotonic() - started)


@pytest.fixture(scope="module")
def certified(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Certification]]:
    """The three servers certified at once, seed 0, TRIALS draws per tool (the CLI runs what is installed)."""
    root = tmp_path_factory.mktemp("mcp")
    runs = {"liar": ["--mcp", liar_command(), "--trials", TRIALS, "--write-catalogue", str(root / "liar.toml")]}
    if FILESYSTEM_JS.is_file():
        runs["filesystem"] = ["--mcp", filesystem_command(), "--trials", TRIALS]
    if GIT_SERVER.is_file():
        runs["git"] = ["--mcp", git_command(), "--world-preset", "git", "--trials", TRIALS]
    (root / "worlds").mkdir()
    started = time.monotonic()
    processes = {name: start_certify(root / name, *args, worlds=root / "worlds") for name, args in runs.items()}
    try:
        yield {name: finish(process, root / name, started) for name, process in processes.items()}
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()


# Measured at seed 0 with TRIALS draws (docs/certify.md, "Two real servers").
FILESYSTEM_VERDICTS = {
    "create_directory": "CONFIRMED", "directory_tree": "CONFIRMED", "edit_file": "CONFIRMED",
    "get_file_info": "CONFIRMED", "list_allowed_directories": "CONFIRMED", "list_directory": "CONFIRMED",
    "list_directory_with_sizes": "CONFIRMED", "move_file": "CONSERVATIVE", "read_file": "CONFIRMED",
    "read_media_file": "CONFIRMED", "read_multiple_files": "CONFIRMED", "read_text_file": "CONFIRMED",
    "search_files": "CONFIRMED", "write_file": "CONFIRMED",
}
GIT_VERDICTS = {
    "git_add": "REFUTED", "git_branch": "CONFIRMED", "git_checkout": "CONFIRMED", "git_commit": "CONSERVATIVE",
    "git_create_branch": "CONFIRMED", "git_diff": "CONFIRMED", "git_diff_staged": "CONFIRMED",
    "git_diff_unstaged": "CONFIRMED", "git_log": "CONFIRMED", "git_show": "CONFIRMED", "git_status": "CONFIRMED",
}
# git creates a lock file (index.lock, refs/heads/NAME.lock) with open(O_CREAT|O_EXCL), then writes it and renames it
# into place in well under a millisecond. A kill at the lock's creation holds git in that open (fanotify) until it is
# dead, so it always leaves the lock, and the replay fails on it: these three are refuted or witnessed by it every time.
LOCKED_AT_POINT_1 = {"git_add": "index.lock", "git_checkout": "index.lock", "git_create_branch": "refs/heads/topic.lock"}
# git_reset's two kills at seed 0 are one at its first point (always "never") and one after a seeded delay (34 ms):
# where a delay lands is the scheduler's to say, not a change in the world, so under load it lands in the lock's window
# (a lock left: REFUTED) or not (CONFIRMED). A timed kill cannot be held; it stays a race.
GIT_RACES = {"git_reset": {"REFUTED", "CONFIRMED"}}


def test_the_filesystem_server_write_file_is_confirmed_and_the_stray_temp_file_a_kill_leaves_is_debris(
        certified: dict[str, Certification]) -> None:
    """Issue 28: the temporary file a kill leaves, which the replay does not remove, is no repeated effect."""
    need_filesystem_server()
    run = certified["filesystem"]
    assert run.exit_code == 0, run.out + run.err
    assert run.verdicts() == FILESYSTEM_VERDICTS, run.out
    write = run.certificate("write_file")
    assert write["identity"]["name"] == "secure-filesystem-server" and write["identity"]["version"] == "0.2.0"
    assert write["adapter"]["annotations"]["idempotentHint"] is True
    assert write["adapter"]["kills_at_changes"].startswith("held (fanotify"), write["adapter"]
    # a partial new.txt may be torn too (the second draw's kill; the replay overwrites it): only the temp file is debris
    assert "+a.txt.<hex>.tmp" in write["kill_left"]["torn"] and write["kill_left"]["once"] == 0, write["kill_left"]
    assert write["trials"]["kill_diverged"] == 0 and "counterexample" not in write, write["trials"]
    assert write["debris"] and all(entry["files"] == ["a.txt.<hex>.tmp"] for entry in write["debris"]), write["debris"]
    assert write["debris"][0]["kill_label"] == "just after create a.txt.<hex>.tmp", write["debris"]
    assert all(entry["replay_ok"] for entry in write["debris"]), write["debris"]
    assert "debris: a.txt.<hex>.tmp" in run.out and "DEBRIS write_file" in run.out, run.out
    edit = run.certificate("edit_file")
    assert edit["claim"] == "NON_IDEMPOTENT" and edit["witness"]["check"] == "one call, then the same call again"


def test_mcp_server_git_verdicts_and_what_a_kill_of_an_index_writer_leaves(certified: dict[str, Certification]) -> None:
    need_git_server()
    run = certified["git"]
    verdicts = run.verdicts()
    assert run.exit_code == (1 if "REFUTED" in verdicts.values() else 0), run.out + run.err
    assert {tool: verdict for tool, verdict in verdicts.items() if tool not in GIT_RACES} == GIT_VERDICTS, run.out
    assert all(verdicts[tool] in allowed for tool, allowed in GIT_RACES.items()), run.out
    for tool, lock in LOCKED_AT_POINT_1.items():
        certificate = run.certificate(tool)
        assert certificate["identity"]["name"] == "mcp-git" and certificate["identity"]["version"] == "2026.10.19"
        assert certificate["adapter"]["kills_at_changes"].startswith("held (fanotify"), certificate["adapter"]
        evidence = certificate.get("counterexample") or certificate["witness"]
        assert evidence["check"] == "killed part-way, then replayed" and evidence["args"]["repo_path"] == "{world}"
        assert evidence["kill"]["point"] == 1 and evidence["kill"]["label"] == f"just after create .git/{lock}"
        assert f"+.git/{lock}" in "\n".join(evidence["diffs"]["the kill left (against before)"]), evidence
    assert run.certificate("git_commit")["hint"]["contradiction"].startswith("the MCP hints")


def test_the_lying_server_is_refuted_with_the_replay_that_appends_again(certified: dict[str, Certification]) -> None:
    run = certified["liar"]
    assert run.exit_code == 1, run.out + run.err
    assert run.verdicts() == {"append_note": "REFUTED", "delete_note": "CONSERVATIVE", "fetch_page": "INCONCLUSIVE",
                              "set_value": "CONFIRMED", "toggle_logging": "INCONCLUSIVE"}, run.out
    example = run.certificate("append_note")["counterexample"]
    assert example["args"] == {"text": "alpha"}
    assert example["diffs"]["the replay changed (against one call)"] == [
        "changed notes.txt:", "    @@ -1 +1,2 @@", "     alpha", "    +alpha"]
    assert "args: {\"text\": \"alpha\"}" in run.out and "contradicts MCP hint idempotentHint" in run.out
    fetch = run.certificate("fetch_page")
    assert fetch["reason"] == ("skipped: openWorldHint: true (it may reach the network); give --allow-network "
                               "to run it") and fetch["observations"] == []
    assert "skipped: openWorldHint: true" in run.out


def test_the_catalogue_written_holds_the_evidenced_classes_and_checks(certified: dict[str, Certification],
                                                                      tmp_path: Path) -> None:
    catalogue = certified["liar"].folder.parent / "liar.toml"
    text = catalogue.read_text()
    assert 'append_note' in text and 'class = "NON_IDEMPOTENT"' in text and 'fetch_page' in text
    assert tomllib.loads(text)["tools"]["toggle_logging"]["class"] == "UNKNOWN"
    checked = subprocess.run([*shlex.split(killpoint_command()), "catalogue", "check", str(catalogue)],
                             capture_output=True, text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_no_server_process_outlives_the_certifications(certified: dict[str, Certification]) -> None:
    worlds = str(worlds_of(certified))  # this run's servers only: another certify on the machine is not theirs
    deadline = time.monotonic() + 10.0
    while True:
        left = []
        for process in psutil.process_iter(["cmdline"]):
            command = " ".join(process.info["cmdline"] or [])
            if worlds in command and "pytest" not in command:
                left.append(f"{process.pid}: {command[:120]}")
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert left == []


def test_a_toggle_kept_in_the_servers_memory_is_inconclusive_never_evidence_of_read_only(tmp_path: Path) -> None:
    """Issue 28: a call that turns a setting on, and a replay that turns it off, leave every world as it was."""
    catalogue = tmp_path / "toggle.toml"
    run = finish(start_certify(tmp_path / "c", "--mcp", liar_command(), "--tool", "toggle_logging", "--trials", "2",
                               "--write-catalogue", str(catalogue)), tmp_path / "c", time.monotonic())
    assert run.exit_code == 3, run.out + run.err
    toggle = run.certificate("toggle_logging")
    assert (toggle["claim"], toggle["verdict"], toggle["strongest_supported"]) == (
        "NON_IDEMPOTENT", "INCONCLUSIVE", None), toggle["reason"]
    assert toggle["reason"].startswith("no change was visible in the world (") and toggle["reason"].endswith(
        "; an effect kept in the server's memory cannot be seen, so this is no evidence of READ_ONLY")
    assert toggle["hint"]["contradiction"] is None and "RETRY" not in run.out, run.out
    assert "no change seen, and no evidence of READ_ONLY" in run.out, run.out
    assert tomllib.loads(catalogue.read_text())["tools"]["toggle_logging"]["class"] == "UNKNOWN"


def test_with_allow_network_the_open_world_tool_runs_and_its_read_only_hint_is_refuted(tmp_path: Path) -> None:
    run = finish(start_certify(tmp_path / "c", "--mcp", liar_command(), "--tool", "fetch_page", "--allow-network",
                               "--trials", "1"), tmp_path / "c", time.monotonic())
    assert run.exit_code == 1, run.out + run.err
    assert run.certificate("fetch_page")["verdict"] == "REFUTED"


# The liar imports the MCP SDK before it looks at its flags (over 2 s on a loaded machine): the one that exits is
# given time to get there, since its death, not the timeout, is what the message must name.
@pytest.mark.parametrize(("flags", "timeout", "message"), [
    (("--exit-at-once",), "60", "the server exited with code 3 before it answered initialize"),
    (("--silent",), "2", "it did not answer initialize within 2s"),
])
def test_a_server_that_exits_or_never_answers_initialize_is_exit_2_with_the_reason(
        tmp_path: Path, flags: tuple[str, ...], timeout: str, message: str) -> None:
    run = finish(start_certify(tmp_path / "c", "--mcp", liar_command(*flags), "--call-timeout", timeout),
                 tmp_path / "c", time.monotonic())
    assert run.exit_code == 2, run.out + run.err
    assert run.err.startswith("killpoint: --mcp ") and message in run.err, run.err
    assert "Traceback" not in run.err and run.out == ""


def test_a_tool_the_server_does_not_list_is_exit_2_naming_those_it_does(tmp_path: Path) -> None:
    run = finish(start_certify(tmp_path / "c", "--mcp", liar_command(), "--tool", "nope"), tmp_path / "c",
                 time.monotonic())
    assert run.exit_code == 2 and "lists no tool 'nope'; it lists append_note, delete_note" in run.err, run.err


def test_a_git_world_snapshots_the_same_in_every_fresh_copy_and_the_snapshot_writes_nothing(tmp_path: Path) -> None:
    from killpoint.harness.certify.mcp_worlds import make_world, snapshot

    first, second = make_world(tmp_path / "1", "git", None), make_world(tmp_path / "2", "git", None)
    index = first / ".git" / "index"
    stat_before, bytes_before = index.stat().st_mtime_ns, index.read_bytes()
    assert snapshot(first) == snapshot(second), "equal repositories, equal snapshots (no inode or time in them)"
    assert (index.stat().st_mtime_ns, index.read_bytes()) == (stat_before, bytes_before), "read-only: no index refresh"
    (first / ".git" / "index.lock").write_text("")
    assert snapshot(first)["git: locks"] == ".git/index.lock"
