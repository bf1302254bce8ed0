"""Issue 28, items 4 and 2: tools that act on what other tools made, and state seen through the server's read tools.

The server (``servers/entities.py``) keeps entities in ``entities.json`` or,
with ``--memory``, only in its memory. ``add_observations`` and
``set_entity_note`` refuse every name on a fresh world: certify builds a state
with ``create_entities`` first and says so. ``read_graph`` is a read tool every
snapshot asks, so an effect kept only in memory is compared like a file;
``uptime`` answers differently each time and is no view of the store.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import find

from killpoint import protocol as p
from killpoint.harness.certify.adapters import ExternalSpec
from killpoint.harness.certify.mcp_state import is_creator, is_read, names_in, shown_view, words
from killpoint.harness.certify.run import certify, claims_from_mcp
from killpoint.harness.certify.trials import REPLAY, Observation, SearchResult, refused_all

ENTITIES = Path(__file__).parent / "servers" / "entities.py"
TRIALS = 3
SETUP = [{"tool": "create_entities", "args": {"entities": [{"name": "alpha", "entityType": "person"}]}, "ok": True}]


def certified(folder: Path, *flags: str, tools: tuple[str, ...], seed: int = 0) -> dict[str, dict[str, Any]]:
    """Each of ``tools`` of the entities server certified in-process (seed ``seed``): tool -> certificate."""
    external = ExternalSpec(mcp=shlex.join([sys.executable, str(ENTITIES), "{world}", *flags]))
    claims = [claim for tool in tools for claim in claims_from_mcp(external, tool, None)]
    done = certify(claims, external, trials=TRIALS, seed=seed, out=folder)
    return {item.certificate.tool: item.certificate.data for item in done}


@pytest.fixture(scope="module")
def on_file(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return certified(tmp_path_factory.mktemp("file"), tools=("add_observations", "set_entity_note", "create_entities"))


@pytest.fixture(scope="module")
def in_memory(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return certified(tmp_path_factory.mktemp("memory"), "--memory",
                     tools=("add_observations", "set_entity_note", "create_entities", "read_graph"))


@pytest.mark.integration
def test_a_tool_that_acts_only_on_an_entity_a_creator_made_is_certified_naming_the_setup(
        on_file: dict[str, dict[str, Any]]) -> None:
    """Without a setup every call is refused ("no entity ..."): INCONCLUSIVE before issue 28's item 4."""
    add = on_file["add_observations"]
    assert (add["claim"], add["verdict"], add["strongest_supported"]) == (
        p.NON_IDEMPOTENT, "CONFIRMED", p.NON_IDEMPOTENT), add["reason"]
    assert add["setup"]["creators"] == ["create_entities"]
    assert add["setup"]["why"].startswith("on a fresh world no call succeeded (3 trial(s); first: no entity ")
    witness = add["witness"]
    assert witness["setup"] == [{"tool": "create_entities", "args": {"entities": [{"name": "alpha", "entityType":
                                                                                   "alpha"}]}, "ok": True}]
    assert witness["args"] == {"entityName": "alpha", "observations": ["alpha"]}
    assert "changed mcp: read_graph:" in witness["diffs"]["the replay changed (against one call)"]
    assert all("setup" in observation for observation in add["observations"])


@pytest.mark.integration
def test_an_idempotent_put_on_a_built_state_is_confirmed_through_kills_and_restarts(
        on_file: dict[str, dict[str, Any]], in_memory: dict[str, dict[str, Any]]) -> None:
    """A correct tool must pass: its kill is replayed on a restarted server, held to one call after a restart."""
    for run in (on_file, in_memory):
        note = run["set_entity_note"]
        assert (note["claim"], note["verdict"]) == (p.IDEMPOTENT_WRITE, "CONFIRMED"), note["reason"]
        assert note["trials"]["kill"] >= 1 and note["trials"]["kill_diverged"] == 0, note["trials"]
        assert note["setup"]["creators"] == ["create_entities", "add_observations"]
        assert any(observation["ok"] and observation["setup"] for observation in note["observations"])


