"""Seeded fake worlds and argument strategies that make calls of the 96 fake tools valid.

Shared by ``killpoint certify`` (which certifies the fake catalogue) and the
fake tools' own replay tests, so both draw the same calls. Each family gets a
starting world; a tool's arguments come from its schema, except those that
must name something in that world (a file, a package, a session), which are
drawn from the world (``OVERRIDES``), and calls whose arguments must agree
with each other, which are drawn whole (``WHOLE``).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from killpoint.fake_tools.base import REGISTRY, lookup
from killpoint.harness.certify.strategies import TEXTS, WORDS, args_for, one

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


COMMANDS = st.sampled_from(["echo hi", "ls", "cat notes/todo.txt", "mkdir made", "echo x >> notes/log.txt",
                            "touch t.txt", "echo 'a b' > out.txt"])

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


def arguments(tool: str) -> st.SearchStrategy[dict[str, Any]]:
    """Valid arguments for fake tool ``tool`` in its family's seeded world."""
    return WHOLE[tool] if tool in WHOLE else args_for(REGISTRY[tool].schema, **OVERRIDES.get(tool, {}))


def world_of(family: str) -> tuple[dict[str, str], dict[str, Any]]:
    """(files, service states) of the seeded world for ``family``; an unknown family gets an empty world."""
    return WORLDS.get(family, WORLDS["empty"])
