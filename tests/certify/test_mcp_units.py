"""The pure parts of ``certify --mcp``: drawing from real servers' schemas, the world's names, kill leftovers, hints."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs; the mcp SDK installs it
from hypothesis import find, given, settings
from hypothesis import strategies as st

from killpoint import protocol as p
from killpoint.harness.certify.certificate import judge, make_certificate
from killpoint.harness.certify.mcp import (
    LARGE,
    LARGE_TEXT,
    MEMORY,
    WORLD,
    filled,
    hints_text,
    network_reason,
    world_hook,
)
from killpoint.harness.certify.mcp_worlds import Vocabulary
from killpoint.harness.certify.run import Certified, catalogue_of
from killpoint.harness.certify.strategies import args_for
from killpoint.harness.certify.trials import REPLAY, Observation, SearchResult, kill_left

# inputSchemas as the two real servers list them (pydantic's nullable anyOf, zod's minItems and $schema).
GIT_LOG = {"properties": {"repo_path": {"title": "Repo Path", "type": "string"},
                          "max_count": {"default": 10, "title": "Max Count", "type": "integer"},
                          "start_timestamp": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}},
           "required": ["repo_path"], "type": "object", "title": "logArguments"}
READ_MULTIPLE = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                 "properties": {"paths": {"minItems": 1, "type": "array", "items": {"type": "string"}}},
                 "required": ["paths"]}
EDIT = {"type": "object", "required": ["path", "edits"], "properties": {
    "path": {"type": "string"}, "dryRun": {"default": False, "type": "boolean"},
    "edits": {"type": "array", "items": {"type": "object", "required": ["oldText", "newText"], "properties": {
        "oldText": {"type": "string"}, "newText": {"type": "string"}}}}}}
TYPE_LIST = {"type": "object", "properties": {"n": {"type": ["integer", "null"], "minimum": 0, "maximum": 3},
                                              "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}}}
NAMES = Vocabulary(files=("a.txt", "sub/c.txt"), folders=(".", "sub"), fresh=("new.txt",), refs=("main", "HEAD"),
                   fresh_refs=("topic",), texts=("alpha", "alpha beta"))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_value_drawn_from_a_real_servers_schema_is_valid_under_it(data: st.DataObject) -> None:
    for schema in (GIT_LOG, READ_MULTIPLE, EDIT, TYPE_LIST):
        jsonschema.validate(data.draw(args_for(schema)), schema)
        jsonschema.validate(data.draw(args_for(schema, world_hook(NAMES, "tool"))), schema)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_path_ref_and_text_arguments_draw_only_the_worlds_names(data: st.DataObject) -> None:
    paths = {*NAMES.files, *NAMES.folders, *NAMES.fresh}
    assert set(data.draw(args_for(READ_MULTIPLE, world_hook(NAMES, "read_multiple_files")))["paths"]) <= paths
    edit = data.draw(args_for(EDIT, world_hook(NAMES, "edit_file")))
    assert edit["path"] in paths and edit["edits"], "a list of edits is never empty: [] does nothing"
    assert all({e["oldText"], e["newText"]} <= set(NAMES.texts) for e in edit["edits"])
    log = data.draw(args_for(GIT_LOG, world_hook(NAMES, "git_log")))
    assert log["repo_path"] == WORLD


def test_the_first_draw_is_a_call_likely_to_act() -> None:
    def first(schema: dict[str, Any], tool: str) -> dict[str, Any]:
        """The simplest draw: the one Hypothesis starts from and shrinks toward."""
        return find(args_for(schema, world_hook(NAMES, tool)), lambda _: True, settings=settings(database=None))

    path = {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}}
    assert first(path, "read_file") == {"path": "a.txt"}
    assert first(path, "list_directory") == {"path": "."}
    assert first(path, "create_directory") == {"path": "new.txt"}
    edit = first(EDIT, "edit_file")
    assert edit["edits"] == [{"oldText": "alpha", "newText": "alpha beta"}], "an edit its replay repeats"


def test_placeholders_are_filled_at_call_time_and_the_large_text_is_four_mebibytes(tmp_path: Path) -> None:
    args = {"repo_path": WORLD, "files": [f"{WORLD}/a.txt"], "content": LARGE, "n": 1}
    assert filled(args, tmp_path) == {"repo_path": str(tmp_path), "files": [f"{tmp_path}/a.txt"],
                                      "content": LARGE_TEXT, "n": 1}
    assert len(LARGE_TEXT) == 4 << 20


def test_what_a_kill_left_is_never_once_or_the_torn_entries() -> None:
    before, once = {"a.txt": "alpha"}, {"a.txt": "beta"}
    assert kill_left(before, dict(before), once) == "never"
    assert kill_left(before, dict(once), once) == "once"
    stray = {"a.txt": "alpha", "a.txt.0123456789abcdef0123456789abcdef.tmp": "be"}
    assert kill_left(before, stray, once) == "torn: +a.txt.<hex>.tmp"
    assert kill_left({"git: locks": ""}, {"git: locks": ".git/index.lock"}, {"git: locks": ""}) == "torn: ~git: locks"
    assert kill_left({"i": "1", "l": ""}, {"i": "1", "l": "x"}, {"i": "2", "l": ""}) == "torn: ~l"


def test_hints_read_in_a_cell_and_network_tools_are_named() -> None:
    assert hints_text({"readOnlyHint": False, "idempotentHint": True, "openWorldHint": False}) == "!ro idem !open"
    assert hints_text(None) == "-"
    assert network_reason({"annotations": {"openWorldHint": True}}) == "openWorldHint: true (it may reach the network)"
    assert network_reason({"inputSchema": {"properties": {"target_url": {"type": "string"}}}}) == (
        "it takes a URL (target_url)")
    assert network_reason({"inputSchema": {"properties": {"page": {"type": "string", "format": "uri"}}}}) == (
        "it takes a URL (page)")
    assert network_reason({"annotations": {"openWorldHint": False}, "inputSchema": GIT_LOG}) is None


def certified(tool: str, claim: str, why: str, *, changed: bool) -> Certified:
    """A server tool's certificate from one replay trial that changed the world (or nothing), as ``search`` gives it."""
    observation = Observation(REPLAY, {}, ok=True, error=None, changed=changed, differs=False)
    result = SearchResult((observation,), None, None, 0.1, unseen=MEMORY)
    judgement = judge(claim, interactive=False, result=result, why=why)
    certificate = make_certificate(tool=tool, claim=claim, interactive=False, result=result, judgement=judgement,
                                   seed=0, trials=2, adapter={"adapter": "mcp"}, identity={"digest": "sha256:0"},
                                   why=why, reproduce="killpoint certify")
    return Certified(certificate, Path(f"{tool}.json"), None)


def test_the_written_catalogue_never_says_read_only_for_a_tool_whose_effect_may_be_in_the_servers_memory() -> None:
    """Issue 28: only a READ_ONLY claim stands on calls that changed nothing seen; a toggle's class is UNKNOWN."""
    assert MEMORY == "the server's memory"
    done = [certified("toggle_logging", p.NON_IDEMPOTENT, "readOnlyHint and idempotentHint not true; "
                      "destructiveHint: false", changed=False),
            certified("settings", p.UNKNOWN, "no annotations", changed=False),
            certified("read_file", p.READ_ONLY, "readOnlyHint: true", changed=False),
            certified("set_value", p.IDEMPOTENT_WRITE, "idempotentHint: true, readOnlyHint not true", changed=True)]
    written = tomllib.loads(catalogue_of(done, "srv {world}"))["tools"]
    classes = {tool: entry["class"] for tool, entry in written.items()}
    assert classes == {"toggle_logging": p.UNKNOWN, "settings": p.UNKNOWN, "read_file": p.READ_ONLY,
                       "set_value": p.IDEMPOTENT_WRITE}
