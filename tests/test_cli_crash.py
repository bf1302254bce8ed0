"""A bug inside killpoint exits 4 (the harness failed, no verdict) with its traceback, never 1 (a broken rule)."""

from __future__ import annotations

import pytest

from killpoint.harness.frontends import cli
from tests.helpers import DEMO


def test_an_unexpected_error_in_the_harness_is_exit_4_not_a_verdict(monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    def broken(args: object, out: object) -> int:
        raise RuntimeError("a bug in killpoint")

    monkeypatch.setattr(cli, "command_run", broken)
    assert cli.main(["run", str(DEMO)]) == cli.EXIT_INFRASTRUCTURE
    err = capsys.readouterr().err
    assert "RuntimeError: a bug in killpoint" in err and "there is no verdict" in err
