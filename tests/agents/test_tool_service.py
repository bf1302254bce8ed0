"""The fake tools over HTTP: attributed to planned calls, held at their seams, written to the ledger, frozen."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from killpoint.client import parse_json_lines
from killpoint.harness.agents.seams import TOOL_EFFECT, TOOL_REPLY, TOOL_REQUEST, AgentKilled
from killpoint.harness.agents.tool_service import PlanIndex, ToolService

PLAN = {"task_id": "t", "calls": [
    {"call_id": "c1", "tool": "read_file", "args": {"path": "notes.txt"}},
    {"call_id": "c2", "tool": "append", "args": {"path": "log.txt", "text": "one\n"}},
]}


def post(url: str, body: bytes | dict[str, Any]) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def ledger_lines(path: Path) -> list[dict[str, Any]]:
    return [record for _, record in parse_json_lines(path.read_bytes()).records] if path.exists() else []


def test_a_call_is_attributed_by_its_arguments_whatever_their_order(world, tmp_path):
    seen: list[tuple[str, tuple[str, ...]]] = []
    with ToolService(PLAN, world, tmp_path / "ledger.jsonl", lambda point, calls, _: seen.append((point, calls))) as tools:
        tools.begin(0)
        status, answer = post(f"{tools.url}/tools/append", {"text": "one\n", "path": "log.txt"})
        tools.begin(1)
        assert post(f"{tools.url}/tools/read_file", {"path": "notes.txt"})[1]["output"] is not None
        deadline = time.monotonic() + 10  # the client has the reply before its thread has passed the seam after it
        while (TOOL_REPLY, ("c1",)) not in seen and time.monotonic() < deadline:
            time.sleep(0.01)
    assert status == 200 and answer["ok"] is True
    assert (world / "files" / "log.txt").read_text() == "one\n"
    # tool_reply comes once the reply is sent, so the next request may already be under way: in order per call.
    assert [point for point, calls in seen if calls == ("c2",)] == [TOOL_REQUEST, TOOL_EFFECT, TOOL_REPLY]
    assert [point for point, calls in seen if calls == ("c1",)] == [TOOL_REQUEST, TOOL_EFFECT, TOOL_REPLY]
    assert seen.index((TOOL_EFFECT, ("c2",))) < seen.index((TOOL_REQUEST, ("c1",)))
    lines = ledger_lines(tmp_path / "ledger.jsonl")
    assert [(line.get("invoked") or line.get("effect"), line["call"], line["incarnation"]) for line in lines] == [
        ("append", "c2", 0), ("file_appended", "c2", 0), ("read_file", "c1", 1)]


def test_an_unplanned_call_runs_nothing_and_says_what_the_plan_holds(world, tmp_path):
    with ToolService(PLAN, world, tmp_path / "ledger.jsonl") as tools:
        tools.begin(0)
        status, answer = post(f"{tools.url}/tools/append", {"path": "log.txt", "text": "two\n"})
        bad_json = post(f"{tools.url}/tools/append", b"{not json")
    assert status == 404 and "the plan calls append, read_file" in answer["error"]
    assert bad_json[0] == 400 and "not one JSON value" in bad_json[1]["error"]
    assert not (world / "files" / "log.txt").exists() and ledger_lines(tmp_path / "ledger.jsonl") == []


def test_a_request_held_when_its_agent_is_killed_acts_on_nothing_and_is_dropped_only_once_the_agent_is_dead(
        world, tmp_path):
    """Its invocation is in the ledger (it reached its tool: the agent cannot know what became of it), its effect
    never is; and its connection stays open until the harness says the agent is dead (a container's SIGKILL
    lands tens of milliseconds after the strike: a drop before would be seen, and retried or saved as a result)."""
    held, killed = threading.Event(), threading.Event()

    def hook(point: str, calls: tuple[str, ...], exchange: dict[str, Any]) -> None:
        if point == TOOL_REQUEST:
            held.set()
            killed.wait(30)
            raise AgentKilled("the harness struck")

    with ToolService(PLAN, world, tmp_path / "ledger.jsonl", hook) as tools:
        tools.begin(0)
        outcome: list[Any] = []
        caller = threading.Thread(target=lambda: outcome.append(_post_or_error(tools.url)))
        caller.start()
        assert held.wait(30)
        tools.hold_drops()
        tools.freeze()
        killed.set()
        caller.join(0.5)
        assert caller.is_alive() and not outcome  # struck, not yet dead: its connection is still open
        tools.release_drops()
        caller.join(30)
    assert outcome and isinstance(outcome[0], Exception), outcome  # the connection closed with no answer
    assert not (world / "files" / "log.txt").exists()
    assert [(line.get("invoked"), line.get("call")) for line in ledger_lines(tmp_path / "ledger.jsonl")] == [
        ("append", "c2")]


def test_a_request_behind_a_reply_whose_seam_is_struck_writes_no_invocation(world, tmp_path):
    """The agent had a reply and called its tool before the reply's seam was announced; the harness killed there.
    The request waits on that seam (``ReplyWrites``), finds the service frozen, and the ledger says nothing of
    it: the call never reached its tool before the kill."""
    with ToolService(PLAN, world, tmp_path / "ledger.jsonl") as tools:
        tools.begin(0)
        outcome: list[Any] = []
        with tools.replies.writing():  # a model reply written, its seam not yet announced
            caller = threading.Thread(target=lambda: outcome.append(_post_or_error(tools.url)))
            caller.start()
            time.sleep(0.2)
            assert ledger_lines(tmp_path / "ledger.jsonl") == []  # waiting on the seam, nothing written
            tools.freeze()  # the harness strikes at that seam
        tools.release_drops()
        caller.join(30)
    assert outcome and isinstance(outcome[0], Exception), outcome
    assert ledger_lines(tmp_path / "ledger.jsonl") == [] and not (world / "files" / "log.txt").exists()


def _post_or_error(url: str) -> Any:
    try:
        return post(f"{url}/tools/append", PLAN["calls"][1]["args"])
    except Exception as error:  # what the killed agent would have seen, had it lived
        return error


def test_a_frozen_service_lets_no_call_act_until_the_next_incarnation_begins(world, tmp_path):
    with ToolService(PLAN, world, tmp_path / "ledger.jsonl") as tools:
        tools.begin(0)
        tools.freeze()
        with pytest.raises(Exception):
            post(f"{tools.url}/tools/append", PLAN["calls"][1]["args"])
        tools.begin(1)
        assert post(f"{tools.url}/tools/append", PLAN["calls"][1]["args"])[0] == 200
    assert [line["incarnation"] for line in ledger_lines(tmp_path / "ledger.jsonl")] == [1, 1]


def test_verify_effect_probes_the_planned_call_read_only(world, tmp_path):
    with ToolService(PLAN, world, tmp_path / "ledger.jsonl") as tools:
        tools.begin(0)
        before = post(f"{tools.url}/tools/verify_effect", {"tool_call_id": "call_kp_c2"})
        post(f"{tools.url}/tools/append", PLAN["calls"][1]["args"])
        after = post(f"{tools.url}/tools/verify_effect", {"tool_call_id": "call_kp_c2_2"})
        unknown = post(f"{tools.url}/tools/verify_effect", {"tool_call_id": "call_kp_c9"})
        document = json.loads(urllib.request.urlopen(f"{tools.url}/openapi.json", timeout=30).read())
    assert before[1]["output"] == {"effect_found": False} and after[1]["output"] == {"effect_found": True}
    assert unknown[0] == 404
    assert sorted(document["paths"]) == ["/tools/append", "/tools/read_file", "/tools/verify_effect"]
    probes = [line for line in ledger_lines(tmp_path / "ledger.jsonl") if "probe" in line]
    assert [(line["call"], line["tool"]) for line in probes] == [("c2", "append"), ("c2", "append")]


def test_two_planned_calls_a_request_could_not_tell_apart_are_refused():
    plan = {"calls": [{"call_id": "a", "tool": "append", "args": {"path": "x", "text": "y"}},
                      {"call_id": "b", "tool": "append", "args": {"text": "y", "path": "x"}}]}
    with pytest.raises(ValueError, match="calls a and b both call append with the same arguments"):
        PlanIndex.of(plan)


def test_a_request_without_the_runs_secret_reaches_nothing(world, tmp_path):
    """Another process on the host (another run's agent) finds the port but not the path: a 404, no effect."""
    def status_of(url: str) -> int:
        request = urllib.request.Request(url, data=json.dumps(PLAN["calls"][1]["args"]).encode())
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        return refused.value.code

    with ToolService(PLAN, world, tmp_path / "ledger.jsonl") as tools:
        tools.begin(0)
        port = urllib.parse.urlsplit(tools.url).port
        statuses = [status_of(f"http://127.0.0.1:{port}/tools/append"),
                    status_of(f"http://127.0.0.1:{port}/x{tools.secret}/tools/append")]
    assert statuses == [404, 404]
    assert not (world / "files" / "log.txt").exists() and ledger_lines(tmp_path / "ledger.jsonl") == []


# A protocol runtime's plan may call one tool twice with the same arguments: it names its calls.
NAMED_PLAN = {"task_id": "t", "calls": [
    {"call_id": "c1", "tool": "append", "args": {"path": "log.txt", "text": "one\n"}},
    {"call_id": "c2", "tool": "append", "args": {"path": "log.txt", "text": "one\n"}},
]}


class Announced:
    """Stands in for the seam client: records each ``after_effect`` announced (point, call, op)."""

    def __init__(self) -> None:
        self.points: list[tuple[str, str | None, str | None]] = []

    def announce(self, point: str, call: str | None, op: str | None = None, *, incarnation: int | None = None) -> None:
        self.points.append((point, call, op))


def test_a_runtime_naming_its_calls_gets_the_command_lines_answers_and_the_same_ledger(world, tmp_path):
    announced = Announced()
    with ToolService(NAMED_PLAN, world, tmp_path / "ledger.jsonl", seams=announced,  # type: ignore[arg-type]
                     by_arguments=False) as tools:
        tools.begin(3)
        first = post(f"{tools.url}/calls/append", {"call": "c1", "op": "t-op1", "args": NAMED_PLAN["calls"][0]["args"]})
        probed = post(f"{tools.url}/probes/append", {"call": "c1", "args": NAMED_PLAN["calls"][0]["args"]})
        failed = post(f"{tools.url}/calls/read_file", {"call": "c9", "args": {"path": "absent.txt"}})
        by_arguments = post(f"{tools.url}/tools/append", NAMED_PLAN["calls"][0]["args"])
    assert first[0] == 200 and first[1]["ok"] is True and first[1]["error"] is None
    assert probed == (200, {"effect_found": True})
    assert failed[0] == 200 and failed[1]["ok"] is False and "absent.txt" in failed[1]["error"]
    assert by_arguments[0] == 404 and "POST /calls/append" in by_arguments[1]["error"]
    assert announced.points == [("after_effect", "c1", "t-op1"), ("after_effect", "c9", None)]
    assert [(line.get("invoked") or line.get("effect") or line.get("probe"), line["call"], line["incarnation"])
            for line in ledger_lines(tmp_path / "ledger.jsonl")] == [
        ("append", "c1", 3), ("file_appended", "c1", 3), ("effect_present", "c1", 3), ("read_file", "c9", 3)]
    assert (world / "files" / "log.txt").read_text() == "one\n"


@pytest.mark.parametrize(("body", "complaint"), [
    pytest.param(["c1"], "one JSON object", id="not-an-object"),
    pytest.param({"op": "x", "args": {}}, "'call' must be the planned call's call_id", id="no-call"),
    pytest.param({"call": "", "args": {}}, "'call' must be", id="empty-call"),
    pytest.param({"call": "c1", "op": 7, "args": {}}, "'op' must be the operation id", id="op-not-text"),
    pytest.param({"call": "c1", "args": "path=log.txt"}, "'args' must be the call's arguments", id="args-not-object"),
    pytest.param({"call": "c1", "args": {}, "opp": "x"}, "unknown field 'opp'", id="misspelt-field"),
])
def test_a_named_call_the_service_cannot_read_is_a_400_naming_the_field_and_runs_nothing(world, tmp_path, body,
                                                                                          complaint):
    with ToolService(NAMED_PLAN, world, tmp_path / "ledger.jsonl", by_arguments=False) as tools:
        tools.begin(0)
        status, answer = post(f"{tools.url}/calls/append", body)
    assert status == 400 and complaint in answer["error"], answer
    assert ledger_lines(tmp_path / "ledger.jsonl") == []


def test_a_call_waiting_out_its_latency_when_the_harness_strikes_acts_on_nothing(world, tmp_path):
    """As a tool's process killed in its latency: the invocation is recorded, no effect; the freeze does not wait
    out the latency."""
    (world / "state" / "latency.json").write_text(json.dumps({"append": 60}))
    with ToolService(NAMED_PLAN, world, tmp_path / "ledger.jsonl", by_arguments=False) as tools:
        tools.begin(0)
        outcome: list[Any] = []

        def call() -> None:
            try:
                outcome.append(post(f"{tools.url}/calls/append", {"call": "c1", "args": NAMED_PLAN["calls"][0]["args"]}))
            except Exception as error:  # the connection closed with no answer
                outcome.append(error)

        caller = threading.Thread(target=call)
        caller.start()
        deadline = time.monotonic() + 30
        while not ledger_lines(tmp_path / "ledger.jsonl") and time.monotonic() < deadline:
            time.sleep(0.01)
        frozen_at = time.monotonic()
        tools.freeze()
        assert time.monotonic() - frozen_at < 10
        caller.join(30)
    assert outcome and isinstance(outcome[0], Exception), outcome
    assert [line.get("invoked") for line in ledger_lines(tmp_path / "ledger.jsonl")] == ["append"]
    assert not (world / "files" / "log.txt").exists()


def test_a_paused_service_lets_a_call_act_only_once_the_copy_is_taken_and_a_call_acting_refuses_the_pause(
        world, tmp_path):
    """A held point's copy must see no half-made effect: a call arriving while paused waits (and then acts, as it
    would have), and while a call acts (here in its latency) there is no pause to take."""
    (world / "state" / "latency.json").write_text(json.dumps({"append": 5}))
    with ToolService(NAMED_PLAN, world, tmp_path / "ledger.jsonl", by_arguments=False) as tools:
        tools.begin(0)
        answers: list[Any] = []

        def call() -> None:
            answers.append(post(f"{tools.url}/calls/append", {"call": "c1", "args": NAMED_PLAN["calls"][0]["args"]}))

        with tools.paused() as quiet:
            assert quiet
            caller = threading.Thread(target=call)
            caller.start()
            time.sleep(0.3)  # the request reached the service, which holds it off
            assert ledger_lines(tmp_path / "ledger.jsonl") == [] and not answers
        deadline = time.monotonic() + 30
        while not ledger_lines(tmp_path / "ledger.jsonl") and time.monotonic() < deadline:
            time.sleep(0.01)
        with tools.paused() as quiet:  # the call is in its 5 s latency now
            assert not quiet
        caller.join(30)
    assert answers and answers[0][0] == 200 and answers[0][1]["ok"] is True
    assert (world / "files" / "log.txt").read_text() == "one\n"
