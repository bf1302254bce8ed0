"""A started scripted model endpoint serving the plan of tests/agents/scripted.py, closed after the test; the fake
world the tool service's tests act on."""

from __future__ import annotations

import platform
from collections.abc import Iterator
from pathlib import Path

import pytest
from inotify_simple import INotify

from killpoint.fake_tools.world import seed_world
from killpoint.harness.agents.model_endpoint import ModelEndpoint
from killpoint.harness.agents.script import Script
from tests.agents.scripted import PLAN

# The openai and anthropic clients name the machine in their headers, and Python learns the processor by running
# `uname -p` once per interpreter: run it here, at collection, so no test is taken for one that starts processes.
platform.processor()
# inotify_simple finds libc with `ldconfig -p` at its first watch (the store's crash point watches): likewise.
INotify().close()


@pytest.fixture
def world(tmp_path: Path) -> Path:
    seed_world(tmp_path / "world", {"notes.txt": "tea\n"}, {})
    return tmp_path / "world"


@pytest.fixture
def endpoint() -> Iterator[ModelEndpoint]:
    with ModelEndpoint(Script.from_plan(PLAN)) as served:
        yield served
