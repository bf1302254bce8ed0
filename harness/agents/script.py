"""The scripted model's plan and its one decision: what to answer, given the conversation it is shown.

The model is stateless on purpose. A killed agent that restarts resends a request it already sent (or, when it
is durable, sends none), so an answer that depended on the order or the number of requests would differ between
a crashed run and a clean one and the verdict would judge the script, not the agent. ``Script.next_reply`` reads
only the conversation: which planned calls already have a result, and which the agent has told the model may
already have run (the recovery rules' VERIFY, done as a note to the model). Pure logic, no I/O: every wire
format turns its request into the neutral ``Conversation`` defined here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from killpoint.errors import InternalError
from killpoint.harness.agents._loopback import excerpt

PROBE_TOOL = "verify_effect"
# Words that, in a text naming a call, tell the model the call's outcome is unknown (case-insensitive).
UNKNOWN_MARKERS = ("unknown", "interrupted", "may already have run")
ID_PREFIX = "call_kp_"
PROBE_SUFFIX = "_verify"
# Anthropic's rule for tool_use ids (OpenAI's is laxer); a call_id ending in _<digits> or _verify is refused so
# that an attempt's id or a probe's id can never be another call's id.
_CALL_ID = re.compile(r"[A-Za-z0-9_-]{1,48}")
_AMBIGUOUS_CALL_ID = re.compile(r".*_(\d+|verify)")
# OpenAI's rule for function names (Anthropic's is the same but for the length).
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SCRIPTED_ID = re.compile(rf"{ID_PREFIX}(?P<call>[A-Za-z0-9_-]{{1,48}}?)(_\d+)?(?P<probe>{PROBE_SUFFIX}(_\d+)?)?")
_EFFECT_FOUND = re.compile(r'"effect_found"\s*:\s*(true|false)')
# An error message quoting what the agent sent quotes at most this many values of this many characters each: the
# message is kept in the exchange (up to 10,000 of them), and a request may hold 16 MiB of names or ids.
QUOTED_VALUES = 10
QUOTED_CHARS = 200


def quoted(values: Iterable[str]) -> str:
    """``values`` as an error message lists them: comma-separated, each cut to an excerpt, the first
    ``QUOTED_VALUES`` only and how many more."""
    listed = list(values)
    shown = ", ".join(excerpt(value, QUOTED_CHARS) for value in listed[:QUOTED_VALUES])
    return shown + (f" and {len(listed) - QUOTED_VALUES} more" if len(listed) > QUOTED_VALUES else "")


class ScriptError(InternalError, ValueError):
    """A plan the script cannot express, or a conversation it cannot answer from (the message says why)."""


class ToolNotOffered(ScriptError):
    """The reply would call a tool the request did not offer: answering anyway would be a silent wrong answer."""


@dataclass(frozen=True)
class ToolCall:
    """The assistant asked for a tool call (its id as the model gave it, the tool, its arguments as JSON text)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolResult:
    """The agent reported a tool call's result to the model."""

    id: str
    text: str


@dataclass(frozen=True)
class Text:
    """Any other text in the conversation: a user, system or assistant message (a note, an instruction)."""

    role: str
    text: str


Event = ToolCall | ToolResult | Text
Conversation = tuple[Event, ...]


@dataclass(frozen=True)
class PlannedCall:
    """One tool call of the plan; ``call_id`` names it in evidence and in every attempt's tool-call id."""

    call_id: str
    tool: str
    args: Mapping[str, object] = field(hash=False)

    def attempt_id(self, attempt: int) -> str:
        """The tool-call id of an attempt: ``call_kp_c1`` first, ``call_kp_c1_2`` for the first redo."""
        return f"{ID_PREFIX}{self.call_id}" if attempt == 1 else f"{ID_PREFIX}{self.call_id}_{attempt}"


@dataclass(frozen=True)
class ChosenCall:
    """A tool call the reply makes: an attempt of a planned call, or the read-only probe of one's effect."""

    tool_call_id: str
    tool: str
    args: Mapping[str, object] = field(hash=False)
    call_id: str
    probe: bool

    @property
    def arguments(self) -> str:
        """The arguments as the JSON text the OpenAI APIs carry."""
        return json.dumps(self.args)


@dataclass(frozen=True)
class Reply:
    """What the model answers: tool calls (several are parallel calls) or, with none left, the final text.
    ``done`` and ``told_unknown`` are what the conversation showed, kept as evidence of why."""

    calls: tuple[ChosenCall, ...]
    text: str | None
    done: tuple[str, ...]
    told_unknown: tuple[str, ...]

    @property
    def planned(self) -> tuple[str, ...]:
        """The call_ids of the planned calls this reply asks to run (probes excluded; empty for the answer)."""
        return tuple(call.call_id for call in self.calls if not call.probe)

    def require_offered(self, offered: Collection[str]) -> None:
        """Refuse a reply that calls a tool the request does not offer (the offered names, the agent's, quoted
    bounded)."""
        missing = sorted({call.tool for call in self.calls} - set(offered))
        if missing:
            raise ToolNotOffered(
                f"the scripted model must call {', '.join(missing)} but the request offers "
                f"{quoted(sorted(offered)) or 'no tools'}; give the agent every tool of the plan"
                + (f" and the read-only probe {PROBE_TOOL}" if PROBE_TOOL in missing else ""))


