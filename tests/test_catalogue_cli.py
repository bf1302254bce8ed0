"""``killpoint catalogue``: the table and its filters, ``check`` with every problem and its line,
and ``from-mcp`` mapping MCP annotations to classes (each hint combination, the envelopes, bad input)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from killpoint.catalogue import REFERENCE_CATALOGUE, catalogue_problems, load_catalogue
from killpoint.harness.frontends._command import killpoint_command
from killpoint.harness.frontends.catalogue_cli import classify

REFERENCE_CLASSES = Counter(load_catalogue(REFERENCE_CATALOGUE).tools.values())


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def rows(out: str) -> list[list[str]]:
    """The table's data rows, split into (tool, class, family, why...)."""
    lines = out.strip().splitlines()
    assert lines[0].split() == ["tool", "class", "family", "why"]
    return [line.split() for line in lines[1:-1]]


def assert_usage_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.out + result.err
    assert "Traceback" not in result.out + result.err
    for fragment in fragments:
        assert fragment in result.err, result.err


# -- printing ------------------------------------------------------------------


def test_prints_the_reference_catalogue_as_a_table(killpoint):
    result = killpoint("catalogue")
    assert result.exit_code == 0, result.err
    table = rows(result.out)
    assert len(table) == 96
    assert table[0][:3] == ["read_file", "READ_ONLY", "file"] and " ".join(table[0][3:]) == "reads a file"
    assert result.out.strip().splitlines()[-1] == (
        "96 of 96 tools in the reference catalogue (fake_tools/catalogue.toml); a tool not listed is UNKNOWN; "
        "asked again when interrupted: ask_user, ask_user_choice")


def test_prints_each_fake_tools_arguments_from_its_schema(killpoint):
    """The fake tools' arguments were documented nowhere; a runtime calling them by command line needs them."""
    result = killpoint("catalogue", "args")
    assert result.exit_code == 0, result.err
    lines = result.out.splitlines()
    assert len(lines) == 96
    assert "write_file path: string (1..200 chars), content: string (..4096 chars)" in [
        " ".join(line.split()) for line in lines]
    one = killpoint("catalogue", "args", "browser_scroll", "app_list")
    assert one.out.split("\n")[:2] == ["browser_scroll  dy: integer (-10000..10000)",
                                        "app_list        (no arguments)"], one.out
    assert_usage_error(killpoint("catalogue", "args", "raed_file"), "'raed_file' is no fake tool")


@pytest.mark.parametrize("tool_class", ["READ_ONLY", "IDEMPOTENT_WRITE", "NON_IDEMPOTENT", "UNKNOWN"])
def test_class_filter(killpoint, tool_class):
    result = killpoint("catalogue", "--class", tool_class.lower())
    table = rows(result.out)
    assert len(table) == REFERENCE_CLASSES[tool_class] and {row[1] for row in table} == {tool_class}
    assert f"{len(table)} of 96 tools (class {tool_class})" in result.out


def test_family_and_class_filters_combine(killpoint):
    result = killpoint("catalogue", "--family", "github", "--class", "READ_ONLY")
    assert [row[0] for row in rows(result.out)] == [
        "github_get_user", "github_list_repos", "github_list_issues", "github_read_file", "github_search_code"]
    assert "5 of 96 tools (class READ_ONLY, family github)" in result.out


def test_unknown_family_names_the_families_there_are(killpoint):
    assert_usage_error(killpoint("catalogue", "--family", "fax"),
                       "--family 'fax': no tool of the reference catalogue",
                       "its families are app, browser, device, file, github, mcp, memory, shell, skill, terminal, ui, user, web")


def test_unknown_class_is_a_usage_error(killpoint):
    result = killpoint("catalogue", "--class", "MOSTLY_HARMLESS")
    assert result.exit_code == 2 and "invalid choice: 'MOSTLY_HARMLESS'" in result.err


