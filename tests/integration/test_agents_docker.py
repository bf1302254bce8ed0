"""Agents judged at their seams with each incarnation in a container that has no network of its own.

The harness makes the services' listeners inside the container's network
namespace (``harness/agents/_netns``), so the agent reaches them at the URLs it
is handed and reaches nothing else. A correct agent passes every kill there as
it does in a process; a mutant and a framework agent are named as they are.
Never skipped in CI (``docker_engine``).
"""

from __future__ import annotations

import pytest

from tests.agents.test_agent_sessions import AGENTS, assert_every_kill_passed, findings
from tests.integration.test_docker_backend import (  # noqa: F401 (fixtures: the engine, and no container left)
    docker_engine,
    leftover_sweeps_serialised,
    no_container_left_behind,
)

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("docker_engine")]


def test_the_reference_agent_in_a_container_passes_every_kill(killpoint, tmp_path):
    result = killpoint("run", AGENTS / "one_append.toml", "--exhaustive", "--backend", "docker", "-j", "2",
                       "--json", tmp_path / "report.json")
    assert result.exit_code == 0, result.out + result.err
    # One call: its five seams and its store's point (read before each request: a container is never frozen), and
    # the final answer's request and reply (which the agent may outrun under load: untested, never failed).
    assert "8 runs: " in result.out and " 0 failed" in result.out and "backend docker" in result.out, result.out
    assert_every_kill_passed(tmp_path / "report.json", 8)


def test_a_blind_retry_in_a_container_is_caught_naming_it(killpoint):
    result = killpoint("run", AGENTS / "agent-blind-retry.toml", "--kill-at", "c3:tool_effect", "--backend", "docker")
    assert result.exit_code == 1, result.out + result.err
    assert any(line.startswith("[verify-before-replay] c3 ") for line in findings(result.out, "verify-before-replay"))


@pytest.mark.parametrize(("kill", "exit_code"), [("c1:tool_request", 0), ("c3:tool_effect", 1)])
def test_the_agents_sdk_in_a_container_is_judged_as_in_a_process(killpoint, kill, exit_code):
    """A read re-run passes; the append re-run with its turn is named. Before the strike held dropped
    connections open, the SDK saved them as tool errors while the engine's kill was still on its way."""
    result = killpoint("run", AGENTS / "openai_agents_sdk.toml", "--kill-at", kill, "--backend", "docker")
    assert result.exit_code == exit_code, result.out + result.err
    if exit_code:
        named = findings(result.out, "verify-before-replay")
        assert named and all(line.startswith("[verify-before-replay] c3 ") for line in named), result.out
