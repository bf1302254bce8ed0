"""Every fake tool replays as its catalogue class says, on real world state, and its probe tells the truth.

For each family a seeded starting world makes the generated calls valid; each
tool has a small hypothesis strategy (derived from its schema, with the
arguments that must name something in the world drawn from that world). The
class of a tool comes from the reference catalogue, never from the tool.
"""

from __future__ import annotations

import json
import string
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fake_tools.base import REGISTRY, invoke, lookup, verify
from fake_tools.catalogue import REFERENCE_CATALOGUE, load_catalogue
from fake_tools.ledger import Ledger
from fake_tools.world import World, diff_snapshots, seed_world
from harness import protocol as p
from harness.client import read_json_lines

CATALOGUE = load_catalogue(REFERENCE_CATALOGUE)
lookup("read_file")  # registers every family

SHOP, ORDER = "https://shop.test/", "https://shop.test/order"
WORLDS: dict[str, tuple[dict[str, str], dict[str, Any]]] = {
    "file": ({"notes/todo.txt": "tea tea tea\nmilk\n", "notes/readme.md": "# Notes\r\nsee todo\n",
              "inbox/a.txt": "a\n", "inbox/b.md": "b\n", "inbox/c": "c\n", "data/numbers.csv": "1,2,3\n4.5\n"},
             {"web": {"pages": {"https://example.test/tea": {"title": "Tea", "body": "green tea\n"}}}}),
    "shell": ({"notes/todo.txt": "tea\n"},
              {"screen": {"buttons": {"submit": {"submits": "form"}}, "form": {"item": "tea"}},
               "settings": {"system": {"font_scale": "1.0"}}, "clipboard": {"text": "old", "history": []},
               "logcat": {"lines": [{"tag": "Wifi", "message": "connected"}]},
               "notifications": {"items": [{"app": "chat", "text": "hi"}]}}),
    "app": ({}, {"apps": {"store": {"com.notes": {"label": "Notes", "version": "2.0"},
                                    "com.maps": {"label": "Maps", "version": "5.1"},
                                    "com.chat": {"label": "Chat", "version": "1.2"}},
                          "installed": {"com.notes": {"label": "Notes", "version": "1.0"},
                                        "com.maps": {"label": "Maps", "version": "5.1"}},
                          "running": {"com.notes": {"draft": "buy milk"}}, "foreground": "com.notes"}}),
    "ui": ({}, {"screen": {"buttons": {"submit": {"submits": "form"}, "cancel": {}},
                           "form": {"item": "tea", "quantity": 2}}}),
    "device": ({"photo.jpg": "x" * 100}, {"display": {"brightness": 128}, "alarms": {"alarms": []}}),
    "web": ({}, {"web": {"pages": {"https://example.test/": {"title": "Example", "body": "hello tea"},
                                   "https://example.test/about": {"title": "About", "body": "about us"}},
                         "collections": {"https://api.example.test/orders": [{"id": 1, "ref": "seed", "body": {}}]}}}),
    "memory": ({}, {"memory": {"episodes": [{"summary": "ordered tea"}, {"summary": "set alarm"}],
                               "nodes": [{"name": "tea", "observations": ["green"]}],
                               "macros": {"morning": ["open app", "read news"]}}}),
    "skill": ({}, {"skills": {"installed": {"summarise": {"description": "summarise a text", "body": "...",
                                                          "source": "local"},
                                            "translate": {"description": "old", "body": "v1", "source": "registry"}},
                              "registry": {"translate": {"description": "translate a text", "body": "v2"},
                                           "weather": {"description": "read the weather", "body": "w"}}}}),
    "mcp": ({}, {"mcp": {"servers": {
        "notes": {"connected": True, "tools": {"list_notes": "read", "add_note": "create"},
                  "items": [{"title": "first"}]},
        "calendar": {"connected": False, "tools": {"list_events": "read"}, "items": []}}}}),
    "user": ({}, {"user": {"answers": {"Tea or coffee?": "tea"}, "default_answer": "yes"}}),
    "terminal": ({"notes/todo.txt": "tea\n"},
                 {"terminal": {"sessions": {"1": {"open": True, "foreground": None, "history": []},
                                            "2": {"open": True, "foreground": "top", "history": []}}}}),
    "browser": ({"photos/cat.jpg": "meow"}, {"browser": {
        "sites": {SHOP: {"title": "Shop", "text": "welcome", "links": {"order": ORDER}},
                  ORDER: {"title": "Order", "text": "order tea", "links": {"home": SHOP},
                          "buttons": {"submit": {"submits": True}, "invoice": {"downloads": "invoice.pdf"}},
                          "fields": {"name": {"type": "text"}, "date": {"type": "date"},
                                     "size": {"type": "select", "options": ["S", "M", "L"], "value": "M"},
                                     "gift": {"type": "checkbox"}, "photo": {"type": "file"}}}},
        "page": {"url": ORDER, "scroll": 0, "fields": {"name": "", "date": "", "size": "M", "gift": False,
                                                       "photo": ""}},
        "history": [SHOP, ORDER], "network": [{"method": "GET", "url": ORDER, "status": 200}]}}),
    "empty": ({}, {}),
    "github": ({}, {"github": {"user": {"login": "octo", "name": "Octo"}, "repos": {"octo/app": {
        "default_branch": "main", "issues": [{"number": 1, "title": "bug", "state": "open"}],
        "branches": {"main": {"README.md": "# app\n", "src/app.py": "print('tea')\n"},
                     "dev": {"README.md": "dev"}}}}}}),
}