def test_prints_a_users_toml_and_a_protocol_json_catalogue(killpoint, tmp_path):
    toml = write(tmp_path, "mine.toml", 'default = "NON_IDEMPOTENT"\n[tools]\nlookup = { class = "READ_ONLY", family = "crm" }\n')
    result = killpoint("catalogue", "--file", toml)
    assert rows(result.out) == [["lookup", "READ_ONLY", "crm"]]
    assert f"1 of 1 tools in {toml}; a tool not listed is NON_IDEMPOTENT; asked again when interrupted: none" in result.out
    protocol_json = write(tmp_path, "mine.json", json.dumps({"default": "UNKNOWN", "interactive": ["ask"],
                                                             "tools": {"ask": "NON_IDEMPOTENT", "get": "READ_ONLY"}}))
    result = killpoint("catalogue", "--file", protocol_json)
    assert rows(result.out) == [["ask", "NON_IDEMPOTENT"], ["get", "READ_ONLY"]]
    assert "asked again when interrupted: ask" in result.out


def test_printing_a_missing_file_is_a_usage_error(killpoint, tmp_path):
    assert_usage_error(killpoint("catalogue", "--file", tmp_path / "none.toml"),
                       "none.toml: cannot read the catalogue (No such file or directory)")


# -- check ---------------------------------------------------------------------


def test_check_accepts_the_reference_catalogue(killpoint):
    result = killpoint("catalogue", "check", REFERENCE_CATALOGUE)
    assert result.exit_code == 0, result.err
    assert result.out == f"ok: 96 tools in {REFERENCE_CATALOGUE}; a tool not listed is UNKNOWN\n"


BROKEN = """\
default = "SOMETIMES"
interactive = ["ask_user"]
colour = "blue"

[tools]
read_file  = { class = "READ_ONLY", family = "file", why = "reads" }

write_file = { class = "IDEMPOTENT", family = "file" }
read_file  = { class = "READ_ONLY" }
tap        = { class = "NON_IDEMPOTENT", colour = "red" }
tap        = { class = "MAYBE" }
"""


def test_check_reports_every_problem_at_once_with_its_line(killpoint, tmp_path):
    path = write(tmp_path, "broken.toml", BROKEN)
    result = killpoint("catalogue", "check", path)
    assert_usage_error(result, f"{path}: the catalogue has 7 problem(s); fix them and run again")
    problems = [line.removeprefix("  - ") for line in result.err.splitlines()[1:]]
    assert problems == [
        f"{path}:1: default: unknown class 'SOMETIMES'; use one of READ_ONLY, IDEMPOTENT_WRITE, NON_IDEMPOTENT, UNKNOWN",
        f"{path}:3: unknown key 'colour'; a catalogue has default, interactive, tools",
        f"{path}:8: tool 'write_file': unknown class 'IDEMPOTENT'; use one of READ_ONLY, IDEMPOTENT_WRITE, "
        f"NON_IDEMPOTENT, UNKNOWN",
        f"{path}:9: tool 'read_file' listed twice (first at line 6); keep one",
        f"{path}:10: tool 'tap': unknown key 'colour'; a tool has class, family, why",
        f"{path}:11: tool 'tap' listed twice (first at line 10); keep one",
        f"{path}:11: tool 'tap': unknown class 'MAYBE'; use one of READ_ONLY, IDEMPOTENT_WRITE, NON_IDEMPOTENT, UNKNOWN",
    ]


def test_line_numbers_skip_blank_lines_before_a_tool(tmp_path):
    text = '[tools]\n\n\n# files\n\nedit = { class = "SOMETIMES" }\n'
    assert catalogue_problems(Path("c.toml"), text) == [
        "c.toml:6: tool 'edit': unknown class 'SOMETIMES'; use one of READ_ONLY, IDEMPOTENT_WRITE, NON_IDEMPOTENT, UNKNOWN"]


def test_check_rejects_toml_that_does_not_parse(killpoint, tmp_path):
    path = write(tmp_path, "c.toml", "[tools]\nread_file = { class = \n")
    assert_usage_error(killpoint("catalogue", "check", path), f"{path}: not valid TOML")


