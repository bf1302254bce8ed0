"""Bad catalogues: every one is exit 2 with the file, line or field and the fix, never a traceback,
never silently accepted; ``catalogue check``, ``run`` and ``certify`` report the same problems,
and checking a big catalogue takes time in proportion to its size."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from killpoint.catalogue import catalogue_problems, load_catalogue
from killpoint.errors import ConfigError

pytestmark = pytest.mark.hostile  # the bad-input fuzz of the hostile-input suite (docs/security.md)

CLASSES = "use one of READ_ONLY, IDEMPOTENT_WRITE, NON_IDEMPOTENT, UNKNOWN"


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def problems_of(result) -> list[str]:
    """The listed problems of a ConfigError the CLI printed (exit 2, no traceback)."""
    assert result.exit_code == 2, result.out + result.err
    assert "Traceback" not in result.out + result.err
    return [line.removeprefix("  - ") for line in result.err.splitlines() if line.startswith("  - ")]


def refused(killpoint, path: Path, *fragments: str) -> None:
    """``catalogue check`` and ``catalogue --file`` both exit 2 naming every fragment."""
    for args in (("catalogue", "check", path), ("catalogue", "--file", path)):
        result = killpoint(*args)
        assert result.exit_code == 2, (args, result.out, result.err)
        assert "Traceback" not in result.out + result.err and result.out == "", (args, result.out, result.err)
        for fragment in fragments:
            assert fragment in result.err, (args, fragment, result.err)


# -- reading -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["binary.json", "binary.toml"])
def test_a_catalogue_that_is_not_text(killpoint, tmp_path, name):
    path = write(tmp_path, name, b"\xff\xfe\x00\x81 not text")
    refused(killpoint, path, f"{path}: the catalogue is not UTF-8 text")


def test_a_directory_is_not_a_catalogue(killpoint, tmp_path):
    (tmp_path / "dir.toml").mkdir()
    refused(killpoint, tmp_path / "dir.toml", "dir.toml: is a directory, not a regular file, so the catalogue was not read")


# -- the protocol JSON form ----------------------------------------------------


@pytest.mark.parametrize(("content", "fragments"), [
    ('{"interactive": 5, "tools": {}}', ['interactive: must be a list of tool ids, like ["ask_user"]; got 5']),
    ('{"interactive": "ask_user", "tools": {"ask_user": "NON_IDEMPOTENT"}}',
     ['interactive: must be a list of tool ids, like ["ask_user"]; got "ask_user"']),
    ('{"interactive": ["ask_user", 7], "tools": {}}', ["interactive: must be a list of tool ids"]),
    ('{"tools": {}, "colour": "blue", "Tools": {}}',
     ["unknown key 'Tools'; a catalogue has default, interactive, tools",
      "unknown key 'colour'; a catalogue has default, interactive, tools", "2 problem(s)"]),
    ('{"tools": {"get": "READ_ONLY", "get": "NON_IDEMPOTENT"}}', ["not valid JSON: key(s) 'get' given twice"]),
    ('{"default": NaN, "tools": {}}', ["not valid JSON: NaN is not a JSON number"]),
    ("[" * 100_000 + "]" * 100_000, ["not valid JSON: nested too deeply"]),
    ('{"tools": {"get": ["READ_ONLY"]}}', [f"tools.get: unknown class ['READ_ONLY']; {CLASSES}"]),
    ('{"default": ["UNKNOWN"], "tools": {}}', [f"default: unknown class ['UNKNOWN']; {CLASSES}"]),
    ('{"tools": ["get"]}', ['tools: must be an object of TOOL: CLASS, like {"read_file": "READ_ONLY"}']),
    ('{"default": "UNKNOWN"}', ['tools: missing; a JSON catalogue is {"default": ...']),
    ('["get"]', ['a JSON catalogue is {"default": ..., "interactive": [...], "tools": {TOOL: CLASS}}']),
])
def test_a_bad_json_catalogue(killpoint, tmp_path, content, fragments):
    path = write(tmp_path, "c.json", content)
    refused(killpoint, path, f"{path}: ", *fragments)
    with pytest.raises(ConfigError):
        load_catalogue(path)


# -- the TOML form -------------------------------------------------------------


def test_family_and_why_must_be_strings(killpoint, tmp_path):
    path = write(tmp_path, "c.toml", '[tools]\nread = { class = "READ_ONLY" }\n'
                                     'get = { class = "READ_ONLY", family = 5, why = ["fetches"] }\n')
    refused(killpoint, path, "2 problem(s)",
            f"{path}:3: tool 'get': family must be a string, like family = \"file\"; got 5",
            f"{path}:3: tool 'get': why must be a string, like why = \"reads a file\"; got [\"fetches\"]")


@pytest.mark.parametrize(("content", "fragment"), [
    ('interactive = "ask_user"\n', 'c.toml:1: interactive: must be a list of tool ids, like ["ask_user"]; got "ask_user"'),
    ("default = 5\n", f"c.toml:1: default: unknown class 5; {CLASSES}"),
    ('default = ["UNKNOWN"]\n', f"c.toml:1: default: unknown class ['UNKNOWN']; {CLASSES}"),
    ('[tools]\nget = { class = ["READ_ONLY"] }\n', f"c.toml:2: tool 'get': unknown class ['READ_ONLY']; {CLASSES}"),
    ('tools = 5\n', "c.toml:1: tools: must be a table of TOOL = { class = ... }"),
    ('[tools]\nget = "READ_ONLY"\n', "c.toml:2: tool 'get': write it as get = { class = \"READ_ONLY\" }"),
    ('[tools.get]\nclass = "MAYBE"\n', f"c.toml:1: tool 'get': unknown class 'MAYBE'; {CLASSES}"),
    ('[tools]\n"run script" = { class = "MAYBE" }\n', f"c.toml:2: tool 'run script': unknown class 'MAYBE'; {CLASSES}"),
    ('[colour]\nred = 1\n', "c.toml:1: unknown key 'colour'; a catalogue has default, interactive, tools"),
    ("interactive = " + "[" * 100_000 + "]" * 100_000 + "\n", "c.toml: not valid TOML: nested too deeply"),
])
def test_a_bad_toml_catalogue_names_the_line(killpoint, tmp_path, content, fragment):
    path = write(tmp_path, "c.toml", content)
    refused(killpoint, path, f"{tmp_path}/{fragment}")


def test_a_key_that_is_only_in_a_string_does_not_move_the_line(tmp_path):
    text = 'default = "UNKNOWN"\n[tools]\nnote = { class = "READ_ONLY", why = "get = the old name" }\nget = { class = "NO" }\n'
    assert catalogue_problems(Path("c.toml"), text) == [f"c.toml:4: tool 'get': unknown class 'NO'; {CLASSES}"]


def test_a_duplicate_of_a_quoted_or_top_level_key_is_reported_at_its_line(tmp_path):
    text = ('default = "UNKNOWN"\ndefault = "NEVER"\n[tools]\n"run script" = { class = "READ_ONLY" }\n'
            '"run script" = { class = "UNKNOWN" }\n')
    assert catalogue_problems(Path("c.toml"), text) == [
        "c.toml:2: key 'default' listed twice (first at line 1); keep one",
        f"c.toml:2: default: unknown class 'NEVER'; {CLASSES}",
        "c.toml:5: tool 'run script' listed twice (first at line 4); keep one",
    ]


def test_a_duplicate_in_a_file_with_crlf_line_ends_is_checked_alone_too():
    text = '[tools]\r\nget = { class = "READ_ONLY" }\r\nget = { class = "NO" }\r\n'
    assert catalogue_problems(Path("c.toml"), text) == [
        "c.toml:3: tool 'get' listed twice (first at line 2); keep one",
        f"c.toml:3: tool 'get': unknown class 'NO'; {CLASSES}",
    ]


def test_dotted_keys_of_one_tool_are_not_duplicates(tmp_path):
    text = '[tools]\nget.class = "READ_ONLY"\nget.why = "fetches"\n'
    assert catalogue_problems(Path("c.toml"), text) == []
    assert load_catalogue(write(tmp_path, "c.toml", text)).reasons == {"get": "fetches"}


# -- one check for every command -----------------------------------------------

BROKEN = """\
default = "SOMETIMES"
interactive = "ask_user"

