"""TOML as killpoint reads what a user hands it: ``tomllib``, bounded where ``tomllib`` is not.

``tomllib`` takes time and memory quadratic in a dotted key's length (a key of
100,000 parts took gigabytes), raises a bare ValueError for a decimal integer
past CPython's 4,300-digit conversion limit, reads a hex integer of any size
(which no message can then show: int-to-text has that limit), and builds tables
as deep as a dotted key says (formatting one for a message then overflows the
stack). No scenario or catalogue comes near: a key has at most ``MAX_KEY_PARTS``
parts, values nest at most ``MAX_DEPTH`` levels, integers fit in 64 bits. Past
those, the text is bad TOML like any other: ``tomllib.TOMLDecodeError``, with
the reason.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

MAX_KEY_PARTS = 64
MAX_DEPTH = 64
INTEGER_BITS = 64  # TOML's integers: signed, of 64 bits
# A run of MAX_KEY_PARTS bare-key parts joined by dots, found in one pass: a run starts only where a part does,
# and possessive quantifiers never give back what they took.
_LONG_DOTTED_KEY = re.compile(r"(?<![A-Za-z0-9_-])(?:[A-Za-z0-9_-]++[ \t]*+\.[ \t]*+){%d}" % MAX_KEY_PARTS)


def loads(text: str) -> dict[str, Any]:
    """The document ``text`` holds; ``tomllib.TOMLDecodeError`` for bad TOML and for TOML past the bounds."""
    if _LONG_DOTTED_KEY.search(text):
        raise tomllib.TOMLDecodeError(f"a dotted key of over {MAX_KEY_PARTS} parts")
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        raise
    except RecursionError:
        raise tomllib.TOMLDecodeError("nested too deeply to read") from None
    except ValueError as error:  # an integer past the digits CPython converts
        raise tomllib.TOMLDecodeError(f"a value that cannot be read: {error}") from None
    _check_values(document)
    return document


def _check_values(document: dict[str, Any]) -> None:
    """Every value nested at most MAX_DEPTH levels, every integer within INTEGER_BITS (signed); walked without
    recursion, so the walk itself cannot overflow."""
    pending: list[tuple[Any, int]] = [(document, 0)]
    while pending:
        value, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise tomllib.TOMLDecodeError(f"values nested over {MAX_DEPTH} levels deep")
        if isinstance(value, int) and not -(1 << INTEGER_BITS - 1) <= value < 1 << INTEGER_BITS - 1:
            raise tomllib.TOMLDecodeError(f"an integer of {value.bit_length()} bits, past TOML's {INTEGER_BITS}-bit "
                                          f"integers")
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        pending.extend((child, depth + 1) for child in children)
