"""The scripted model over HTTP: OpenAI Chat Completions, OpenAI Responses and Anthropic Messages on 127.0.0.1.

The harness serves it outside the agent's process tree for the whole run, so an unmodified agent, pointed at it
by its base URL, asks it what to do across every kill. Each request is answered by ``Script.next_reply`` from
the conversation it carries, in the wire format (streamed as server-sent events or not) its SDK parses
strictly, and malformed requests get the real API's status and error JSON, so an agent that would fail against
the real API fails here too. Two seams call the hook: ``model_request`` once a request is parsed, before
anything is answered, and ``model_reply`` once the reply has been written and flushed; the hook may hold the
request while the harness kills the agent, and raises ``AgentKilled`` to drop it with nothing more written.
Every exchange is kept (bounded) for the evidence to quote.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from killpoint._json import strict_json
from killpoint.harness.agents._loopback import LoopbackServer, QuietHandler, content_length, excerpt
from killpoint.harness.agents._wire import MAX_BODY_BYTES, Answer, Api, WireError, digest
from killpoint.harness.agents._wire_anthropic import Messages
from killpoint.harness.agents._wire_openai_chat import ChatCompletions
from killpoint.harness.agents._wire_openai_responses import Responses
from killpoint.harness.agents.script import Script, ScriptError
from killpoint.harness.agents.seams import MODEL_REPLY, MODEL_REQUEST, AgentKilled, ReplyWrites, SeamHook, free_running

__all__ = ["AgentKilled", "ModelEndpoint"]

IO_TIMEOUT_S = 30.0  # a client that stops sending or reading mid-request is dropped, never waited on forever
EXCERPT_CHARS = 2_000
DEFAULT_MODEL = "killpoint-scripted"


class ModelEndpoint(LoopbackServer):
    """The scripted model for one run's agent; see the module's docstring. ``url`` is the server's root (the
    OpenAI SDKs want ``url + "/v1"`` as their base URL, the Anthropic SDK ``url``)."""

    def __init__(self, script: Script, hook: SeamHook | None = None, *, io_timeout: float = IO_TIMEOUT_S,
                 replies: ReplyWrites | None = None) -> None:
        """``replies``: where the replies being written are counted (shared with the tool service's: ``ReplyWrites``)."""
        self.script = script
        self.hook = hook or free_running
        self.apis: dict[str, Api] = {api.path: api for api in (ChatCompletions(), Responses(), Messages())}
        self._last_model = DEFAULT_MODEL
        self.replies = replies or ReplyWrites()
        super().__init__(_handler_for(self, io_timeout), "killpoint-model-endpoint")

    def settle(self, timeout: float) -> bool:
        """Wait until every reply being written has passed its ``model_reply`` seam; whether all did in time.

        An agent that has its final answer may exit at once, before the handler
        thread that wrote it has recorded the reply: the record saved then would
        say the task never finished. The seam's hook must not be waiting on the
        harness (the incarnation is struck, or ended: ``SeamClient.struck``).
        """
        return self.replies.settle(timeout)

    def models(self, anthropic: bool) -> dict[str, object]:
        """GET /v1/models: the one model, named as the agent last asked for it, in the list shape of its API."""
        model = self._last_model
        if anthropic:
            entry = {"type": "model", "id": model, "display_name": model, "created_at": "2025-01-01T00:00:00Z"}
            return {"data": [entry], "has_more": False, "first_id": model, "last_id": model}
        return {"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": "killpoint"}]}

    def respond(self, api: Api, raw: bytes, exchange: dict[str, Any]) -> Answer:
        """The answer to one request body, calling the ``model_request`` seam before it is given; raises
        ``WireError`` for a request the real API refuses, ``AgentKilled`` from the hook."""
        exchange["request"] = excerpt(raw.decode(errors="replace"), EXCERPT_CHARS)
        try:
            body = strict_json(raw)
        except ValueError as error:
            raise WireError(400, f"We could not parse the JSON body of your request: {error}. The API expects a "
                                 f"JSON payload.") from None
        if not isinstance(body, dict):
            raise WireError(400, "The request body must be a JSON object.")
        request = api.parse(body)
        exchange["stream"] = request.stream
        self._last_model = request.model
        try:
            reply = self.script.next_reply(request.conversation)
            exchange.update(done=list(reply.done), told_unknown=list(reply.told_unknown))
            reply.require_offered(request.tools)
        except ScriptError as error:
            raise WireError(400, str(error)) from None
        exchange.update(calls=list(reply.planned), tool_call_ids=[call.tool_call_id for call in reply.calls],
                        answer=reply.text is not None)
        self.hook(MODEL_REQUEST, reply.planned, exchange)
        answer = api.answer(request, reply)
        exchange["reply"] = excerpt(b"".join(answer.events).decode() if answer.events else str(answer.body),
                                    EXCERPT_CHARS)
        return answer