@dataclass(frozen=True)
class _Seen:
    """What the conversation holds, indexed: results by tool-call id, the ids the assistant called, the texts."""

    results: Mapping[str, str]
    called: frozenset[str]
    texts: tuple[str, ...]

    @classmethod
    def of(cls, conversation: Iterable[Event]) -> _Seen:
        results: dict[str, str] = {}
        called: set[str] = set()
        texts: list[str] = []
        for event in conversation:
            if isinstance(event, ToolResult):
                results.setdefault(event.id, event.text)
            elif isinstance(event, ToolCall):
                called.add(event.id)
            else:
                texts.append(event.text)
        return cls(results, frozenset(called), tuple(texts))

    def latest_attempt(self, call: PlannedCall) -> int:
        """The highest attempt of ``call`` the conversation shows (1 when it shows none)."""
        attempt = 1
        while any(call.attempt_id(attempt + 1) in ids for ids in (self.results, self.called)):
            attempt += 1
        return attempt

    def told_unknown(self, call: PlannedCall, attempt_id: str) -> bool:
        """Whether the agent told the model this attempt may already have run: its own result says so, or a
        user/system/assistant text names it (or the planned call) together with a marker."""
        result = self.results.get(attempt_id)
        if result is not None and tells_unknown(result):
            return True
        names = (_naming(attempt_id), _naming(call.call_id))
        return any(tells_unknown(text) and any(name.search(text) for name in names) for text in self.texts)


def planned_call_of(tool_call_id: str) -> tuple[str, bool] | None:
    """The call_id a scripted tool-call id names and whether it is a probe's: ``call_kp_c1_2`` is a redo of ``c1``,
    ``call_kp_c1_verify_2`` a probe of it; None for an id the scripted model never hands out (no plan is asked:
    a call_id never ends in a redo's or a probe's suffix, so the reading is unique)."""
    match = _SCRIPTED_ID.fullmatch(tool_call_id)
    return None if match is None else (match["call"], match["probe"] is not None)


def _naming(identifier: str) -> re.Pattern[str]:
    """An id as a whole word: ``call_kp_c1`` does not name ``call_kp_c1_2``, nor does ``c1`` name ``call_kp_c1``."""
    return re.compile(rf"(?<![A-Za-z0-9_-]){re.escape(identifier)}(?![A-Za-z0-9_-])")


def tells_unknown(text: str) -> bool:
    """Whether ``text`` holds a word that tells the model a call's outcome is unknown (``UNKNOWN_MARKERS``)."""
    lowered = text.lower()
    return any(marker in lowered for marker in UNKNOWN_MARKERS)


