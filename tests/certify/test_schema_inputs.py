"""``certify --schema``: every problem of a schema is one exit-2 message naming the JSON path of the bad keyword,
found before anything runs, and no temporary directory is left behind."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from killpoint.harness.certify.adapters import DEEPEST_SCHEMA, schema_problems
from tests.helpers import CliResult

Killpoint = Callable[..., CliResult]


def nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"p": schema}}
    return schema


def arguments(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


@pytest.mark.parametrize(("schema", "named"), [
    (arguments(k={"type": "string", "maxLength": "x"}),
     'schema.properties.k.maxLength: must be a whole number >= 0, got string "x"'),
    (arguments(k={"type": "string", "minLength": -1}), "schema.properties.k.minLength: must be a whole number >= 0"),
    (arguments(k={"type": "string", "minLength": True}), "schema.properties.k.minLength: must be a whole number"),
    (arguments(k={"type": "string", "minLength": 5, "maxLength": 2}), "schema.properties.k.minLength: 5 is above maxLength 2"),
    (arguments(k={"type": "string", "minLength": 10**9}),
     "schema.properties.k.minLength: 1000000000 is more than killpoint draws"),
    (arguments(n={"type": "integer", "minimum": "0"}), 'schema.properties.n.minimum: must be a finite number, got string "0"'),
    (arguments(n={"type": "integer", "maximum": 1.5}), "schema.properties.n.maximum: must be a whole number for an integer"),
    ('{"type": "object", "properties": {"n": {"type": "number", "minimum": 1e999}}}',  # JSON that parses to inf
     "schema.properties.n.minimum: must be a finite number, got number Infinity"),
    (arguments(n={"type": "integer", "minimum": 9, "maximum": 1}), "schema.properties.n.minimum: 9 is above maximum 1"),
    (arguments(n={"type": "integer", "maxLength": 3}),
     "schema.properties.n.maxLength: applies to string values, and this schema's type is integer"),
    (arguments(k={"type": ["string", "text"]}), "schema.properties.k.type: must be one of object, array, string"),
    (arguments(k={"type": "text"}), 'schema.properties.k.type: must be one of object, array, string, integer, number, '
                                    'boolean, null (or a list of them), got string "text"'),
    (arguments(k={"anyOf": []}), "schema.properties.k.anyOf: must be a non-empty list of schemas"),
    (arguments(k={"oneOf": [{"type": "string", "pattern": "a"}]}), "schema.properties.k.oneOf[0].pattern: killpoint "
                                                                  "cannot draw"),
    (arguments(k={"type": "array", "minItems": 3, "maxItems": 1}), "schema.properties.k.minItems: 3 is above maxItems 1"),
    (arguments(k={"enum": []}), "schema.properties.k.enum: must be a non-empty list of the allowed values"),
    (arguments(k={"enum": "ab"}), "schema.properties.k.enum: must be a non-empty list"),
    (arguments(k={"type": "integer", "enum": ["x"]}), "schema.properties.k.enum: lists 'x', which is not of type integer"),
    (arguments(k={"type": "array", "items": 5}), "schema.properties.k.items: must be a schema (a JSON object), got integer 5"),
    (arguments(k="string"), 'schema.properties.k: must be a schema (a JSON object), got string "string"'),
    ({"type": "object", "properties": [1]}, "schema.properties: must be an object NAME -> schema, got list"),
    ({"type": "object", "properties": {}, "required": "k"}, 'schema.required: must be a list of property names'),
    ({"type": "object", "properties": {}, "required": ["k"]}, "schema.required: names 'k', which properties does not describe"),
    ({"type": "object", "additionalProperties": "no"}, 'schema.additionalProperties: must be true, false or a schema'),
    ({"type": "object", "properties": {"a key": {"type": "integer", "minimum": "x"}}},
     'schema.properties["a key"].minimum: must be a finite number'),
    (nested(DEEPEST_SCHEMA + 5), f"nested deeper than {DEEPEST_SCHEMA} levels"),
])
def test_an_ill_typed_schema_is_one_clear_message_with_no_traceback_and_no_temporary_directory(
        killpoint: Killpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, schema: dict[str, Any] | str,
        named: str) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    (tmp_path / "schema.json").write_text(schema if isinstance(schema, str) else json.dumps(schema))
    result = killpoint("certify", "t", "--claim", "IDEMPOTENT_WRITE", "--command", "true {args}", "--trials", "2",
                       "--schema", tmp_path / "schema.json", "--out", tmp_path / "certificates")
    assert result.exit_code == 2, result
    assert result.err.startswith(f"killpoint: --schema {tmp_path / 'schema.json'}: the schema of 't' has ")
    assert named in result.err, result.err
    assert "Traceback" not in result.err and result.out == "", "bad input is found before anything prints or runs"
    assert list(temporary.iterdir()) == [] and not (tmp_path / "certificates").exists()


def test_a_schema_nested_past_the_json_parser_is_not_valid_json(killpoint: Killpoint, tmp_path: Path) -> None:
    (tmp_path / "deep.json").write_text('{"type": "object", "properties": {"p": ' + "[" * 50_000 + "]" * 50_000 + "}}")
    result = killpoint("certify", "t", "--claim", "READ_ONLY", "--command", "true", "--schema", tmp_path / "deep.json")
    assert result.exit_code == 2 and "not valid JSON (nested too deeply)" in result.err, result.err


def test_a_tool_table_names_the_tool_in_the_path(killpoint: Killpoint, tmp_path: Path) -> None:
    (tmp_path / "table.json").write_text(json.dumps({"kv_put": arguments(value={"type": "integer", "minimum": "0"})}))
    result = killpoint("certify", "kv_put", "--claim", "IDEMPOTENT_WRITE", "--command", "true {args}",
                       "--schema", tmp_path / "table.json")
    assert result.exit_code == 2 and "schema.kv_put.properties.value.minimum: must be a finite number" in result.err


def test_every_problem_is_listed_at_once() -> None:
    problems = schema_problems(arguments(a={"type": "string", "maxLength": "x"}, b={"type": "integer", "enum": []},
                                         c={"type": "string", "pattern": "^x"}))
    assert [problem.split(":")[0] for problem in problems] == [
        "schema.properties.a.maxLength", "schema.properties.b.enum", "schema.properties.c.pattern"]


def test_a_schema_within_the_subset_has_no_problems() -> None:
    schema = json.loads((Path(__file__).parent / "tools" / "kv_put.schema.json").read_text())
    assert schema_problems(schema) == [] and schema_problems(nested(DEEPEST_SCHEMA)) == []
    assert schema_problems(arguments(n={"type": "number", "minimum": 0.5, "maximum": 2, "description": "x"},
                                     t={"type": "array", "items": {"type": "string", "minLength": 1}})) == []
