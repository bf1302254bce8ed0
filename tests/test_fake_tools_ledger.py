"""The fake tools' ledger records are keyed by the protocol's kinds, the ones the harness reads them by."""

from __future__ import annotations

import json
import os

from killpoint import protocol
from killpoint.fake_tools.ledger import Ledger


def test_each_ledger_record_is_keyed_by_exactly_one_tool_kind(tmp_path):
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path, incarnation=2)
    ledger.invoked("append_file", "c4")
    ledger.effect("file_appended", tool="append_file", call="c4")
    ledger.probe("effect_present", tool="append_file", call="c4")
    ledger.close()

    records = [json.loads(line) for line in path.read_text().splitlines()]
    kinds = [[key for key in record if key in (*protocol.TOOL_LEDGER_KINDS, protocol.LEDGER_KILLED)]
             for record in records]
    assert kinds == [[protocol.LEDGER_INVOKED], [protocol.LEDGER_EFFECT], [protocol.LEDGER_PROBE]]
    assert [record[kind] for record, (kind,) in zip(records, kinds)] == [
        "append_file", "file_appended", "effect_present"]
    assert all(record["call"] == "c4" and record["incarnation"] == 2 and record["pid"] == os.getpid()
               for record in records)
    assert all(record["tool"] == "append_file" for record in records[1:])