WORDS = st.text(string.ascii_letters + string.digits + " _-", min_size=1, max_size=12)
CHARACTERS = st.characters(codec="utf-8", exclude_categories=("Cs",))
TEXTS = st.text(CHARACTERS, max_size=40)
COMMANDS = st.sampled_from(["echo hi", "ls", "cat notes/todo.txt", "mkdir made", "echo x >> notes/log.txt",
                            "touch t.txt", "echo 'a b' > out.txt"])


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid under one property schema of the fake_tools.schema subset."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        return st.text(CHARACTERS,
                       min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 30), 30))
    if kind == "integer":
        return st.integers(schema.get("minimum", -1000), schema.get("maximum", 1000))
    if kind == "number":
        return st.floats(-1e6, 1e6, allow_nan=False) | st.integers(-1000, 1000)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {"type": "string"})), max_size=4)
    if kind == "object" and "properties" not in schema:
        return st.dictionaries(WORDS, WORDS, max_size=3)
    return args_for(schema)


def args_for(schema: dict[str, Any], **overrides: st.SearchStrategy[Any] | None) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for an object schema; an override replaces a property's strategy, ``None`` leaves it out."""
    required, optional = {}, {}
    for name, spec in schema["properties"].items():
        strategy = overrides.get(name, from_schema(spec))
        if strategy is not None:
            (required if name in schema["required"] else optional)[name] = strategy
    return st.fixed_dictionaries(required, optional=optional)


