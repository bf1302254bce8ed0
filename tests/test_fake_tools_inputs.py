"""Bad input never escapes the world or crashes a tool: it is a FAILED call with a message that says why."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from killpoint.fake_tools import world as world_module
from killpoint.fake_tools.base import REGISTRY, ToolResult, invoke, lookup
from killpoint.fake_tools.ledger import Ledger
from killpoint.fake_tools.world import SandboxError, World, diff_snapshots, seed_world

pytestmark = pytest.mark.hostile  # the bad-input fuzz of the hostile-input suite (docs/security.md)

lookup("read_file")  # registers every family
SECRET = "the secret outside the world\n"


@pytest.fixture
def world(tmp_path: Path) -> World:
    """A world beside an ``outside`` folder, with symlinks from inside the world to it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    seeded = seed_world(tmp_path / "world", {"notes/todo.txt": "tea\n", "inbox/a.txt": "a\n"},
                        {"terminal": {"sessions": {"1": {"open": True, "history": []}}},
                         "web": {"pages": {"https://example.test/": {"title": "Example", "body": "hi"}}}})
    (seeded.files_root / "link_out").symlink_to(outside, target_is_directory=True)
    (seeded.files_root / "secret_link").symlink_to(outside / "secret.txt")
    (seeded.root / "x").write_text("beside files/, outside the sandbox\n")
    return seeded


def call(world: World, tool: str, args: dict[str, Any]) -> ToolResult:
    ledger = Ledger(world.root.parent / "ledger.jsonl", incarnation=0)
    try:
        return invoke(tool, "c1", args, world=world, ledger=ledger)
    finally:
        ledger.close()


def outside_files(world: World) -> dict[str, str]:
    """Everything outside the sandbox that a tool could try to touch."""
    outside = world.root.parent / "outside"
    return {**{path.name: path.read_text() for path in outside.iterdir()}, "x": (world.root / "x").read_text()}


ESCAPES = {
    "dotdot": "../x",
    "absolute": "/etc/passwd",
    "symlinked folder": "link_out/secret.txt",
    "symlinked file": "secret_link",
}
FILE_CALLS: dict[str, Any] = {
    "read_file": lambda path: {"path": path},
    "write_file": lambda path: {"path": path, "content": "pwned"},
    "append": lambda path: {"path": path, "text": "pwned"},
    "list_files": lambda path: {"path": path},
    "search_files": lambda path: {"query": "secret", "path": path},
    "edit_file": lambda path: {"path": path, "old": "secret", "new": "pwned"},
    "delete_file": lambda path: {"path": path},
    "copy_move_file (source)": lambda path: {"source": path, "destination": "stolen.txt", "mode": "move"},
    "copy_move_file (destination)": lambda path: {"source": "notes/todo.txt", "destination": path},
    "create_directory": lambda path: {"path": path + "/sub"},
    "file_organizer": lambda path: {"path": path},
    "download_file": lambda path: {"url": "https://example.test/", "path": path},
    "data_analyzer": lambda path: {"path": path},
}


@pytest.mark.parametrize("escape", sorted(ESCAPES))
@pytest.mark.parametrize("case", sorted(FILE_CALLS))
def test_a_path_leaving_the_world_is_refused(world: World, case: str, escape: str) -> None:
    before = outside_files(world)
    path = ESCAPES[escape]
    result = call(world, case.split(" ")[0], FILE_CALLS[case](path))
    assert not result.ok, f"{case} accepted {path!r}: {result.output!r}"
    assert "refused" in result.error and repr(path).strip("'") in result.error, result.error
    assert outside_files(world) == before
    assert not (world.files_root / "stolen.txt").exists()


@pytest.mark.parametrize("pattern", ["../*", "/etc/*"])
def test_a_glob_leaving_the_world_is_refused(world: World, pattern: str) -> None:
    result = call(world, "glob_files", {"pattern": pattern})
    assert not result.ok and "refused" in result.error


@pytest.mark.parametrize("pattern", [".", "./", "./."])
def test_a_glob_naming_no_file_fails_as_a_tool_failure_not_a_crash(world: World, pattern: str) -> None:
    """Python 3.11's glob raised IndexError on a pattern of no parts; the tool crashed (found by hypothesis)."""
    result = call(world, "glob_files", {"pattern": pattern})
    assert not result.ok and "it names no file" in result.error, result


@pytest.mark.parametrize(("tool", "args"), [
    ("glob_files", {"pattern": "**/*"}),
    ("glob_files", {"pattern": "link_out/*"}),
    ("search_files", {"query": "secret"}),
    ("list_files", {}),
])
def test_listing_and_searching_never_show_what_a_symlink_reaches_outside(world: World, tool: str,
                                                                         args: dict[str, Any]) -> None:
    result = call(world, tool, args)
    assert result.ok, result.error
    assert "secret.txt" not in str(result.output) and SECRET.strip() not in str(result.output)


WRONG_TYPE = {"string": 12345, "integer": "12", "number": "1.5", "boolean": "yes", "array": "a,b", "object": "{}"}


def _cases(kind: str) -> list[tuple[str, str]]:
    cases = []
    for name, tool in sorted(REGISTRY.items()):
        properties = tool.schema["properties"]
        cases += [(name, argument) for argument in sorted(properties)
                  if kind == "type" or argument in tool.schema["required"]]
    return cases


@pytest.mark.parametrize(("tool", "argument"), _cases("missing"))
def test_a_missing_argument_fails_naming_it(world: World, tool: str, argument: str) -> None:
    result = call(world, tool, {})
    assert not result.ok and f"args.{argument} is required" in result.error, result.error


@pytest.mark.parametrize(("tool", "argument"), _cases("type"))
def test_an_argument_of_the_wrong_type_fails_naming_it(world: World, tool: str, argument: str) -> None:
    kind = REGISTRY[tool].schema["properties"][argument]["type"]
    result = call(world, tool, {argument: WRONG_TYPE[kind]})
    assert not result.ok and f"args.{argument} must be {kind}" in result.error, result.error


@pytest.mark.parametrize("tool", sorted(REGISTRY))
def test_an_unknown_argument_fails_naming_it(world: World, tool: str) -> None:
    result = call(world, tool, {"surprise": 1})
    assert not result.ok and "args.surprise is not an argument of this tool" in result.error, result.error


@pytest.mark.parametrize("tool", sorted(REGISTRY))
def test_every_tool_schema_is_a_closed_object(tool: str) -> None:
    schema = REGISTRY[tool].schema
    assert schema["type"] == "object" and schema["additionalProperties"] is False


ESCAPING_COMMANDS = {
    "cat /etc/passwd": "refused",
    "cat ../x": "refused",
    "cat secret_link": "refused",
    "cat link_out/secret.txt": "refused",
    "echo pwned > /tmp/killpoint-escape-test": "refused",
    "echo pwned >> ../x": "refused",
    "rm ../x": "refused",
    "ls ..": "refused",
    "mkdir link_out/new": "refused",
    "touch /tmp/killpoint-escape-test": "refused",
    "python3 -c 'open(\"/tmp/killpoint-escape-test\", \"w\")'": "unknown command",
    "sh -c 'echo pwned > /tmp/killpoint-escape-test'": "unknown command",
    "echo 'unterminated": "cannot parse",
}
RUNNERS = {
    "shell_execute": lambda command: {"command": command},
    "terminal_exec": lambda command: {"session": "1", "command": command},
    "code_runner": lambda command: {"code": command},
}


@pytest.mark.parametrize("runner", sorted(RUNNERS))
@pytest.mark.parametrize("command", sorted(ESCAPING_COMMANDS))
def test_the_confined_shell_cannot_touch_anything_outside_the_world(world: World, runner: str,
                                                                   command: str) -> None:
    before = outside_files(world)
    result = call(world, runner, RUNNERS[runner](command))
    assert not result.ok, f"{runner} ran {command!r}: {result.output!r}"
    assert ESCAPING_COMMANDS[command] in result.error, result.error
    assert outside_files(world) == before
    assert not Path("/tmp/killpoint-escape-test").exists()
    assert SECRET.strip() not in result.error


def test_code_runner_stops_at_the_first_refused_line(world: World) -> None:
    result = call(world, "code_runner", {"code": "echo ok > made.txt\ncat /etc/passwd\necho late > late.txt"})
    assert not result.ok and "refused" in result.error
    assert not (world.files_root / "late.txt").exists()


@pytest.mark.parametrize(("tool", "args", "message"), [
    ("calculate", {"expression": "__import__('os').system('true')"}, "not arithmetic"),
    ("calculate", {"expression": "1/0"}, "division by zero"),
    ("calculate", {"expression": "9**9**9"}, "power too large"),
    ("json_format", {"text": "{not json"}, "not JSON"),
    ("template", {"template": "{a} {b}", "values": {"a": 1}}, "placeholder(s) b"),
    ("alarm", {"time": "25:00"}, "not HH:MM"),
    ("ask_user_choice", {"question": "?", "choices": []}, "choices is empty"),
    ("data_analyzer", {}, "exactly one of numbers or path"),
    ("edit_file", {"path": "notes/todo.txt", "old": "tea", "new": "tea"}, "would change nothing"),
    ("terminal_exec", {"session": "9", "command": "ls"}, "no terminal session '9'"),
    ("github_read_file", {"repo": "octo/app", "path": "README.md"}, "no repository 'octo/app'"),
])
def test_a_refused_call_says_why(world: World, tool: str, args: dict[str, Any], message: str) -> None:
    result = call(world, tool, args)
    assert not result.ok and message in result.error, result.error


@pytest.mark.parametrize("tool", ["read_file", "write_file"])
def test_a_path_with_a_nul_byte_is_refused(world: World, tool: str) -> None:
    result = call(world, tool, {"path": "notes/\x00todo.txt", "content": "x"} if tool == "write_file"
                  else {"path": "notes/\x00todo.txt"})
    assert not result.ok and "refused" in result.error


@pytest.mark.parametrize(("tool", "args"), [
    ("shell_execute", {"command": "echo order submitted >> nodir/log.txt"}),
    ("code_runner", {"language": "sh", "code": "echo x >> nodir/f"}),
    ("append", {"path": "notes/todo.txt/inside", "text": "x"}),
])
def test_a_refusal_never_writes_the_host_path_into_the_world(tmp_path, tool, args):
    """The crash-free run and every killed run live in different folders: a logged absolute path made their
    worlds differ on every schedule (found by ``killpoint hunt``, seed 1, on the correct reference runtime)."""
    results, snapshots = [], []
    for run in ("golden", "run-00000"):
        world = seed_world(tmp_path / run / "world", {"notes/todo.txt": "tea\n"}, {})
        results.append(call(world, tool, args))
        snapshots.append(world.snapshot())
    assert not results[0].ok and results[0].error == results[1].error, results
    assert str(tmp_path) not in results[0].error
    assert snapshots[0] == snapshots[1]


# -- a world something else tampered with: hard links, swapped names, FIFOs (issue 14) ------------------------

@pytest.fixture
def deadline() -> Iterator[None]:
    """Fail a test that blocks (on a FIFO's open) instead of hanging the suite."""

    def hung(signum: int, frame: Any) -> None:
        raise TimeoutError("blocked for 10 s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def outside_state(world: World) -> dict[str, tuple[str, int]]:
    """What an outside file holds, and its mode: a tool must change neither."""
    outside = world.root.parent / "outside"
    return {path.name: (path.read_text(), path.stat().st_mode) for path in outside.iterdir()}


OPENS_THE_FILE: dict[str, tuple[str, dict[str, Any]]] = {
    "read_file": ("read_file", {"path": "linked.txt"}),
    "append": ("append", {"path": "linked.txt", "text": "pwned"}),
    "edit_file": ("edit_file", {"path": "linked.txt", "old": "secret", "new": "pwned"}),
    "copy": ("copy_move_file", {"source": "linked.txt", "destination": "stolen.txt"}),
    "move": ("copy_move_file", {"source": "linked.txt", "destination": "stolen.txt", "mode": "move"}),
    "data_analyzer": ("data_analyzer", {"path": "linked.txt"}),
    "cat": ("shell_execute", {"command": "cat linked.txt"}),
    "echo >>": ("shell_execute", {"command": "echo pwned >> linked.txt"}),
    "touch": ("shell_execute", {"command": "touch linked.txt"}),
    "code_runner >>": ("code_runner", {"code": "echo pwned >> linked.txt"}),
    "terminal >>": ("terminal_exec", {"session": "1", "command": "echo pwned >> linked.txt"}),
}


@pytest.mark.parametrize("case", sorted(OPENS_THE_FILE))
def test_a_hard_link_to_a_file_outside_the_world_is_never_opened(world: World, case: str) -> None:
    outside = world.root.parent / "outside" / "secret.txt"
    outside.chmod(0o600)
    os.link(outside, world.files_root / "linked.txt")
    before = outside_state(world)
    tool, args = OPENS_THE_FILE[case]
    result = call(world, tool, args)
    assert not result.ok, f"{case} opened the hard link: {result.output!r}"
    assert "'linked.txt' refused: it has 2 hard links" in result.error, result.error
    assert outside_state(world) == before
    assert SECRET.strip() not in result.error and SECRET.strip() not in json.dumps(world.snapshot())
    assert not (world.files_root / "stolen.txt").exists()


@pytest.mark.parametrize("tool", ["write_file", "shell_execute"])
def test_replacing_a_hard_linked_file_replaces_the_world_s_name_only(world: World, tool: str) -> None:
    os.link(world.root.parent / "outside" / "secret.txt", world.files_root / "linked.txt")
    before = outside_state(world)
    args = {"path": "linked.txt", "content": "new\n"} if tool == "write_file" else {"command": "echo new > linked.txt"}
    assert call(world, tool, args).ok
    assert (world.files_root / "linked.txt").read_text() == "new\n" and outside_state(world) == before


def test_searching_skips_a_hard_linked_file(world: World) -> None:
    os.link(world.root.parent / "outside" / "secret.txt", world.files_root / "linked.txt")
    result = call(world, "search_files", {"query": "secret"})
    assert result.ok and result.output == [], result.output


@pytest.mark.parametrize("area", ["shell", "file_history"])
def test_a_symlink_planted_where_the_world_saves_is_refused_not_written_through(world: World, area: str) -> None:
    """A kill mid-save leaves ``.AREA.json.tmp``, and the next save reuses it: it must not be a way out."""
    world.state_root.joinpath(f".{area}.json.tmp").symlink_to(world.root.parent / "outside" / "secret.txt")
    before = outside_state(world)
    result = call(world, "shell_execute" if area == "shell" else "append", {"command": "echo hi"}
                  if area == "shell" else {"path": "notes/todo.txt", "text": "more\n"})
    assert not result.ok and f"state/{area}.json (its temporary file)' refused: it is a symlink" in result.error
    assert outside_state(world) == before


def test_a_temporary_file_a_kill_left_is_replaced(world: World) -> None:
    world.state_root.joinpath(".shell.json.tmp").write_text("[{\"half")
    assert call(world, "shell_execute", {"command": "echo hi"}).ok
    assert not world.state_root.joinpath(".shell.json.tmp").exists()
    assert world.load("shell", None) == [{"command": "echo hi", "ref": "c1"}]


def test_a_state_file_swapped_for_a_symlink_out_is_not_read(world: World) -> None:
    (world.root.parent / "outside" / "shell.json").write_text('[{"command": "the secret", "ref": "c0"}]')
    world.state_root.joinpath("shell.json").symlink_to(world.root.parent / "outside" / "shell.json")
    result = call(world, "shell_execute", {"command": "echo hi"})
    assert not result.ok and "'state/shell.json' refused: it is a symlink" in result.error, result.error


@pytest.mark.parametrize("case", sorted(FILE_CALLS))
def test_a_files_folder_swapped_for_a_symlink_out_is_refused(world: World, case: str) -> None:
    """World.path compared resolved paths, and the outside folder then was ``files/`` resolved."""
    outside = world.root.parent / "outside"
    (outside / "notes").mkdir()
    (outside / "notes" / "todo.txt").write_text("secret\n")
    (outside / "inbox").mkdir()
    (outside / "inbox" / "a.txt").write_text("secret\n")
    world.files_root.rename(world.root / "files.moved")
    world.files_root.symlink_to(outside, target_is_directory=True)
    before = {str(path): path.read_bytes() for path in outside.rglob("*") if path.is_file()}
    path = "inbox" if case in ("file_organizer", "list_files", "search_files") else "notes/todo.txt"
    call(world, case.split(" ")[0], FILE_CALLS[case](path))
    assert {str(path): path.read_bytes() for path in outside.rglob("*") if path.is_file()} == before
    assert sorted(path.name for path in outside.iterdir()) == ["inbox", "notes", "secret.txt"]


@pytest.mark.parametrize("case", ["read_file", "append", "cat", "echo >>", "touch", "data_analyzer"])
def test_a_fifo_in_the_world_is_refused_at_once(world: World, case: str, deadline: None) -> None:
    """Opening a FIFO blocks until a writer (or reader) comes; the tools once hung there (append, ``>>``, touch)."""
    os.mkfifo(world.files_root / "linked.txt")
    tool, args = OPENS_THE_FILE[case]
    result = call(world, tool, args)
    assert not result.ok and ("'linked.txt' refused: it is a FIFO" in result.error
                              or "no file 'linked.txt'" in result.error), result.error


def test_a_huge_file_is_refused_not_read(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(world_module, "TOOL_READ_LIMIT", 1000)
    with open(world.files_root / "linked.txt", "wb") as sparse:
        sparse.truncate(5000)
    result = call(world, "read_file", {"path": "linked.txt"})
    assert not result.ok and "holds 5000 bytes, over the 1000-byte limit" in result.error, result.error


# -- the snapshot the harness takes as root: never follows, never blocks, bounded --------------------------

def test_the_snapshot_names_what_it_would_not_read(world: World, deadline: None) -> None:
    files = world.files_root
    os.mkfifo(files / "pipe")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(files / "sock"))
    os.link(world.root.parent / "outside" / "secret.txt", files / "linked.txt")
    (files / "bad-\udcff-name.txt").write_text("x")
    snapshot = world.snapshot()
    assert snapshot["files/pipe"] == "a FIFO: not a regular file, not read"
    assert snapshot["files/sock"] == "a socket: not a regular file, not read"
    assert snapshot["files/linked.txt"].startswith("a file with 2 hard links: not read")
    assert snapshot["files/link_out"] == f"symlink -> {world.root.parent / 'outside'}"
    assert snapshot["files/bad-\\xff-name.txt"] == "x"
    assert SECRET.strip() not in json.dumps(snapshot)
    assert not any(key.startswith("files/link_out/") for key in snapshot), "a symlinked folder was walked"


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_the_snapshot_never_opens_a_device(world: World, deadline: None) -> None:
    os.mknod(world.files_root / "zero", 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    assert world.snapshot()["files/zero"] == "a character device: not a regular file, not read"


def test_the_snapshot_streams_a_large_file_and_records_a_huge_one_by_size(world: World,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(world_module, "SNAPSHOT_TEXT_LIMIT", 10)
    monkeypatch.setattr(world_module, "SNAPSHOT_HASH_LIMIT", 100)
    (world.files_root / "large.txt").write_text("x" * 50)
    with open(world.files_root / "huge.bin", "wb") as sparse:
        sparse.truncate(500 * 1024 * 1024)
    snapshot = world.snapshot()
    assert snapshot["files/large.txt"] == "sha256:" + hashlib.sha256(b"x" * 50).hexdigest()
    assert snapshot["files/huge.bin"] == "a file of 524288000 bytes, over the snapshot's 100-byte limit: not read"


def test_the_snapshot_stops_at_its_entry_and_depth_limits(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(world_module, "SNAPSHOT_DEPTH", 3)
    (world.files_root / "a" / "b" / "c" / "d").mkdir(parents=True)
    snapshot = world.snapshot()
    assert snapshot["files/a/b/"] == "" and snapshot["files/a/b/c/"] == "not listed: deeper than 3 folders"
    assert "files/a/b/c/d/" not in snapshot
    monkeypatch.setattr(world_module, "SNAPSHOT_ENTRIES", 5)
    for number in range(20):
        (world.files_root / f"many-{number}").write_text("")
    snapshot = world.snapshot()
    assert len(snapshot) <= 6 and "listing stopped: the world holds more than 5 entries or" in snapshot["files/"]


@pytest.mark.parametrize("planted", ["notes/todo.txt", "notes/.todo.txt.tmp"])
def test_seeding_never_writes_through_a_planted_symlink(tmp_path: Path, planted: str) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text(SECRET)
    (tmp_path / "world" / "files" / "notes").mkdir(parents=True)
    (tmp_path / "world" / "files" / planted).symlink_to(outside)
    with pytest.raises(SandboxError, match="refused"):
        seed_world(tmp_path / "world", {"notes/todo.txt": "tea\n"}, {})
    assert outside.read_text() == SECRET


def test_a_long_changed_entry_is_summarised_not_diffed() -> None:
    """difflib is quadratic at worst: two different 1 MB texts of short lines must not stall the checker."""
    lines = diff_snapshots({"files/f": "a\n" * 3000}, {"files/f": "b\n" * 3000})
    assert lines == ["changed files/f:", "    3000 lines expected, 3000 lines found: too long to compare line by line"]
