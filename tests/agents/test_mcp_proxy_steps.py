"""The harness's side of the recording proxy: each step of a proxied call writes the ledger and passes its seam.

The proxy (``mcp_proxy``) posts ``request``, ``replied`` and ``delivered`` for
each ``tools/call``; the tool service attributes the call to the plan, writes
its invocation and (for a call that succeeded with a tool that is not
READ_ONLY) its effect, and holds it at ``tool_request``, ``tool_effect`` and
``tool_reply``. The proxy runs in the agent's tree, so its steps are
untrusted: one out of order, or naming a token it was never given, is refused
and writes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from killpoint import protocol as p
from killpoint.harness.agents.mcp_endpoint import PATH
from killpoint.harness.agents.mcp_proxy import PROXY_PATH
from killpoint.harness.agents.seams import TOOL_EFFECT, TOOL_REPLY, TOOL_REQUEST
from killpoint.harness.agents import tool_service
from killpoint.harness.agents.tool_service import ToolService
from tests.agents.test_tool_service import PLAN, ledger_lines, post
from tests.test_config_errors import assert_usage_error, write

CLASSES = {"read_file": p.READ_ONLY, "append": p.NON_IDEMPOTENT}
APPEND = {"tool": "append", "arguments": {"path": "log.txt", "text": "one\n"}}


def steps(tools: ToolService) -> Any:
    def step(name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return post(f"{tools.url}{PATH}{PROXY_PATH}/{name}", body)
    return step


def test_a_proxied_call_is_invoked_held_at_its_seams_and_its_effect_written(world, tmp_path):
    seen: list[tuple[str, tuple[str, ...]]] = []
    ledger = tmp_path / "ledger.jsonl"
    with ToolService(PLAN, world, ledger, lambda point, calls, _: seen.append((point, calls)), classes=CLASSES) as tools:
        tools.begin(0)
        step = steps(tools)
        status, answer = step("request", APPEND)
        assert status == 200 and set(answer) == {"token"}
        assert [line.get("invoked") for line in ledger_lines(ledger)] == ["append"]
        assert seen == [(TOOL_REQUEST, ("c2",))]
        assert step("replied", {"token": answer["token"], "ok": True})[0] == 200
        assert tools.replies.in_flight()  # the reply is the proxy's to deliver: the agent's next request waits on it
        assert step("delivered", {"token": answer["token"]})[0] == 200
        assert not tools.replies.in_flight()
    assert seen == [(TOOL_REQUEST, ("c2",)), (TOOL_EFFECT, ("c2",)), (TOOL_REPLY, ("c2",))]
    assert [(line.get("invoked") or "effect", line["call"]) for line in ledger_lines(ledger)] == [
        ("append", "c2"), ("effect", "c2")]
    assert not (world / "files" / "log.txt").exists()  # the real server acts; the fake tools never ran


@pytest.mark.parametrize(("call", "ok"), [({"tool": "read_file", "arguments": {"path": "notes.txt"}}, True),
                                          (APPEND, False)], ids=["read-only", "failed"])
def test_a_read_or_a_failed_call_leaves_no_effect_line(world, tmp_path, call, ok):
    ledger = tmp_path / "ledger.jsonl"
    with ToolService(PLAN, world, ledger, classes=CLASSES) as tools:
        tools.begin(0)
        step = steps(tools)
        token = step("request", call)[1]["token"]
        for name in ("replied", "delivered"):
            assert step(name, {"token": token, "ok": ok, "error": "ENOENT"})[0] == 200
    assert [line.get("invoked") for line in ledger_lines(ledger)] == [call["tool"]]


def test_a_call_the_plan_does_not_hold_is_refused_and_never_invoked(world, tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    with ToolService(PLAN, world, ledger, classes=CLASSES) as tools:
        tools.begin(0)
        status, answer = steps(tools)("request", {"tool": "append", "arguments": {"path": "other.txt", "text": "x"}})
    assert status == 200 and answer == {"refused": "no planned call of append with these arguments; the plan calls "
                                                   "append, read_file"}
    assert ledger_lines(ledger) == []


@pytest.mark.parametrize("sequence", [
    [("delivered", True)],                                    # before replied
    [("replied", True), ("replied", True)],                   # twice
    [("replied", False)],                                     # a token request never answered
    [("forwarded", True)],                                    # no such step
], ids=["delivered-first", "twice", "forged-token", "unknown-step"])
def test_a_step_out_of_order_or_with_a_forged_token_is_refused_and_writes_nothing(world, tmp_path, sequence):
    seen: list[str] = []
    ledger = tmp_path / "ledger.jsonl"
    with ToolService(PLAN, world, ledger, lambda point, calls, _: seen.append(point), classes=CLASSES) as tools:
        tools.begin(0)
        step = steps(tools)
        token = step("request", APPEND)[1]["token"]
        answers = [step(name, {"token": token if genuine else "0-99", "ok": True}) for name, genuine in sequence]
    status, answer = answers[-1]
    assert status == 400 and "a call's steps are request, then replied, delivered" in answer["error"]
    assert [line.get("invoked") or "effect" for line in ledger_lines(ledger)] == ["append"] + ["effect"] * (
        len(sequence) - 1)
    assert seen == [TOOL_REQUEST] + [TOOL_EFFECT] * (len(sequence) - 1)


def test_a_call_past_the_cap_is_refused_before_anything_is_written(world, tmp_path, monkeypatch):
    monkeypatch.setattr(tool_service, "MAX_PROXIED", 1)
    ledger = tmp_path / "ledger.jsonl"
    with ToolService(PLAN, world, ledger, classes=CLASSES) as tools:
        tools.begin(0)
        step = steps(tools)
        assert step("request", APPEND)[0] == 200
        status, answer = step("request", {"tool": "read_file", "arguments": {"path": "notes.txt"}})
    assert status == 400 and "1 proxied calls are in flight already" in answer["error"]
    assert [line.get("invoked") for line in ledger_lines(ledger)] == ["append"]


def test_a_reply_its_proxy_never_delivered_stops_counting_when_the_next_incarnation_begins(world, tmp_path):
    with ToolService(PLAN, world, tmp_path / "ledger.jsonl", classes=CLASSES) as tools:
        tools.begin(0)
        step = steps(tools)
        token = step("request", APPEND)[1]["token"]
        step("replied", {"token": token, "ok": True})
        assert tools.replies.in_flight()
        tools.begin(1)  # the agent, proxy and server died before the reply was delivered
        assert not tools.replies.in_flight()
        assert step("delivered", {"token": token})[0] == 400


VERIFIED_PLAN = {**PLAN, "verify": {"c2": {"tool": "read_file", "args": {"path": "log.txt"}, "found": "one"}}}


@pytest.mark.parametrize(("text", "ok", "found"), [("one\n", True, True), ("", True, False), ("one", False, False)],
                         ids=["there", "absent", "the-read-failed"])
def test_verify_effect_is_answered_by_the_servers_read_the_scenario_names(world, tmp_path, text, ok, found):
    ledger = tmp_path / "ledger.jsonl"
    with ToolService(VERIFIED_PLAN, world, ledger, classes=CLASSES) as tools:
        tools.begin(0)
        step = steps(tools)
        status, answer = step("probe", {"arguments": {"tool_call_id": "call_kp_c2"}})
        assert status == 200 and answer["read"] == {"tool": "read_file", "arguments": {"path": "log.txt"}}
        assert step("probed", {"token": answer["token"], "text": text, "ok": ok}) == (200, {"effect_found": found})
        assert step("probed", {"token": answer["token"], "text": text, "ok": ok})[0] == 400  # once
    assert [(line.get("probe"), line["call"]) for line in ledger_lines(ledger)] == [("effect_present", "c2")]


def test_verify_effect_of_a_call_with_no_read_named_is_refused(world, tmp_path):
    with ToolService(VERIFIED_PLAN, world, tmp_path / "ledger.jsonl", classes=CLASSES) as tools:
        tools.begin(0)
        status, answer = steps(tools)("probe", {"arguments": {"tool_call_id": "call_kp_c1"}})
    assert status == 200 and "only a call its scenario gives a read for ([agent.verify]) can be checked: c2" in answer[
        "refused"]
    assert ledger_lines(tmp_path / "ledger.jsonl") == []


HEADER = ('workload = ["{python}", "-m", "killpoint.scenarios.agents.reference_agent"]\n[plan]\ntask_id = "t"\n'
          '[[plan.calls]]\ncall_id = "c1"\ntool = "read_file"\nargs = { path = "a" }\n[agent]\n')


@pytest.mark.parametrize(("table", "fragment"), [
    ('verify = 5\n', "agent.verify: must be a table of planned calls"),
    ('[agent.verify.c9]\ntool = "read"\nfound = "x"\n', "agent.verify.c9: not a planned call_id; the plan's are c1"),
    ('[agent.verify.c1]\nfound = "x"\n', "agent.verify.c1.tool: must name the server's read-only tool"),
    ('[agent.verify.c1]\ntool = "read"\n', "agent.verify.c1.found: must be the text the read returns"),
    ('[agent.verify.c1]\ntool = "read"\nfound = "x"\nargs = 3\n', "agent.verify.c1.args: must be a table"),
    ('[agent.verify.c1]\ntool = "read"\nfound = "x"\nexpect = 3\n', "agent.verify.c1.expect: unknown key"),
], ids=["not-a-table", "no-such-call", "no-tool", "no-found", "args-not-a-table", "unknown-key"])
def test_a_bad_verify_table_is_named_with_its_fix(killpoint, tmp_path, table, fragment):
    path = write(tmp_path, "s.toml", HEADER + table)
    assert_usage_error(killpoint("run", path, "--kill-at", "c1:tool_effect"), fragment)


def test_a_verify_read_that_is_not_read_only_is_refused(killpoint, tmp_path):
    """A check that may change the world is no check: the read's tool must be READ_ONLY in the catalogue."""
    path = write(tmp_path, "s.toml", HEADER + '[agent.verify.c1]\ntool = "append"\nfound = "x"\n')
    assert_usage_error(killpoint("run", path, "--kill-at", "c1:tool_effect"),
                       "agent.verify.c1.tool: 'append' is NON_IDEMPOTENT in the scenario's catalogue")
