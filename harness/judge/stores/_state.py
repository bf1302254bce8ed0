"""How a store reader quotes a row: the plain columns that say what the store holds, each cut short.

The values a reader hands the checker (``StepRecord``, ``DurableState``) and
the reader's shape (``StoreReader``) are in ``harness.model``: evidence and
the rules use them without importing the readers.
"""

from __future__ import annotations

# A quoted value is cut here: a quote names a row, it does not reproduce it.
QUOTE_VALUE_CHARS = 80


def quote_value(value: object) -> str:
    """One column's value as a quote shows it: its repr, cut to a readable length."""
    text = repr(value)
    return text if len(text) <= QUOTE_VALUE_CHARS else text[:QUOTE_VALUE_CHARS - 3] + "..."


def quote_columns(columns: dict[str, object]) -> str:
    """``name='value', ...`` for the plain columns a quote names."""
    return ", ".join(f"{name}={quote_value(value)}" for name, value in columns.items())
