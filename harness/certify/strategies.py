"""Hypothesis strategies for the JSON Schema subset the tools declare (``killpoint.fake_tools.schema``).

Why our own builder and not ``hypothesis-jsonschema``: the subset is a dozen
keywords (what real MCP servers' ``inputSchema`` use: the fake tools' ten, plus
``minItems``/``maxItems``, ``anyOf``/``oneOf`` and type lists, as pydantic and
zod write nullable and non-empty values), every drawn value must pass
``schema_errors`` exactly (the same validator the tools run), and values stay
small so a shrunk counterexample is readable. hypothesis-jsonschema 0.23.1 also
fails on the first object schema with the Hypothesis this project pins. A schema
using a keyword outside the subset is refused up front because values drawn
while ignoring it could be invalid and every trial would be a refused call (see
``adapters.unsupported_keywords``).

A ``hook`` lets a caller draw a named property its own way at any depth (an MCP
tool's ``path`` from the files its world holds, ``mcp.world_hook``); it returns
None to leave a property to its schema.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

Hook = Callable[[str, dict[str, Any]], "st.SearchStrategy[Any] | None"]

LONGEST_TEXT = 30  # drawn strings stay short: a counterexample is read by a person
LONGEST_LIST = 4

WORDS = st.text(string.ascii_letters + string.digits + " _-", min_size=1, max_size=12)
CHARACTERS = st.characters(codec="utf-8", exclude_categories=["Cs"])
TEXTS = st.text(CHARACTERS, max_size=40)


def from_schema(schema: dict[str, Any], hook: Hook | None = None) -> st.SearchStrategy[Any]:
    """Values valid under ``schema``; strings and lists are kept short (see ``LONGEST_TEXT``)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    branches = schema.get("anyOf", schema.get("oneOf"))
    if branches is not None:  # the branches real schemas write ({type: string} | {type: null}) never overlap
        return st.one_of([from_schema(branch, hook) for branch in branches])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": one_kind}, hook) for one_kind in kind])
    if kind == "string":
        shortest = schema.get("minLength", 0)
        return st.text(CHARACTERS, min_size=shortest,
                       max_size=max(min(schema.get("maxLength", LONGEST_TEXT), LONGEST_TEXT), shortest))
    if kind == "integer":
        return st.integers(schema.get("minimum", -1000), schema.get("maximum", 1000))
    if kind == "number":
        low, high = schema.get("minimum", -1e6), schema.get("maximum", 1e6)
        return st.floats(low, high, allow_nan=False) | st.integers(int(-(-low // 1)), int(high // 1))
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return array_of(schema, from_schema(schema.get("items", {"type": "string"}), hook))
    if kind == "object" and "properties" not in schema:
        return st.dictionaries(WORDS, WORDS, max_size=3)
    if kind == "object":
        return args_for(schema, hook)
    return st.none() | st.booleans() | st.integers(-1000, 1000) | WORDS


def array_of(schema: dict[str, Any], items: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """Lists of ``items`` within the array schema's ``minItems``/``maxItems`` (and never longer than ``LONGEST_LIST``)."""
    shortest = schema.get("minItems", 0)
    return st.lists(items, min_size=shortest, max_size=max(min(schema.get("maxItems", LONGEST_LIST), LONGEST_LIST),
                                                           shortest))


def args_for(schema: dict[str, Any], hook: Hook | None = None, /,
             **overrides: st.SearchStrategy[Any] | None) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for an object schema; an override replaces a property's strategy, ``None`` leaves it out."""
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    wanted = set(schema.get("required", ()))
    for name, spec in schema.get("properties", {}).items():
        hooked = hook(name, spec) if hook is not None else None
        strategy = overrides.get(name, hooked if hooked is not None else from_schema(spec, hook))
        if strategy is not None:
            (required if name in wanted else optional)[name] = strategy
    return st.fixed_dictionaries(required, optional=optional)


def one(*values: Any) -> st.SearchStrategy[Any]:
    """One of these literal values (shrinks toward the first)."""
    return st.sampled_from(values)