def test_check_a_protocol_json_catalogue(killpoint, tmp_path):
    good = write(tmp_path, "good.json", json.dumps({"tools": {"get": "READ_ONLY"}}))
    assert killpoint("catalogue", "check", good).out == f"ok: 1 tools in {good}; a tool not listed is UNKNOWN\n"
    bad = write(tmp_path, "bad.json", json.dumps({"default": "NEVER", "tools": {"get": "READ_MOSTLY"}}))
    assert_usage_error(killpoint("catalogue", "check", bad), "2 problem(s)", "unknown class 'READ_MOSTLY'",
                       "default: unknown class 'NEVER'")


def test_check_a_missing_file(killpoint, tmp_path):
    assert_usage_error(killpoint("catalogue", "check", tmp_path / "gone.toml"), "gone.toml: cannot read the catalogue")


# -- from-mcp ------------------------------------------------------------------

NO_ANNOTATIONS = object()


@pytest.mark.parametrize(("annotations", "tool_class", "why"), [
    ({"readOnlyHint": True}, "READ_ONLY", "readOnlyHint: true"),
    ({"readOnlyHint": True, "idempotentHint": True}, "READ_ONLY", "readOnlyHint: true"),
    ({"readOnlyHint": True, "destructiveHint": True}, "READ_ONLY", "readOnlyHint: true"),
    ({"idempotentHint": True}, "IDEMPOTENT_WRITE", "idempotentHint: true, readOnlyHint not true"),
    ({"readOnlyHint": False, "idempotentHint": True, "destructiveHint": True}, "IDEMPOTENT_WRITE",
     "idempotentHint: true, readOnlyHint not true"),
    ({"destructiveHint": True}, "NON_IDEMPOTENT", "readOnlyHint and idempotentHint not true; destructiveHint: true"),
    ({"destructiveHint": False, "idempotentHint": False}, "NON_IDEMPOTENT",
     "readOnlyHint and idempotentHint not true; destructiveHint: false"),
    ({"readOnlyHint": False}, "NON_IDEMPOTENT",
     "readOnlyHint and idempotentHint not true; destructiveHint absent (MCP default: true)"),
    ({"openWorldHint": False, "title": "Notes"}, "NON_IDEMPOTENT",
     "readOnlyHint and idempotentHint not true; destructiveHint absent (MCP default: true)"),
    ({"title": "Run a script"}, "UNKNOWN", "annotations without a behaviour hint"),
    ({}, "UNKNOWN", "annotations without a behaviour hint"),
    (None, "UNKNOWN", "no annotations"),
    (NO_ANNOTATIONS, "UNKNOWN", "no annotations"),
])
def test_from_mcp_maps_each_hint_combination(killpoint, tmp_path, annotations, tool_class, why):
    tool = {"name": "t", "description": "a tool", "inputSchema": {"type": "object"}}
    if annotations is not NO_ANNOTATIONS:
        tool["annotations"] = annotations
        assert classify(annotations) == (tool_class, why)
    result = killpoint("catalogue", "from-mcp", write(tmp_path, "tools.json", json.dumps({"tools": [tool]})))
    assert result.exit_code == 0, result.err
    assert f't = {{ class = "{tool_class}", family = "mcp", why = "{why}" }}' in result.out


MCP_TOOLS = [
    {"name": "search_notes", "annotations": {"title": "Search", "readOnlyHint": True, "openWorldHint": False}},
    {"name": "set_status", "annotations": {"idempotentHint": True, "destructiveHint": False}},
    {"name": "add_note", "annotations": {"destructiveHint": False}},
    {"name": "notes.export", "annotations": {"title": "Export"}},
    {"name": "run script"},
]


