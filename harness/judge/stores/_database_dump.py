"""Reading a database store's copy: the dump the harness took at a kill (``harness/databases/dump.py``).

The dump is the harness's own file, its values cut by the readers' queries; a
table the dump holds as null was not there (the framework had not made it
yet), so nothing was durable.
"""

from __future__ import annotations

import json
from pathlib import Path

from killpoint.harness._safe_files import read_bounded
from killpoint.harness.judge.stores._store_file import STORE_LIMIT_BYTES, StoreUnreadable

DUMP_NAME = "database-dump.json"  # as harness/databases/dump.py writes it
VALUE_CHARS = 200  # the readers' queries cut a text value here: names and ids, never what a step returned


def dumped_tables(folder: Path, widths: dict[str, int]) -> list[list[tuple[object, ...]]] | None:
    """The rows each query of ``widths`` (its name, its columns' count) returned at the kill, the dump read once;
    None when a query's tables were not there yet (nothing durable). StoreUnreadable when the copy holds no dump
    of one, or rows that are not that query's."""
    try:
        tables = json.loads(read_bounded(folder / DUMP_NAME, STORE_LIMIT_BYTES))["tables"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise StoreUnreadable(f"{DUMP_NAME}: holds no dump of {next(iter(widths))} ({error})") from None
    rows_of: list[list[tuple[object, ...]]] = []
    absent = False
    for name, width in widths.items():
        try:
            table = tables[name]
        except (KeyError, TypeError) as error:
            raise StoreUnreadable(f"{DUMP_NAME}: holds no dump of {name} ({error})") from None
        if table is None:
            absent = True
            continue
        rows = table.get("rows") if isinstance(table, dict) else None
        if not isinstance(rows, list) or not all(isinstance(row, list) and len(row) == width for row in rows):
            raise StoreUnreadable(f"{DUMP_NAME}: {name} is not a dump of rows of {width} columns")
        rows_of.append([tuple(row) for row in rows])
    return None if absent else rows_of