@pytest.mark.integration
def test_a_tool_that_acts_on_a_fresh_world_gets_no_setup(on_file: dict[str, dict[str, Any]]) -> None:
    create = on_file["create_entities"]
    assert create["verdict"] == "CONFIRMED" and "setup" not in create
    assert not any("setup" in observation for observation in create["observations"])


@pytest.mark.integration
def test_an_effect_kept_only_in_memory_is_seen_through_the_read_tool(in_memory: dict[str, dict[str, Any]]) -> None:
    """No file shows the store: only ``read_graph`` does, and a replay that appends again is a witness."""
    add = in_memory["add_observations"]
    assert (add["verdict"], add["strongest_supported"]) == ("CONFIRMED", p.NON_IDEMPOTENT), add["reason"]
    assert add["adapter"]["reads"] == ["read_graph"], "uptime changes by itself: no view of the store"
    snapshots = add["witness"]["snapshots"]
    assert not any(key.startswith("entities.json") for snapshot in snapshots.values() for key in snapshot)
    assert add["witness"]["diffs"]["the replay changed (against one call)"][0] == "changed mcp: read_graph:"
    assert in_memory["read_graph"]["verdict"] == "CONFIRMED"


@pytest.mark.integration
def test_the_same_seed_gives_the_same_certificate(tmp_path: Path, on_file: dict[str, dict[str, Any]]) -> None:
    again = certified(tmp_path, tools=("add_observations",))["add_observations"]
    first = on_file["add_observations"]
    for key in ("verdict", "reason", "setup", "witness", "observations", "evidence_digest", "trials"):
        assert again[key] == first[key], key


def test_creators_reads_and_names_are_told_by_name_hints_and_keys() -> None:
    assert words("createEntities") == {"create", "entities"} and words("computeStats") == {"compute", "stats"}
    assert is_creator({"name": "add_observations"})
    assert is_creator({"name": "x", "annotations": {"destructiveHint": False}})
    assert not is_creator({"name": "create_x", "annotations": {"readOnlyHint": True}})
    assert not is_creator({"name": "computeStats"})
    assert is_read({"name": "read_graph", "annotations": {"readOnlyHint": True}})
    assert not is_read({"name": "open_nodes", "annotations": {"readOnlyHint": True},
                        "inputSchema": {"type": "object", "required": ["names"]}})
    setup = ({"tool": "create_entities", "args": {"entities": [{"name": "alpha", "entityType": "person"}]}},
             {"tool": "create_relations",
              "args": {"relations": [{"from": "alpha", "to": "beta", "relationType": "knows"}]}})
    assert names_in(setup) == (("alpha",), ("alpha", "person", "beta", "knows"))
    assert shown_view('{"b": 1, "a": [2]}') == '{\n "a": [\n  2\n ],\n "b": 1\n}'
    assert shown_view("x" * 5000).startswith("5000 characters, sha256:")


def test_a_setup_is_drawn_only_where_no_call_succeeded() -> None:
    refused = Observation(REPLAY, {}, ok=False, error="no entity 'x'", changed=False, differs=False)
    worked = Observation(REPLAY, {}, ok=True, error=None, changed=True, differs=False)
    assert refused_all(SearchResult((refused, refused), None, None, 0.1))
    assert refused_all(SearchResult((), None, "add_observations: the server died", 0.1))
    assert not refused_all(SearchResult((refused, worked), None, None, 0.1))
    assert not refused_all(SearchResult((), None, "openWorldHint: true", 0.0, skipped=True))


@pytest.mark.integration
def test_the_tool_under_test_names_what_the_setup_created(tmp_path: Path) -> None:
    from killpoint.harness.certify.mcp import mcp_target

    external = ExternalSpec(mcp=shlex.join([sys.executable, str(ENTITIES), "{world}"]))
    target = mcp_target("add_observations", external)
    assert target.creators == ("create_entities",) and target.reads == ("read_graph",)
    drawn = find(target.arguments_for("add_observations", tuple(SETUP)), lambda args: True)
    assert drawn["entityName"] in ("alpha", "person")
