"""Argument validation against the JSON Schema subset the fake tools declare.

The tools run inside every workload incarnation, so this stays a few dozen lines
of stdlib instead of importing ``jsonschema`` (about 70 ms per interpreter start,
more than the whole incarnation budget). Supported keywords: type, properties,
required, additionalProperties (false), enum, minimum, maximum, minLength,
maxLength, items. The same schemas feed hypothesis strategies for certification.
"""

from __future__ import annotations

from typing import Any

# The Python types of each JSON Schema type (certification's schema checks use this table too).
TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def schema_errors(schema: dict[str, Any], value: Any, where: str = "args") -> list[str]:
    """Every way ``value`` breaks ``schema``, as readable messages (empty when valid)."""
    expected = schema.get("type")
    if expected is not None:
        kinds = TYPES[expected]
        is_bool = isinstance(value, bool)
        if not isinstance(value, kinds) or (is_bool and expected in ("integer", "number")):
            return [f"{where} must be {expected}, got {type(value).__name__} {value!r:.40}"]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where} must be one of {schema['enum']}, got {value!r:.40}")
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{where} must be >= {schema['minimum']}, got {value}")
    if "maximum" in schema and value > schema["maximum"]:
        errors.append(f"{where} must be <= {schema['maximum']}, got {value}")
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(f"{where} must have at least {schema['minLength']} characters")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(f"{where} must have at most {schema['maxLength']} characters")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        errors += [f"{where}.{name} is required" for name in schema.get("required", ()) if name not in value]
        for name, item in value.items():
            if name in properties:
                errors += schema_errors(properties[name], item, f"{where}.{name}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{where}.{name} is not an argument of this tool")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            errors += schema_errors(schema["items"], item, f"{where}[{index}]")
    return errors


def obj(required: dict[str, dict[str, Any]], optional: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """An object schema with these required and optional properties and nothing else."""
    return {
        "type": "object",
        "properties": {**required, **(optional or {})},
        "required": sorted(required),
        "additionalProperties": False,
    }


TEXT = {"type": "string", "maxLength": 4096}
NAME = {"type": "string", "minLength": 1, "maxLength": 64}
PATH = {"type": "string", "minLength": 1, "maxLength": 200}
BOOLEAN = {"type": "boolean"}