@pytest.mark.parametrize("envelope", [
    lambda tools: {"tools": tools},
    lambda tools: {"jsonrpc": "2.0", "id": 7, "result": {"tools": tools, "nextCursor": None}},
    lambda tools: tools,
], ids=["tools-list-result", "json-rpc-response", "bare-list"])
def test_from_mcp_accepts_every_envelope_and_writes_a_checkable_catalogue(killpoint, tmp_path, envelope):
    source = write(tmp_path, "tools.json", json.dumps(envelope(MCP_TOOLS)))
    result = killpoint("catalogue", "from-mcp", source)
    assert result.exit_code == 0, result.err
    assert result.out.startswith("# Generated by `killpoint catalogue from-mcp tools.json`")
    assert "annotations are hints, not guarantees" in result.out
    generated = write(tmp_path, "generated.toml", result.out)
    assert catalogue_problems(generated, result.out) == []
    catalogue = load_catalogue(generated)
    assert catalogue.tools == {"search_notes": "READ_ONLY", "set_status": "IDEMPOTENT_WRITE",
                               "add_note": "NON_IDEMPOTENT", "notes.export": "UNKNOWN", "run script": "UNKNOWN"}
    assert catalogue.default == "UNKNOWN" and catalogue.interactive == frozenset()
    assert killpoint("catalogue", "check", generated).out.startswith("ok: 5 tools")


def test_from_mcp_out_file_and_family(killpoint, tmp_path):
    out_file = tmp_path / "notes.toml"
    result = killpoint("catalogue", "from-mcp", write(tmp_path, "t.json", json.dumps(MCP_TOOLS)),
                       "--out", out_file, "--family", "notes")
    assert result.exit_code == 0, result.err
    assert result.out == (f"wrote 5 tools to {out_file}; review their classes, then run "
                          f"`{killpoint_command()} catalogue check {out_file}`\n")
    catalogue = load_catalogue(out_file)
    assert set(catalogue.families.values()) == {"notes"}
    assert catalogue.reasons["add_note"] == "readOnlyHint and idempotentHint not true; destructiveHint: false"
    listed = killpoint("catalogue", "--file", out_file, "--family", "notes", "--class", "IDEMPOTENT_WRITE")
    assert rows(listed.out) == [["set_status", "IDEMPOTENT_WRITE", "notes", "idempotentHint:", "true,", "readOnlyHint",
                                 "not", "true"]]


@pytest.mark.parametrize(("content", "fragments"), [
    ('{"tools": [', ["t.json: not valid JSON: Expecting value: line 1"]),
    ('{"result": {"content": []}}', ["t.json: no tool list found; give a tools/list result"]),
    ('"tools"', ["t.json: no tool list found"]),
    ('{"tools": []}', ["t.json: the tool list is empty"]),
    ('[{"description": "nameless"}]', ['t.json: tools[0]: no "name" (a non-empty, printable string)']),
    ('[{"name": "a\\ud800b"}, {"name": " "}]', ['tools[0]: "name": the tool name', "is not Unicode text",
                                               'tools[1]: no "name"', "2 problem(s)"]),
    ('[{"name": "a"}, 5]', ['t.json: tools[1]: must be an object with a "name", got 5']),
    ('[{"name": "a", "annotations": {"readOnlyHint": "yes"}}]',
     ['t.json: tools[0] (a): annotations.readOnlyHint must be true or false, got "yes"']),
    ('[{"name": "a", "annotations": {"idempotentHint": 1, "destructiveHint": null}}]',
     ["tools[0] (a): annotations.idempotentHint must be true or false, got 1",
      "tools[0] (a): annotations.destructiveHint must be true or false, got null", "2 problem(s)"]),
    ('[{"name": "a", "annotations": ["readOnlyHint"]}]',
     ['tools[0] (a): "annotations" must be an object, got ["readOnlyHint"]']),
    ('[{"name": "a"}, {"name": "a"}]', ["tools[1] (a): tool 'a' is listed twice"]),
])
def test_from_mcp_bad_input_names_file_and_entry_and_writes_nothing(killpoint, tmp_path, content, fragments):
    out_file = tmp_path / "out.toml"
    result = killpoint("catalogue", "from-mcp", write(tmp_path, "t.json", content), "--out", out_file)
    assert_usage_error(result, *fragments)
    assert result.err.startswith(f"killpoint: {tmp_path / 't.json'}: ")
    assert not out_file.exists() and result.out == ""


def test_from_mcp_missing_file(killpoint, tmp_path):
    assert_usage_error(killpoint("catalogue", "from-mcp", tmp_path / "none.json"),
                       "none.json: cannot read the MCP tool list (No such file or directory)")
