"""A store mapping that cannot see the crash-free run's store is bad input, before any verdict.

A wrong ``[journal].path`` read as an empty store made every call look as if its start was never
durable, and ``write-ahead`` blamed a correct runtime for all of them; a status value the mapping does
not list made every run unknown, the same long reason repeated per run. The crash-free run completed
the task, so its store must be readable and hold a record of every call whose tool ran.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ROOT

SHORT = ROOT / "scenarios" / "sqlite_journal" / "short.toml"


def variant(tmp_path: Path, old: str, new: str) -> Path:
    text = SHORT.read_text()
    assert old in text
    path = tmp_path / "short.toml"
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize(("old", "new", "fragments"), [
    ('path = "agent.db"', 'path = "agents.db"',
     ("[journal]: the crash-free run left no agents.db in the workload folder", "check journal.path ('agents.db'")),
    ('SUCCEEDED = ["succeeded"]', 'SUCCEEDED = ["done"]',
     ("[journal]: the crash-free run's store cannot be read", "state 'succeeded' is not in the journal.status table")),
    ('FROM calls ORDER BY seq', "FROM calls WHERE state != 'succeeded' ORDER BY seq",
     ("[journal]: the crash-free run's sqlite store (agent.db) holds no record of c2, c3", "journal.query")),
])
def test_a_mapping_that_misreads_the_crash_free_store_is_bad_input(killpoint, tmp_path, old, new, fragments):
    result = killpoint("run", variant(tmp_path, old, new), "--exhaustive", "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 2, result.out + result.err
    for fragment in fragments:
        assert fragment in result.err, result.err
    assert "Traceback" not in result.err and "FAIL" not in result.out, result.out + result.err
    assert (tmp_path / "runs" / "golden" / "ledger.jsonl").is_file()  # the evidence named is kept