def _effect_found(probe_id: str, text: str) -> bool | None:
    """Read the probe's verdict: JSON ``{"effect_found": bool}``, or that pair inside text an agent wrapped;
    None when the agent says the probe's own outcome is unknown (it was interrupted too: a probe is a tool the
    catalogue may not list, so a correct agent VERIFYs it), which a model answers by probing again."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # the agent's text: nested past the parser's depth is no verdict either
        value = None
    if isinstance(value, dict) and isinstance(value.get("effect_found"), bool):
        return bool(value["effect_found"])
    match = _EFFECT_FOUND.search(text)
    if match is None and tells_unknown(text):
        return None
    if match is None:
        raise ScriptError(f"the result of probe {probe_id} does not say whether the effect was found "
                          f'(expected JSON {{"effect_found": true|false}}): {text[:200]!r}')
    return match.group(1) == "true"


class Script:
    """The plan the agent's model follows: ordered turns of planned calls (parallel within a turn), then the
    final answer."""

    def __init__(self, turns: Sequence[Sequence[PlannedCall]], answer: str) -> None:
        self.turns = tuple(tuple(turn) for turn in turns)
        self.answer = answer
        self.calls = tuple(call for turn in self.turns for call in turn)
        _check_calls(self.calls)
        if any(not turn for turn in self.turns):
            raise ScriptError("a turn of the plan holds no call")

    @classmethod
    def from_plan(cls, plan: Mapping[str, object]) -> Script:
        """Build from ``{"calls": [{"call_id", "tool", "args"}...], "turns": [[call_id...]...], "answer": str}``;
        without ``turns`` each call is a turn of its own, in order."""
        calls = [_planned_call(index, raw) for index, raw in enumerate(_list(plan.get("calls"), "calls"))]
        by_id = {call.call_id: call for call in calls}
        raw_turns = plan.get("turns")
        if raw_turns is None:
            turns = [[call] for call in calls]
        else:
            turns = [[_known(by_id, call_id) for call_id in _list(turn, "a turn")]
                     for turn in _list(raw_turns, "turns")]
            placed = [call.call_id for turn in turns for call in turn]
            if sorted(placed) != sorted(by_id):
                raise ScriptError(f"turns must place every call exactly once: they place {placed}, "
                                  f"the calls are {sorted(by_id)}")
        answer = plan.get("answer", "Done.")
        if not isinstance(answer, str):
            raise ScriptError(f"answer must be a string, not {answer!r}")
        return cls(turns, answer)

    def next_reply(self, conversation: Iterable[Event]) -> Reply:
        """The reply to a request showing ``conversation``: probes or redos of the calls told unknown first, else
        the not-done calls of the first unfinished turn, else the final answer."""
        seen = _Seen.of(conversation)
        done: list[str] = []
        told: list[str] = []
        recovering: list[ChosenCall] = []
        pending: dict[str, ChosenCall] = {}
        for call in self.calls:
            state = _state(call, seen)
            if state is None:
                done.append(call.call_id)
                continue
            chosen, is_told = state
            if is_told:
                told.append(call.call_id)
                recovering.append(chosen)
            else:
                pending[call.call_id] = chosen
        if recovering:
            calls = tuple(recovering)
        else:
            first = next((turn for turn in self.turns if any(call.call_id in pending for call in turn)), ())
            calls = tuple(pending[call.call_id] for call in first if call.call_id in pending)
        return Reply(calls, None if calls else self.answer, tuple(done), tuple(told))


def _state(call: PlannedCall, seen: _Seen) -> tuple[ChosenCall, bool] | None:
    """None when ``call`` is done; else what to ask for it and whether it was told unknown."""
    latest = seen.latest_attempt(call)
    for attempt in range(1, latest + 1):
        result = seen.results.get(call.attempt_id(attempt))
        if result is not None and not tells_unknown(result):
            return None
    attempt_id = call.attempt_id(latest)
    if not seen.told_unknown(call, attempt_id):
        return ChosenCall(attempt_id, call.tool, call.args, call.call_id, probe=False), False
    probe_id = attempt_id + PROBE_SUFFIX
    while (verdict := seen.results.get(probe_id)) is not None and (found := _effect_found(probe_id, verdict)) is None:
        probe_id = _next_probe(attempt_id, probe_id)  # ends: every turn of the loop reads another result
    if verdict is None:
        return ChosenCall(probe_id, PROBE_TOOL, {"tool_call_id": attempt_id}, call.call_id, probe=True), True
    if found:
        return None
    redo = call.attempt_id(latest + 1)
    return ChosenCall(redo, call.tool, call.args, call.call_id, probe=False), True


def _next_probe(attempt_id: str, probe_id: str) -> str:
    """The id of the probe after ``probe_id`` of one attempt: ``<attempt>_verify``, then ``_verify_2``, ``_verify_3``..."""
    first = attempt_id + PROBE_SUFFIX
    number = 1 if probe_id == first else int(probe_id.rsplit("_", 1)[1])
    return f"{first}_{number + 1}"


def _check_calls(calls: Sequence[PlannedCall]) -> None:
    ids = [call.call_id for call in calls]
    repeated = sorted({call_id for call_id in ids if ids.count(call_id) > 1})
    if repeated:
        raise ScriptError(f"call_id {', '.join(repeated)} is planned more than once")
    for call in calls:
        if not _CALL_ID.fullmatch(call.call_id) or _AMBIGUOUS_CALL_ID.fullmatch(call.call_id):
            raise ScriptError(f"call_id {call.call_id!r} must be 1-48 of A-Z a-z 0-9 _ - and not end in _<digits> "
                              f"or _verify (those suffixes name a redo and a probe)")
        if not TOOL_NAME.fullmatch(call.tool):
            raise ScriptError(f"tool {call.tool!r} of {call.call_id} must be 1-64 of A-Z a-z 0-9 _ -")


def _planned_call(index: int, raw: object) -> PlannedCall:
    if not isinstance(raw, Mapping):
        raise ScriptError(f"calls[{index}] must be a table with call_id, tool and args, not {raw!r}")
    call_id, tool, args = raw.get("call_id"), raw.get("tool"), raw.get("args", {})
    if not isinstance(call_id, str) or not isinstance(tool, str):
        raise ScriptError(f"calls[{index}] needs a string call_id and a string tool: {dict(raw)!r}")
    if not isinstance(args, Mapping):
        raise ScriptError(f"args of {call_id} must be a table (a JSON object), not {args!r}")
    return PlannedCall(call_id, tool, dict(args))


def _list(value: object, what: str) -> list[object]:
    if not isinstance(value, list):
        raise ScriptError(f"{what} must be a list, not {value!r}")
    return value


def _known(by_id: Mapping[str, PlannedCall], call_id: object) -> PlannedCall:
    if not isinstance(call_id, str) or call_id not in by_id:
        raise ScriptError(f"turns name {call_id!r}, which is not a planned call_id ({', '.join(sorted(by_id))})")
    return by_id[call_id]
