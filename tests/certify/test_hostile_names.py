"""Tool names become certificate file names: one too long, or two on one file, is bad input, found before anything runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import CliResult

pytestmark = pytest.mark.hostile


def test_a_catalogue_name_too_long_for_a_file_or_two_names_on_one_file_are_refused(
        killpoint: Callable[..., CliResult], tmp_path: Path) -> None:
    catalogue = tmp_path / "names.toml"
    catalogue.write_text(f'[tools]\n{"y" * 300} = {{ class = "READ_ONLY" }}\nfine = {{ class = "READ_ONLY" }}\n')
    result = killpoint("certify", "--catalogue", catalogue, "--command", "true", "--out", tmp_path / "certificates")
    assert result.exit_code == 2 and "Traceback" not in result.err and result.out == "", result
    assert "the tool name is 300 characters long; a tool name has at most 128" in result.err  # no catalogue has it
    catalogue.write_text('[tools]\n"a b" = { class = "READ_ONLY" }\na_b = { class = "READ_ONLY" }\n'
                         'fine = { class = "READ_ONLY" }\n')
    result = killpoint("certify", "--catalogue", catalogue, "--command", "true", "--out", tmp_path / "certificates")
    assert result.exit_code == 2 and "Traceback" not in result.err and result.out == "", result
    assert f"certify: 1 tool name(s) cannot name a certificate in {tmp_path / 'certificates'}" in result.err
    assert "'a b', 'a_b': would share the certificate a_b.json" in result.err
    assert not (tmp_path / "certificates").exists()
