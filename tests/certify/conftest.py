"""Certification tests share one fork server per module; it is ended (and reaped) when the module is done."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from killpoint.harness.certify._fork_server import close_fork_server


@pytest.fixture(autouse=True, scope="module")
def _no_fork_server_outlives_the_module() -> Iterator[None]:
    yield
    close_fork_server()