def one(*values: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(values)


FILES = one(*WORLDS["file"][0])
FOLDERS = one(".", "notes", "inbox", "data")
HHMM = st.builds("{:02d}:{:02d}".format, st.integers(0, 23), st.integers(0, 59))
JSON_TEXT = st.recursive(st.none() | st.booleans() | st.integers() | WORDS,
                         lambda inner: st.lists(inner, max_size=3) | st.dictionaries(WORDS, inner, max_size=3),
                         max_leaves=8).map(json.dumps)
ARITHMETIC = st.builds("{} {} {}".format, st.integers(-99, 99), one("+", "-", "*", "/", "//", "%", "**"),
                       st.integers(1, 9))
OVERRIDES: dict[str, dict[str, st.SearchStrategy[Any] | None]] = {
    "read_file": {"path": FILES}, "list_files": {"path": FOLDERS}, "search_files": {"path": FOLDERS},
    "glob_files": {"pattern": one("*", "**/*.txt", "notes/*", "*/*.md", "data")},
    "write_file": {"path": FILES | one("out/new.txt")},
    "append": {"path": FILES | one("out/log.txt")},
    "edit_file": {"path": one("notes/todo.txt"), "old": one("tea"), "new": TEXTS.filter(lambda text: text != "tea")},
    "delete_file": {"path": FILES}, "create_directory": {"path": one("new", "notes/sub/deeper", "notes")},
    "copy_move_file": {"source": FILES, "destination": one("backup/x.txt", "notes", "inbox/a.txt")},
    "file_organizer": {"path": one("inbox", "notes")},
    "download_file": {"url": one("https://example.test/tea"), "path": one("dl/tea.txt", "notes/todo.txt")},
    "json_format": {"text": JSON_TEXT},
    "code_runner": {"code": st.lists(COMMANDS, min_size=1, max_size=3).map("\n".join)},
    "shell_execute": {"command": COMMANDS}, "calculate": {"expression": ARITHMETIC},
    "get_set_settings": {"value": WORDS},
    "app_install": {"package": one("com.notes", "com.maps", "com.chat")},
    **{tool: {"package": one("com.notes", "com.maps")} for tool in ("app_info", "app_uninstall", "app_launch",
                                                                 "app_force_stop")},
    "ui_tap": {"target": one("submit")}, "input_text": {"field": one("item", "quantity")},
    "alarm": {"time": HHMM}, "music": {"track": one("Morning", "Commute", "Focus")},
    "web_fetch": {"url": one("https://example.test/", "https://example.test/about")},
    "memory_recall_macro": {"name": one("morning")},
    "skill_install": {"name": one("translate", "weather")}, "skill_uninstall": {"name": one("summarise", "translate")},
    "mcp_connect": {"server": one("notes", "calendar")},
    "mcp_call": {"server": one("notes"), "tool": one("list_notes", "add_note")},
    "terminal_read": {"session": one("1", "2")}, "terminal_exec": {"session": one("1"), "command": COMMANDS},
    "terminal_signal": {"session": one("1", "2")}, "terminal_close": {"session": one("1", "2")},
    "browser_navigate": {"url": one(SHOP, ORDER)}, "browser_click": {"element": one("submit", "invoice")},
    "browser_input": {"field": one("name")},
    "browser_date_input": {"field": one("date"), "date": st.dates().map(lambda day: day.isoformat())},
    "browser_select": {"field": one("size"), "option": one("S", "M", "L")}, "browser_toggle": {"field": one("gift")},
    "browser_file_upload": {"field": one("photo"), "path": one("photos/cat.jpg")},
    **{tool: {"repo": one("octo/app")} for tool in ("github_list_issues", "github_search_code",
                                                     "github_create_issue")},
    "github_read_file": {"repo": one("octo/app"), "path": one("README.md"), "branch": one("main", "dev")},
    "github_write_file": {"repo": one("octo/app"), "path": one("README.md", "docs/new.md"),
                          "branch": one("main", "dev")},
}
# Calls whose arguments must agree with each other, drawn whole.
WHOLE: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "terminal_send": st.fixed_dictionaries({"session": one("1"), "text": COMMANDS})
    | st.fixed_dictionaries({"session": one("2"), "text": WORDS}),
    "http_request": st.fixed_dictionaries({"method": one("GET"), "url": one("https://example.test/",
                                                                            "https://api.example.test/orders")})
    | st.fixed_dictionaries({"method": one("POST"), "url": one("https://api.example.test/orders")},
                            optional={"body": st.dictionaries(WORDS, WORDS, max_size=3)}),
    "ask_user_choice": st.fixed_dictionaries({"question": one("Tea or coffee?") | WORDS,
                                              "choices": st.lists(WORDS, min_size=1, max_size=4)}),
}
FINITE = st.floats(-1e9, 1e9, allow_nan=False) | st.integers(-10**6, 10**6)
WHOLE.update({
    "data_analyzer": st.fixed_dictionaries({"path": one("data/numbers.csv")})
    | st.fixed_dictionaries({"numbers": st.lists(FINITE, min_size=1, max_size=6)}),
    "template": st.fixed_dictionaries({"template": one("Dear {name},", "{a}{b}", "no placeholder"),
                                       "values": st.fixed_dictionaries({"name": WORDS, "a": WORDS, "b": WORDS})}),
    "clipboard": st.fixed_dictionaries({"action": one("set"), "text": TEXTS}),
    "copy_move_file": args_for(REGISTRY["copy_move_file"].schema, **OVERRIDES["copy_move_file"]).filter(
        lambda args: args.get("mode") != "move" or args["source"] != args["destination"]),
})
# Read modes of tools whose catalogue class is about their write mode.
READ_MODES: dict[str, dict[str, Any]] = {
    "clipboard": {"action": "get"},
    "get_set_settings": {"key": "font_scale"},
    "http_request": {"method": "GET", "url": "https://example.test/"},
    "mcp_call": {"server": "notes", "tool": "list_notes"},
}
# UNKNOWN tools that change the world only for some arguments.
WRITES_WHEN: dict[str, Callable[[dict[str, Any]], bool]] = {
    "http_request": lambda args: args["method"] == "POST",
    "mcp_call": lambda args: args["tool"] == "add_note",
}