[tools]
read_file  = { class = "READ_ONLY", family = 5 }
read_file  = { class = "READ_ONLY" }
tap        = { class = "MAYBE", colour = "red" }
"""


def test_run_certify_and_check_report_the_same_problems(killpoint, tmp_path):
    catalogue = write(tmp_path, "broken.toml", BROKEN)
    plan = write(tmp_path, "plan.json", json.dumps(
        {"task_id": "t", "calls": [{"call_id": "c1", "tool": "read_file", "args": {"path": "a.txt"}}]}))
    checked = problems_of(killpoint("catalogue", "check", catalogue))
    assert len(checked) == 6, checked
    assert problems_of(killpoint("run", "--workload", "true", "--plan", plan, "--catalogue", catalogue)) == checked
    assert problems_of(killpoint("certify", "--catalogue", catalogue)) == checked
    with pytest.raises(ConfigError) as raised:
        load_catalogue(catalogue)
    assert list(raised.value.problems) == checked == catalogue_problems(catalogue, BROKEN)


# -- size ----------------------------------------------------------------------


def test_checking_takes_time_in_proportion_to_the_catalogue(killpoint, tmp_path):
    """10,000 tools: the check that searched the whole text for each tool's line took 61 s."""
    tools = "".join(f'tool_{number:05d} = {{ class = "READ_ONLY", family = "file", why = "reads" }}\n'
                    for number in range(10_000))
    path = write(tmp_path, "big.toml", f'default = "UNKNOWN"\n[tools]\n{tools}tool_00000 = {{ class = "NO" }}\n')
    started = time.monotonic()
    result = killpoint("catalogue", "check", path)
    elapsed = time.monotonic() - started
    assert problems_of(result) == [
        f"{path}:10003: tool 'tool_00000' listed twice (first at line 3); keep one",
        f"{path}:10003: tool 'tool_00000': unknown class 'NO'; {CLASSES}",
    ]
    assert elapsed < 20, f"checking 10,000 tools took {elapsed:.1f} s"
