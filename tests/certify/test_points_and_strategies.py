"""Drawn arguments always validate; kill points land exactly where they say, with a real SIGKILL, and nothing outlives a trial."""

from __future__ import annotations

import builtins
import io
import os
import signal
from pathlib import Path
from typing import Any

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from killpoint.errors import ConfigError
from killpoint.fake_tools.base import REGISTRY, lookup
from killpoint.fake_tools.schema import schema_errors
from killpoint.harness.certify.adapters import (
    ExternalSpec,
    external_target,
    fake_target,
    unsupported_keywords,
)
from killpoint.harness.certify.points import Instrumented, drive, start_command
from killpoint.harness.certify.strategies import from_schema

lookup("read_file")
REPO = Path(__file__).resolve().parents[2]
TOOLS = "tests.certify.tools.helpers"
REAL_PRIMITIVES = (builtins.open, io.open, os.replace, os.open)
HANDWRITTEN = {"type": "object", "required": ["n", "tags"], "additionalProperties": False, "properties": {
    "n": {"type": "integer", "minimum": 3, "maximum": 5}, "ratio": {"type": "number", "minimum": 0, "maximum": 1},
    "tags": {"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 3}},
    "mode": {"type": "string", "enum": ["a", "b"]}, "long": {"type": "string", "minLength": 50}}}


@pytest.mark.parametrize("tool", sorted(REGISTRY))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_value_drawn_from_a_fake_tool_schema_is_valid(tool: str, data: st.DataObject) -> None:
    schema = REGISTRY[tool].schema
    assert schema_errors(schema, data.draw(from_schema(schema))) == []


@settings(max_examples=50, deadline=None)
@given(value=from_schema(HANDWRITTEN))
def test_bounds_lengths_enums_and_optional_properties_are_honoured(value: dict[str, Any]) -> None:
    assert schema_errors(HANDWRITTEN, value) == []


def test_a_schema_outside_the_subset_is_refused_naming_every_keyword(tmp_path: Path) -> None:
    schema = {"type": "object", "description": "fine", "properties": {"p": {"type": "string", "pattern": "^a"}},
              "not": {}}
    assert unsupported_keywords(schema) == ["schema.not", "schema.properties.p.pattern"]
    (tmp_path / "s.json").write_text('{"type": "object", "properties": {"p": {"format": "date"}}}')
    with pytest.raises(ConfigError) as error:
        external_target("t", ExternalSpec(command="true", schema=str(tmp_path / "s.json")))
    assert "schema.properties.p.format" in str(error.value)


def test_instrumentation_announces_each_write_under_the_world_and_nothing_outside(tmp_path: Path) -> None:
    world, outside = tmp_path / "world", tmp_path / "outside.txt"
    world.mkdir()
    with Instrumented(world, lambda label: None) as points:
        (world / "sub").mkdir()
        with open(world / "sub" / "a.txt", "w") as stream:
            stream.write("x")
            stream.write("y")
        os.replace(world / "sub" / "a.txt", world / "b.txt")
        (world / "b.txt").unlink()
        outside.write_text("not a point")
        (world / "b.txt").read_text() if (world / "b.txt").exists() else None
    assert points.labels == ["mkdir sub", "open(w) sub/a.txt", "write sub/a.txt", "write sub/a.txt",
                             "replace sub/a.txt -> b.txt", "unlink b.txt"]
    assert (builtins.open, io.open, os.replace, os.open) == REAL_PRIMITIVES, "the instrumentation was not undone"


def test_a_kill_at_each_point_of_a_fake_tool_leaves_exactly_the_writes_before_it(tmp_path: Path) -> None:
    """write_file: mkdir, open the temp file, write it, rename it, return. Killed at point k, the world shows k-1 of them."""
    target = fake_target("write_file")
    args = {"path": "out/new.txt", "content": "hello"}
    expected_tail = [None, "files/out/", "files/out/.new.txt.tmp", "files/out/.new.txt.tmp", "files/out/new.txt"]
    for point, newest in enumerate(expected_tail, start=1):
        folder = tmp_path / f"k{point}"
        folder.mkdir()
        world = target.fresh_world(folder)
        before = set(target.snapshot(world))
        run = target.kill(world, args, folder, at_point=point)
        assert run.killed_at == point and run.returncode == -signal.SIGKILL, run
        added = sorted(set(target.snapshot(world)) - before)
        assert (added[-1] if added else None) == newest or (newest and newest in added), (point, added)
    assert (world / "files/out/new.txt").read_text() == "hello"


def is_dead(pid: int) -> bool:
    """Gone, or a zombie: dead, and only waiting for its parent (init, or us if we adopted it) to reap it."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_command_is_killed_at_its_declared_point_and_its_helpers_die_with_it(tmp_path: Path) -> None:
    """One helper stays in the command's process group; the other has left it (setsid) before the kill point, so
    only the tree walk finds it.

    No wait before the last assertion: the kill returns only once it has confirmed every process of the tree dead.
    """
    world = tmp_path / "world"
    world.mkdir()
    script = ('echo one > a.txt; "$KILLPOINT_POINT" after a; sleep 30 & echo $! > helper.pid; '
              "setsid sh -c 'echo $$ > escaped.pid; exec sleep 30' & "
              'until [ -s escaped.pid ]; do sleep 0.01; done; "$KILLPOINT_POINT" after helpers; echo two > b.txt')
    run = drive(start_command(["sh", "-c", script], cwd=world, env=dict(os.environ), stdin="", scratch=tmp_path),
                kill_at=2)
    assert run.labels == ("after a", "after helpers") and run.killed_at == 2 and run.returncode == -signal.SIGKILL
    assert (world / "a.txt").exists() and not (world / "b.txt").exists()
    helpers = [int((world / name).read_text()) for name in ("helper.pid", "escaped.pid")]
    assert [pid for pid in helpers if not is_dead(pid)] == []


@pytest.mark.integration  # it starts the certify fork server and a helper, as CERTIFY_TESTS_THAT_KILL says of the rest
def test_a_python_tool_killed_in_the_fork_server_takes_the_helper_it_started_with_it(tmp_path: Path) -> None:
    target = external_target("spawn_then_write", ExternalSpec(python=f"{TOOLS}:spawn_then_write", cwd=str(REPO)))
    world = target.fresh_world(tmp_path)
    # points: open(w) helper.pid, write helper.pid, open(w) done.txt: the kill lands with the pid file closed
    run = target.kill(world, {}, tmp_path, at_point=3)
    assert run.killed_at == 3 and run.returncode == -signal.SIGKILL, run
    assert not (world / "done.txt").exists()
    assert is_dead(int((world / "helper.pid").read_text()))


@pytest.mark.integration
@pytest.mark.parametrize("kill_at", [1, None], ids=["killed at a point", "ending on its own"])
def test_a_helper_that_left_the_tree_and_session_of_a_python_tool_dies_with_it(tmp_path: Path,
                                                                              kill_at: int | None) -> None:
    """The helper's parent is gone and it called setsid: only the child's cgroup holds it. No wait before the
    assertion: the reap returns only once that cgroup is confirmed empty."""
    target = external_target("orphan_then_write", ExternalSpec(python=f"{TOOLS}:orphan_then_write", cwd=str(REPO)))
    world = target.fresh_world(tmp_path)
    run = target.kill(world, {}, tmp_path, at_point=kill_at)  # point 1: open(w) done.txt, the helper running
    orphan = int((world / "orphan.pid").read_text())
    try:
        assert run.killed_at == kill_at and (world / "done.txt").exists() == (kill_at is None), run
        assert is_dead(orphan)
    finally:
        if not is_dead(orphan):
            os.kill(orphan, signal.SIGKILL)


def test_a_command_without_points_is_killed_after_a_delay(tmp_path: Path) -> None:
    run = drive(start_command(["sh", "-c", "echo a > a.txt; sleep 5; echo b > b.txt"], cwd=tmp_path,
                              env=dict(os.environ), stdin="", scratch=tmp_path), kill_after_s=0.3)
    assert run.killed_after_s is not None and run.returncode == -signal.SIGKILL and run.seconds < 3
    assert (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()


def test_a_command_that_hangs_is_killed_at_the_timeout(tmp_path: Path) -> None:
    run = drive(start_command(["sleep", "30"], cwd=tmp_path, env=dict(os.environ), stdin="", scratch=tmp_path),
                timeout_s=0.5)
    assert run.timed_out and run.returncode == -signal.SIGKILL