def arguments(tool: str) -> st.SearchStrategy[dict[str, Any]]:
    return WHOLE[tool] if tool in WHOLE else args_for(REGISTRY[tool].schema, **OVERRIDES.get(tool, {}))


def tools_of(family: str) -> list[str]:
    return sorted(tool for tool, tool_family in CATALOGUE.families.items() if tool_family == family)


class Bench:
    """A freshly seeded world for one family and a real ledger beside it."""

    def __init__(self, root: Path, family: str) -> None:
        files, state = WORLDS[family]
        self.world: World = seed_world(root / "world", files, state)
        self.ledger_path = root / "ledger.jsonl"
        self.ledger = Ledger(self.ledger_path, incarnation=0)

    def call(self, tool: str, args: dict[str, Any], call: str = "c1") -> Any:
        return invoke(tool, call, args, world=self.world, ledger=self.ledger)

    def probe(self, tool: str, args: dict[str, Any], call: str = "c1") -> bool:
        return verify(tool, call, args, world=self.world, ledger=self.ledger)

    def effects(self) -> int:
        records, _ = read_json_lines(self.ledger_path)
        return sum("effect" in record for record in records)


@contextmanager
def bench(family: str) -> Iterator[Bench]:
    with tempfile.TemporaryDirectory() as folder:
        seeded = Bench(Path(folder), family)
        try:
            yield seeded
        finally:
            seeded.ledger.close()


def check_replay(family: str, tool: str, args: dict[str, Any]) -> None:
    """The class-specific replay property of ``tool`` on ``args``, judged on world snapshots."""
    tool_class = CATALOGUE.class_of(tool)
    with bench(family) as seeded:
        before = seeded.world.snapshot()
        first = seeded.call(tool, args)
        assert first.ok, f"valid call refused: {first.error}"
        once, effects = seeded.world.snapshot(), seeded.effects()
        if once != before:
            assert effects, f"{tool} changed the world without an effect record: {diff_snapshots(before, once)}"
        second = seeded.call(tool, args)
        twice = seeded.world.snapshot()
        if tool_class == p.READ_ONLY or CATALOGUE.is_interactive(tool):
            assert once == before == twice and seeded.effects() == 0, diff_snapshots(before, twice)
        elif tool_class == p.IDEMPOTENT_WRITE:
            assert second.ok, second.error
            assert twice == once, diff_snapshots(once, twice)
        elif tool_class == p.NON_IDEMPOTENT:
            assert once != before, f"{tool} changed nothing"
            assert twice != once, f"a replay of {tool} left the world as one call did"
        else:
            assert (once != before) == WRITES_WHEN.get(tool, lambda _: True)(args), diff_snapshots(before, once)


def _replay_test(family: str) -> Callable[..., None]:
    @pytest.mark.parametrize("tool", tools_of(family))
    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def test(tool: str, data: st.DataObject) -> None:
        check_replay(family, tool, data.draw(arguments(tool), label="args"))

    test.__doc__ = f"Every {family!r} tool replays as its catalogue class says."
    return test


# One property test per family (test_replay_file, test_replay_shell, ...), each parametrized over its tools.
for _family in sorted(set(CATALOGUE.families.values())):
    globals()[f"test_replay_{_family}"] = _replay_test(_family)


def test_every_catalogue_tool_is_a_registered_fake_tool_of_its_family() -> None:
    registered = {name: tool.family for name, tool in REGISTRY.items()}
    assert len(CATALOGUE.tools) == 96
    assert registered == CATALOGUE.families


@pytest.mark.parametrize("tool", sorted(READ_MODES))
def test_read_mode_of_a_writing_tool_changes_nothing(tool: str) -> None:
    with bench(CATALOGUE.families[tool]) as seeded:
        before = seeded.world.snapshot()
        result = seeded.call(tool, READ_MODES[tool])
        assert result.ok, result.error
        assert seeded.world.snapshot() == before and seeded.effects() == 0
        assert seeded.probe(tool, READ_MODES[tool]) is False


WORLD_CHANGING = [tool for tool in sorted(CATALOGUE.tools)
                  if CATALOGUE.class_of(tool) != p.READ_ONLY and not CATALOGUE.is_interactive(tool)]