def _handler_for(endpoint: ModelEndpoint, io_timeout: float) -> type[QuietHandler]:
    class Handler(QuietHandler):
        # Left to Nagle's algorithm: an agent that reads its final answer may exit at once, and the pausing kill
        # at the answer's ``model_reply`` lands only while the reply's body is still on its way (held for the
        # agent's delayed acknowledgement). With the body sent at once the agent exits first, and that point's
        # kill never lands; holding that point soundly is an open question (the closing note of this change).
        nodelay = False
        timeout = io_timeout

        def do_GET(self) -> None:
            anthropic = "anthropic-version" in self.headers
            if self.path.split("?")[0].rstrip("/") == "/v1/models":
                self._send_json(200, endpoint.models(anthropic))
            else:
                self._send_error(Messages() if anthropic else ChatCompletions(), WireError(
                    404, f"Unknown request URL: GET {self.path[:200]}.", code="unknown_url"))

        def do_POST(self) -> None:
            path = self.path.split("?")[0].rstrip("/")
            api = endpoint.apis.get(path)
            if api is None:
                fallback = Messages() if "anthropic-version" in self.headers else ChatCompletions()
                self._send_error(fallback, WireError(404, f"Unknown request URL: POST {self.path[:200]}. Served: "
                                                          f"{', '.join(endpoint.apis)}.", code="unknown_url"))
                self.close_connection = True
                return
            exchange: dict[str, Any] = {"api": api.name, "path": path}
            endpoint.record(exchange)
            try:
                answer = endpoint.respond(api, self._body(), exchange)
            except OSError as error:  # the body never came whole (a timeout, a reset): nothing to answer
                exchange["outcome"] = f"request not received: {error!r}"
                self.close_connection = True
                return
            except WireError as error:
                exchange.update(status=error.status, error=excerpt(error.message, EXCERPT_CHARS))
                self._send_error(api, error)
                return
            except AgentKilled:
                exchange["outcome"] = f"agent killed at {MODEL_REQUEST}: nothing written"
                self.drop_when_dead()
                return
            with endpoint.replies.writing():
                try:
                    self._send_answer(answer)
                except OSError as error:  # the agent went away mid-reply (killed, or gave up): not sent
                    exchange.update(status=200, outcome=f"reply not delivered: {error}")
                    self.close_connection = True
                    return
                exchange.update(status=200, outcome="answered")
                try:
                    endpoint.hook(MODEL_REPLY, tuple(exchange["calls"]), exchange)
                except AgentKilled:
                    exchange["outcome"] = f"answered; agent killed at {MODEL_REPLY}"
                    self.drop_when_dead()

        def _body(self) -> bytes:
            """The request body, refused (413) past the bound before any of it is read."""
            length = content_length(self.headers.get("Content-Length"))
            if length is None:
                self.close_connection = True
                raise WireError(411, "A request needs a Content-Length header (a whole number of bytes).")
            if length > MAX_BODY_BYTES:
                self.close_connection = True
                raise WireError(413, f"Request exceeds the maximum allowed size of {MAX_BODY_BYTES} bytes.",
                                kind="request_too_large")
            return self.rfile.read(length)

        def _send_error(self, api: Api, error: WireError) -> None:
            self._send_json(error.status, api.error_body(error))

        def _send_json(self, status: int, body: Mapping[str, object]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-request-id", f"req_kp{digest(self.path, status)}")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def _send_answer(self, answer: Answer) -> None:
            if answer.body is not None:
                self._send_json(200, answer.body)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for event in answer.events:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler
