"""Bad input never escapes the world or crashes a tool: it is a FAILED call with a message that says why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fake_tools.base import REGISTRY, ToolResult, invoke, lookup
from fake_tools.ledger import Ledger
from fake_tools.world import World, seed_world

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
