"""Tools a scenario declares for its agent: checked when the scenario loads, served by the tool service beside the
fake tools (ledger lines, probes, sandboxed paths), classed in the scenario's catalogue."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from killpoint.errors import ConfigError
from killpoint.fake_tools.world import seed_world
from killpoint.harness.agents.declared_tools import declared_tool_problems
from killpoint.harness.agents.tool_service import ToolService
from killpoint.harness.config.scenario import load_scenario
from tests.agents.test_tool_service import ledger_lines, post
from tests.helpers import ROOT

SHOP = ROOT / "scenarios" / "agents" / "shop_tools.toml"
TOOLS: dict[str, Any] = tomllib.loads(SHOP.read_text())["agent"]["tools"]
PLAN = {"task_id": "t", "tools": TOOLS, "calls": [
    {"call_id": "c1", "tool": "lookup_order", "args": {"order": "A1"}},
    {"call_id": "c2", "tool": "set_status", "args": {"order": "A1", "status": "paid"}},
    {"call_id": "c3", "tool": "charge_card", "args": {"order": "A1", "cents": 500}},
    {"call_id": "c4", "tool": "send_email", "args": {"to": "../../../host", "subject": "out"}},
]}


@pytest.mark.parametrize(("tools", "problem"), [
    ({"pay": {"class": "RISKY", "effect": {"returns": "x"}}}, "agent.tools.pay.class: give one of"),
    ({"pay": {"class": "READ_ONLY", "effect": {"delete": "x"}}}, "agent.tools.pay.effect: a table with one of"),
    ({"pay": {"class": "READ_ONLY", "effect": {"read": "a", "returns": "b"}}}, "a table with one of"),
    ({"pay": {"class": "NON_IDEMPOTENT", "effect": {"append": "log"}}}, "agent.tools.pay.effect: line: a string"),
    ({"pay": {"class": "NON_IDEMPOTENT", "parameters": {"order": "string"},
              "effect": {"append": "log", "line": "{ordre}"}}}, "line: {ordre} names no parameter (order)"),
    ({"pay": {"class": "READ_ONLY", "parameters": {"n": "float"}, "effect": {"returns": "x"}}},
     "agent.tools.pay.parameters: a table of NAME = TYPE"),
    ({"append": {"class": "READ_ONLY", "effect": {"returns": "x"}}}, "append is a killpoint fake tool already"),
    ({"pay me": {"class": "READ_ONLY", "effect": {"returns": "x"}}}, "a tool name is 1-64 of"),
    ({"pay": {"class": "READ_ONLY", "effect": {"returns": "x"}, "idempotent": True}}, "pay.idempotent: unknown key"),
])
def test_a_declared_tool_the_service_cannot_serve_is_named_with_its_fix(tools: dict[str, Any], problem: str) -> None:
    problems = declared_tool_problems(tools, "s.toml")
    assert any(problem in line for line in problems), problems


def test_a_scenario_with_a_bad_declared_tool_is_refused_before_anything_runs(tmp_path: Path) -> None:
    document = tomllib.loads(SHOP.read_text())
    document["agent"]["tools"]["charge_card"]["effect"] = {"append": "payments.log", "line": "{card}"}
    (tmp_path / "s.toml").write_text(tomli_w.dumps(document))
    with pytest.raises(ConfigError) as refused:
        load_scenario(tmp_path / "s.toml")
    assert ("agent.tools.charge_card.effect: line: {card} names no parameter (order, cents)"
            in " ".join(refused.value.problems))


def test_declared_classes_join_the_scenarios_catalogue() -> None:
    catalogue = load_scenario(SHOP).catalogue
    assert [catalogue.class_of(tool) for tool in ("lookup_order", "set_status", "charge_card", "send_email")] == [
        "READ_ONLY", "IDEMPOTENT_WRITE", "NON_IDEMPOTENT", "NON_IDEMPOTENT"]


def test_the_service_runs_declared_tools_as_fakes_and_keeps_their_ledger(tmp_path: Path) -> None:
    seed_world(tmp_path / "world", {"orders/A1.txt": "2 x tea\n"}, {})
    with ToolService(PLAN, tmp_path / "world", tmp_path / "ledger.jsonl") as tools:
        tools.begin(0)
        assert post(f"{tools.url}/tools/lookup_order", {"order": "A1"}) == (
            200, {"ok": True, "output": "2 x tea\n", "error": None})
        assert post(f"{tools.url}/tools/verify_effect", {"call_id": "c3"})[1]["output"] == {"effect_found": False}
        for _ in range(2):  # a replay of a card charge charges twice, as the rules fear
            assert post(f"{tools.url}/tools/charge_card", {"order": "A1", "cents": 500})[1]["ok"] is True
        assert post(f"{tools.url}/tools/set_status", {"order": "A1", "status": "paid"})[1]["ok"] is True
        assert post(f"{tools.url}/tools/verify_effect", {"call_id": "c3"})[1]["output"] == {"effect_found": True}
        assert post(f"{tools.url}/tools/verify_effect", {"call_id": "c2"})[1]["output"] == {"effect_found": True}
        escaped = post(f"{tools.url}/tools/send_email", {"to": "../../../host", "subject": "out"})[1]
        openapi = tools.openapi()
    files = tmp_path / "world" / "files"
    assert (files / "payments.log").read_text() == "charged A1 500 cents\n" * 2
    assert (files / "status" / "A1.txt").read_text() == "paid"
    assert escaped["ok"] is False and "'..' would leave the world" in escaped["error"], escaped  # sandboxed
    assert [(line.get("invoked") or line.get("effect") or line.get("probe"), line["call"])
            for line in ledger_lines(tmp_path / "ledger.jsonl")] == [
        ("lookup_order", "c1"), ("effect_present", "c3"), ("charge_card", "c3"), ("line_appended", "c3"),
        ("charge_card", "c3"), ("line_appended", "c3"), ("set_status", "c2"), ("file_written", "c2"),
        ("effect_present", "c3"), ("effect_present", "c2"), ("send_email", "c4")]
    schema = openapi["paths"]["/tools/charge_card"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert schema == {"type": "object", "properties": {"order": {"type": "string"}, "cents": {"type": "integer"}},
                      "required": ["order", "cents"], "additionalProperties": False}
    assert json.dumps(openapi).count("declared by the scenario") == 4
    assert not (tmp_path / "host.txt").exists()
