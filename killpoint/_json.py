"""JSON read strictly, for every file and argument a person or a workload hands the harness.

Kept free of imports so the fake tools' command line, the catalogue and the
token reader can share it without loading the harness.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any


def strict_json(data: bytes) -> Any:
    """JSON as a person means it: no NaN or Infinity, no key given twice, no nesting past the parser's depth."""

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        twice = sorted(key for key, count in Counter(key for key, _ in pairs).items() if count > 1)
        if twice:
            raise ValueError(f"key(s) {', '.join(map(repr, twice))} given twice in one object")
        return dict(pairs)

    try:
        return json.loads(data.decode(), parse_constant=no_constants, object_pairs_hook=no_duplicates)
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
