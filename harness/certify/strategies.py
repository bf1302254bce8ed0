"""Hypothesis strategies for the JSON Schema subset the tools declare (``killpoint.fake_tools.schema``).

Why our own builder and not ``hypothesis-jsonschema``: the subset is ten
keywords, every drawn value must pass ``schema_errors`` exactly (the same
validator the tools run), and values stay small so a shrunk counterexample is
readable. A schema using a keyword outside the subset is refused up front
because values drawn while ignoring it could be
invalid and every trial would be a refused call (see ``adapters.unsupported_keywords``).
"""

from __future__ import annotations

import string
from typing import Any

from hypothesis import strategies as st

LONGEST_TEXT = 30  # drawn strings stay short: a counterexample is read by a person
LONGEST_LIST = 4

WORDS = st.text(string.ascii_letters + string.digits + " _-", min_size=1, max_size=12)
CHARACTERS = st.characters(codec="utf-8", exclude_categories=["Cs"])
TEXTS = st.text(CHARACTERS, max_size=40)


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid under ``schema``; strings and lists are kept short (see ``LONGEST_TEXT``)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
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
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {"type": "string"})), max_size=LONGEST_LIST)
    if kind == "object" and "properties" not in schema:
        return st.dictionaries(WORDS, WORDS, max_size=3)
    if kind == "object":
        return args_for(schema)
    return st.none() | st.booleans() | st.integers(-1000, 1000) | WORDS


def args_for(schema: dict[str, Any], **overrides: st.SearchStrategy[Any] | None) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for an object schema; an override replaces a property's strategy, ``None`` leaves it out."""
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    wanted = set(schema.get("required", ()))
    for name, spec in schema.get("properties", {}).items():
        strategy = overrides.get(name, from_schema(spec))
        if strategy is not None:
            (required if name in wanted else optional)[name] = strategy
    return st.fixed_dictionaries(required, optional=optional)


def one(*values: Any) -> st.SearchStrategy[Any]:
    """One of these literal values (shrinks toward the first)."""
    return st.sampled_from(values)
