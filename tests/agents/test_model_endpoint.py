"""The endpoint's HTTP: the real APIs' errors for malformed requests, its bounds, the models list, and the two
seams where the harness holds a request and may kill the agent."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.parse
from typing import Any

import anthropic
import openai
import pytest

from killpoint.fake_tools.world import seed_world
from killpoint.harness.agents.model_endpoint import MAX_BODY_BYTES, AgentKilled, ModelEndpoint
from killpoint.harness.agents.script import Script
from killpoint.harness.agents.services import AgentServices, SeamRecord
from killpoint.harness.judge.stores._agent_seams import SEAMS_FILE
from tests.agents.scripted import PLAN, chat_tools, result_of


def port_of(endpoint: ModelEndpoint) -> int:
    port = urllib.parse.urlsplit(endpoint.url).port
    assert port is not None
    return port


def post(endpoint: ModelEndpoint, path: str, body: bytes | dict[str, Any],
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", port_of(endpoint), timeout=10)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    connection.request("POST", f"/{endpoint.secret}{path}", data, {"Content-Type": "application/json", **(headers or {})})
    response = connection.getresponse()
    return response.status, json.loads(response.read())


CHAT = {"model": "m", "messages": [{"role": "user", "content": "go"}], "tools": chat_tools()}


@pytest.mark.parametrize(("path", "body", "status", "error"), [
    ("/v1/chat/completions", b"{not json", 400, {"type": "invalid_request_error", "param": None, "code": None}),
    ("/v1/chat/completions", {"messages": []}, 400, {"message": "you must provide a model parameter"}),
    ("/v1/chat/completions", {"model": "m"}, 400, {"message": "Missing required parameter: 'messages'.",
                                                   "code": "missing_required_parameter"}),
    ("/v1/responses", {"model": "m"}, 400, {"message": "Missing required parameter: 'input'.", "param": "input"}),
    ("/v1/chat/completions", {**CHAT, "messages": [{"role": "tool", "tool_call_id": "x", "content": "?"}]}, 400,
     {"param": "messages.[0].role"}),
    ("/v1/embeddings", {"model": "m"}, 404, {"code": "unknown_url"}),
])
def test_malformed_openai_requests_get_the_real_apis_status_and_error_shape(
        endpoint: ModelEndpoint, path: str, body: bytes | dict[str, Any], status: int, error: dict[str, Any]) -> None:
    got_status, got = post(endpoint, path, body)
    assert got_status == status and set(got) == {"error"}
    assert error.items() <= got["error"].items()


@pytest.mark.parametrize(("body", "message"), [
    ({"model": "m", "messages": [{"role": "user", "content": "go"}]}, "max_tokens: Field required"),
    ({"max_tokens": 9, "messages": []}, "model: Field required"),
    (b"[1, 2", None),
])
def test_malformed_anthropic_requests_get_its_error_shape(endpoint: ModelEndpoint, body: bytes | dict[str, Any],
                                                          message: str | None) -> None:
    status, got = post(endpoint, "/v1/messages", body, {"anthropic-version": "2023-06-01"})
    assert status == 400 and got["type"] == "error" and got["error"]["type"] == "invalid_request_error"
    assert message is None or got["error"]["message"] == message


def test_a_body_past_the_bound_is_refused_before_it_is_read(endpoint: ModelEndpoint) -> None:
    with socket.create_connection(("127.0.0.1", port_of(endpoint)), timeout=10) as client:
        client.sendall(f"POST /{endpoint.secret}/v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_BODY_BYTES + 1}"
                       f"\r\n\r\n".encode())
        answer = b"".join(iter(lambda: client.recv(4096), b"")).decode()
    assert answer.startswith("HTTP/1.1 413 ") and '"type": "request_too_large"' in answer


def test_a_client_that_stops_sending_is_dropped_at_the_timeout() -> None:
    with ModelEndpoint(Script.from_plan(PLAN), io_timeout=0.3) as endpoint:
        with socket.create_connection(("127.0.0.1", port_of(endpoint)), timeout=10) as client:
            client.sendall(b"POST /%s/v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
                           % endpoint.secret.encode())
            started = time.monotonic()
            assert client.recv(4096) == b""
        assert time.monotonic() - started < 5
        assert endpoint.exchanges[-1]["outcome"].startswith("request not received")


def test_the_models_list_names_the_model_the_agent_asked_for(endpoint: ModelEndpoint) -> None:
    models = openai.OpenAI(base_url=f"{endpoint.url}/v1", api_key="x", max_retries=0).models
    assert [model.id for model in models.list()] == ["killpoint-scripted"]
    post(endpoint, "/v1/chat/completions", {**CHAT, "model": "gpt-agent"})
    assert [model.id for model in models.list()] == ["gpt-agent"]
    listed = anthropic.Anthropic(base_url=endpoint.url, api_key="x", max_retries=0).models.list()
    assert [model.id for model in listed] == ["gpt-agent"]


class Seams:
    """A hook that records each seam, can hold ``model_request`` until released, and can kill at one point."""

    def __init__(self, kill_at: str | None = None) -> None:
        self.seen: list[tuple[str, tuple[str, ...]]] = []
        self.kill_at = kill_at
        self.held = threading.Event()
        self.release = threading.Event()
        self.release.set()

    def __call__(self, point: str, calls: tuple[str, ...], exchange: dict[str, Any]) -> None:
        self.seen.append((point, calls))
        if point == "model_request":
            assert "reply" not in exchange and exchange["request"].startswith("{")
            self.held.set()
            assert self.release.wait(10)
        if point == self.kill_at:
            raise AgentKilled(point)


def chat_round(endpoint: ModelEndpoint) -> list[tuple[str, str, str]]:
    """Drive the chat API to the answer, the calls of every reply in order."""
    chat: Any = openai.OpenAI(base_url=f"{endpoint.url}/v1", api_key="x", max_retries=0).chat.completions
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    made = []
    while calls := chat.create(model="m", messages=messages, tools=chat_tools()).choices[0].message.tool_calls:
        made += [(call.id, call.function.name, call.function.arguments) for call in calls]
        messages.append({"role": "assistant", "tool_calls": [call.to_dict() for call in calls]})
        messages += [{"role": "tool", "tool_call_id": call.id,
                      "content": result_of(call.function.name, call.function.arguments)} for call in calls]
    return made


def test_the_hook_sees_each_request_and_reply_with_the_calls_it_chooses() -> None:
    seams = Seams()
    with ModelEndpoint(Script.from_plan(PLAN), hook=seams) as endpoint:
        chat_round(endpoint)
        assert endpoint.settle(10)  # the client has the last reply before its thread has passed the seam after it
    assert seams.seen == [("model_request", ("c1",)), ("model_reply", ("c1",)),
                          ("model_request", ("c2", "c3")), ("model_reply", ("c2", "c3")),
                          ("model_request", ()), ("model_reply", ())]
    assert [(exchange["outcome"], exchange["done"]) for exchange in endpoint.exchanges] == [
        ("answered", []), ("answered", ["c1"]), ("answered", ["c1", "c2", "c3"])]


def test_a_held_request_is_answered_only_once_the_hook_returns() -> None:
    seams = Seams()
    seams.release.clear()
    with ModelEndpoint(Script.from_plan(PLAN), hook=seams) as endpoint:
        answered: list[int] = []
        sender = threading.Thread(target=lambda: answered.append(post(endpoint, "/v1/chat/completions", CHAT)[0]))
        sender.start()
        assert seams.held.wait(10)
        time.sleep(0.2)
        assert answered == [] and seams.seen == [("model_request", ("c1",))]
        seams.release.set()
        sender.join(10)
    assert answered == [200]


@pytest.mark.parametrize("stream", [False, True])
def test_an_agent_killed_at_the_request_gets_nothing_and_sees_the_connection_drop(stream: bool) -> None:
    with ModelEndpoint(Script.from_plan(PLAN), hook=Seams(kill_at="model_request")) as endpoint:
        chat: Any = openai.OpenAI(base_url=f"{endpoint.url}/v1", api_key="x", max_retries=0).chat.completions
        with pytest.raises(openai.APIConnectionError):
            chat.create(model="m", messages=[{"role": "user", "content": "go"}], tools=chat_tools(), stream=stream)
        with socket.create_connection(("127.0.0.1", port_of(endpoint)), timeout=10) as client:
            body = json.dumps(CHAT).encode()
            client.sendall(b"POST /%s/v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                           % (endpoint.secret.encode(), len(body), body))
            assert client.recv(4096) == b""
    assert endpoint.exchanges[-1]["outcome"] == "agent killed at model_request: nothing written"


def test_an_agent_killed_after_the_reply_has_the_whole_reply() -> None:
    seams = Seams(kill_at="model_reply")
    with ModelEndpoint(Script.from_plan(PLAN), hook=seams) as endpoint:
        status, reply = post(endpoint, "/v1/chat/completions", CHAT)
        assert endpoint.settle(10)  # the client has the reply before its thread has passed the seam after it
    assert status == 200 and reply["choices"][0]["message"]["tool_calls"][0]["id"] == "call_kp_c1"
    assert seams.seen == [("model_request", ("c1",)), ("model_reply", ("c1",))]
    assert endpoint.exchanges[-1]["outcome"] == "answered; agent killed at model_reply"


def test_a_reply_the_agent_already_has_is_in_the_record_saved_the_moment_it_exits(tmp_path, monkeypatch) -> None:
    """An agent may exit the instant it reads its final answer, while the thread that wrote the answer has yet to
    record it: a record saved then said the task never finished, a liveness finding against a correct agent (a
    soak beside a CPU hog found 6 in 400 runs). ``save`` waits for every written reply to be recorded."""
    recorded = SeamRecord.__call__

    def slow_to_record(record: SeamRecord, point: str, calls: tuple[str, ...], exchange: dict[str, Any]) -> None:
        if point == "model_reply":
            time.sleep(0.5)  # the handler thread, descheduled after its reply went out
        recorded(record, point, calls, exchange)

    monkeypatch.setattr(SeamRecord, "__call__", slow_to_record)
    seed_world(tmp_path / "world", {}, {})
    services = AgentServices.start(PLAN, tmp_path / "world", tmp_path / "ledger.jsonl", None)
    try:
        services.begin(0)
        chat_round(services.model)
        services.save(tmp_path / "store")
    finally:
        services.close()
    replies = [json.loads(line) for line in (tmp_path / "store" / SEAMS_FILE).read_text().splitlines()]
    assert [line["answer"] for line in replies if "model_reply" in line] == [False, False, True]