# ``append`` judges from the file's content, which cannot tell two calls apart.
CONTENT_PROBES = {"append"}


@pytest.mark.parametrize("tool", WORLD_CHANGING)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_probe_sees_the_effect_only_after_the_call(tool: str, data: st.DataObject) -> None:
    """Probe False before, True after (and after a replay) for every call that changes the world; probes only read."""
    args = data.draw(arguments(tool), label="args")
    with bench(CATALOGUE.families[tool]) as seeded:
        before = seeded.world.snapshot()
        present_before = seeded.probe(tool, args)
        assert seeded.world.snapshot() == before, "the probe changed the world"
        assert seeded.call(tool, args).ok
        if seeded.world.snapshot() == before:
            return  # a put of the value already there, or a read: nothing for a probe to find
        assert present_before is False
        assert seeded.probe(tool, args) is True
        if CATALOGUE.class_of(tool) != p.IDEMPOTENT_WRITE and tool not in CONTENT_PROBES:
            assert seeded.probe(tool, args, call="another") is False, "the probe mistook another call's effect"
        if CATALOGUE.class_of(tool) == p.NON_IDEMPOTENT:
            seeded.call(tool, args)
            assert seeded.probe(tool, args) is True, "after a replay the effect is there all the same"


@pytest.mark.parametrize("tool", sorted(CATALOGUE.tools))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_tool_crashes_on_any_schema_valid_call(tool: str, data: st.DataObject) -> None:
    """Arguments the schema accepts but the world may not (unknown names, odd text), in an empty or a seeded world:
    the call works or FAILS with a message, and its probe answers; nothing raises into the runtime."""
    args = data.draw(args_for(REGISTRY[tool].schema) | arguments(tool), label="args")
    family = data.draw(st.sampled_from([CATALOGUE.families[tool], "empty"]), label="world")
    with bench(family) as seeded:
        result = seeded.call(tool, args)
        assert result.ok or (result.error and result.error.startswith(f"{tool}: ")), result
        assert isinstance(seeded.probe(tool, args), bool)
        json.dumps(result.output)  # a workload journals or prints what a tool returns


class Killed(BaseException):
    """Stands for a SIGKILL inside the tool: nothing after it runs (not an Exception, so nothing catches it)."""


def _kill_on(call_number: int, real: Callable[..., Any]) -> Callable[..., Any]:
    calls = {"count": 0}

    def maybe_kill(*args: Any, **kwargs: Any) -> Any:
        calls["count"] += 1
        if calls["count"] == call_number:
            raise Killed
        return real(*args, **kwargs)

    return maybe_kill


@pytest.mark.parametrize(("tool", "args", "target", "nth"), [
    ("edit_file", {"path": "notes/todo.txt", "old": "tea", "new": "coffee"}, "write_atomically", 1),
    ("delete_file", {"path": "inbox/a.txt"}, "unlink", 1),
    ("copy_move_file", {"source": "inbox/a.txt", "destination": "backup/a.txt"}, "write_atomically", 1),
    ("copy_move_file", {"source": "inbox/a.txt", "destination": "inbox/b.md", "mode": "move"}, "replace", 1),
    ("file_organizer", {"path": "inbox"}, "replace", 1),
    ("file_organizer", {"path": "inbox"}, "replace", 2),
])
def test_a_file_change_cut_after_its_log_reads_as_not_done_and_a_redo_converges(
        tool: str, args: dict[str, Any], target: str, nth: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file history is written before the files: a kill in between must not make a redo double the change."""
    from fake_tools.tools import files

    with bench("file") as golden:
        assert golden.call(tool, args).ok
        expected = golden.world.snapshot()
    with bench("file") as crashed:
        with monkeypatch.context() as patch:
            if target == "unlink":
                patch.setattr(Path, "unlink", _kill_on(nth, Path.unlink))
            elif target == "replace":
                patch.setattr(files.os, "replace", _kill_on(nth, files.os.replace))
            else:
                patch.setattr(files, target, _kill_on(nth, getattr(files, target)))
            with pytest.raises(Killed):
                crashed.call(tool, args)
        assert crashed.world.snapshot() != expected
        assert crashed.probe(tool, args) is False, "the probe believed a logged change the files do not show"
        assert crashed.call(tool, args).ok
        assert crashed.probe(tool, args) is True
        assert crashed.world.snapshot() == expected, diff_snapshots(expected, crashed.world.snapshot())
