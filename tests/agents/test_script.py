"""The scripted model's decision: from the conversation alone, the next planned calls, a probe or a redo of a
call told unknown, or the answer."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from killpoint.harness.agents.script import (Conversation, Event, Reply, Script, ScriptError, Text, ToolCall,
                                             ToolNotOffered, ToolResult)
from tests.agents.scripted import PLAN

SCRIPT = Script.from_plan(PLAN)
IDS = ["call_kp_c1", "call_kp_c2", "call_kp_c3", "call_kp_c2_2", "call_kp_c1_verify", "call_kp_c2_verify"]


def ran(*ids: str) -> Conversation:
    """Each call made and answered with a plain result."""
    return tuple(event for ident in ids for event in (ToolCall(ident, "tool", "{}"), ToolResult(ident, "ok")))


def follow(script: Script, conversation: Conversation = ()) -> list[Reply]:
    """The replies of an agent that runs every call it is asked for, until the answer."""
    replies = [script.next_reply(conversation)]
    while replies[-1].calls:
        conversation += ran(*(call.tool_call_id for call in replies[-1].calls))
        replies.append(script.next_reply(conversation))
    return replies


events = st.one_of(
    st.builds(ToolCall, st.sampled_from(IDS), st.just("tool"), st.just("{}")),
    st.builds(ToolResult, st.sampled_from(IDS), st.sampled_from(["ok", "interrupted", '{"effect_found": false}',
                                                                 '{"effect_found": true}'])),
    st.builds(Text, st.sampled_from(["user", "system", "assistant"]),
              st.sampled_from(["hello", "call_kp_c2 may already have run", "c3: outcome unknown", "c1 done"])),
)
conversations = st.lists(events, max_size=12).map(tuple)


def test_following_the_script_makes_each_turn_then_answers() -> None:
    replies = follow(SCRIPT)
    assert [[call.tool_call_id for call in reply.calls] for reply in replies] == [
        ["call_kp_c1"], ["call_kp_c2", "call_kp_c3"], []]
    assert replies[1].calls[0].args == {"order_id": "A1", "cents": 500}
    assert replies[-1].text == PLAN["answer"] and replies[-1].done == ("c1", "c2", "c3")


@given(st.lists(conversations, min_size=2, max_size=6))
def test_the_reply_depends_only_on_the_conversation(shown: list[Conversation]) -> None:
    """One script asked many conversations in any order answers each as a fresh script asked only that one."""
    asked = Script.from_plan(PLAN)
    for conversation in shown:
        try:
            expected = Script.from_plan(PLAN).next_reply(conversation)
        except ScriptError:
            continue
        assert asked.next_reply(conversation) == expected
        assert asked.next_reply(tuple(conversation)) == expected


@given(st.permutations(list(ran("call_kp_c1", "call_kp_c2", "call_kp_c3"))),
       st.lists(st.builds(Text, st.just("user"), st.text(max_size=20).filter(
           lambda text: not any(word in text.lower() for word in ("unknown", "interrupted", "may already")))),
                max_size=4))
def test_a_conversation_holding_every_result_gets_the_answer(shuffled: list[Event], notes: list[Text]) -> None:
    reply = SCRIPT.next_reply(tuple(notes) + tuple(shuffled))
    assert reply.calls == () and reply.text == PLAN["answer"]


@given(conversations)
def test_a_reply_never_asks_again_for_a_call_it_counts_done(conversation: Conversation) -> None:
    try:
        reply = SCRIPT.next_reply(conversation)
    except ScriptError:
        return
    assert not set(reply.planned) & set(reply.done)


def test_a_call_told_unknown_is_probed_then_redone_or_skipped() -> None:
    told = ran("call_kp_c1") + (ToolCall("call_kp_c2", "charge_card", "{}"), ToolResult("call_kp_c2", "ok"),
                                ToolCall("call_kp_c3", "send_email", "{}"),
                                ToolResult("call_kp_c3", "no answer: interrupted"))
    probe = SCRIPT.next_reply(told)
    assert [(call.tool_call_id, call.tool, call.arguments) for call in probe.calls] == [
        ("call_kp_c3_verify", "verify_effect", '{"tool_call_id": "call_kp_c3"}')]
    assert probe.told_unknown == ("c3",) and probe.planned == ()
    absent = told + (ToolCall("call_kp_c3_verify", "verify_effect", "{}"),
                     ToolResult("call_kp_c3_verify", json.dumps({"effect_found": False})))
    assert [call.tool_call_id for call in SCRIPT.next_reply(absent).calls] == ["call_kp_c3_2"]
    assert SCRIPT.next_reply(absent).planned == ("c3",)
    assert SCRIPT.next_reply(absent + ran("call_kp_c3_2")).text == PLAN["answer"]
    redo_unknown = absent + (ToolCall("call_kp_c3_2", "send_email", "{}"), ToolResult("call_kp_c3_2", "ok"),
                             Text("system", "Operation call_kp_c3_2 may already have run before the interruption."))
    assert SCRIPT.next_reply(redo_unknown).text == PLAN["answer"]
    found = told[:-1] + (ToolResult("call_kp_c3", "Result UNKNOWN"), ToolCall("call_kp_c3_verify", "v", "{}"),
                         ToolResult("call_kp_c3_verify", 'probe says {"effect_found": true}'))
    assert SCRIPT.next_reply(found).text == PLAN["answer"]


def test_a_note_names_a_call_only_as_a_whole_word() -> None:
    plan = {"calls": [{"call_id": "c1", "tool": "t", "args": {}}, {"call_id": "c10", "tool": "t", "args": {}}]}
    script = Script.from_plan(plan)
    assert script.next_reply((Text("user", "call_kp_c10 was interrupted"),)).told_unknown == ("c10",)
    assert script.next_reply((Text("user", "c1 was interrupted"),)).told_unknown == ("c1",)
    assert script.next_reply((Text("user", "call_kp_c1_verify interrupted"),)).told_unknown == ()


def test_a_probe_the_agent_says_was_interrupted_is_asked_for_again() -> None:
    """verify_effect is no tool of the catalogue, so a correct agent killed during a probe tells the model the
    probe's outcome is unknown: the model probes again, under the next id, until a probe answers."""
    told = (Text("user", "call_kp_c1 interrupted"), ToolCall("call_kp_c1_verify", "verify_effect", "{}"),
            ToolResult("call_kp_c1_verify", "interrupted: this call may already have run; its outcome is unknown"))
    again = SCRIPT.next_reply(told)
    assert [(call.tool_call_id, call.tool) for call in again.calls] == [("call_kp_c1_verify_2", "verify_effect")]
    twice = told + (ToolCall("call_kp_c1_verify_2", "verify_effect", "{}"),
                    ToolResult("call_kp_c1_verify_2", "outcome unknown"))
    assert [call.tool_call_id for call in SCRIPT.next_reply(twice).calls] == ["call_kp_c1_verify_3"]
    answered = twice + (ToolCall("call_kp_c1_verify_3", "verify_effect", "{}"),
                        ToolResult("call_kp_c1_verify_3", json.dumps({"effect_found": True})))
    assert [call.tool_call_id for call in SCRIPT.next_reply(answered).calls] == ["call_kp_c2", "call_kp_c3"]


def test_a_probe_result_that_says_nothing_is_an_error() -> None:
    unclear = (Text("user", "call_kp_c1 interrupted"), ToolCall("call_kp_c1_verify", "verify_effect", "{}"),
               ToolResult("call_kp_c1_verify", "maybe"))
    with pytest.raises(ScriptError, match="call_kp_c1_verify does not say whether the effect was found"):
        SCRIPT.next_reply(unclear)


def test_a_reply_calling_a_tool_not_offered_is_refused_by_name() -> None:
    reply = SCRIPT.next_reply((Text("user", "call_kp_c1 interrupted"),))
    with pytest.raises(ToolNotOffered, match="must call verify_effect but the request offers lookup_order"):
        reply.require_offered({"lookup_order"})
    reply.require_offered({"verify_effect"})


@pytest.mark.parametrize(("plan", "message"), [
    ({"calls": [{"call_id": "a", "tool": "t"}, {"call_id": "a", "tool": "t"}]}, "planned more than once"),
    ({"calls": [{"call_id": "a_2", "tool": "t"}]}, "not end in _<digits>"),
    ({"calls": [{"call_id": "a_verify", "tool": "t"}]}, "or _verify"),
    ({"calls": [{"call_id": "a b", "tool": "t"}]}, "must be 1-48"),
    ({"calls": [{"call_id": "a", "tool": "t.x"}]}, "tool 't.x'"),
    ({"calls": [{"call_id": "a", "tool": "t", "args": [1]}]}, "args of a must be a table"),
    ({"calls": [{"call_id": "a", "tool": "t"}], "turns": [["a"], []]}, "turn of the plan holds no call"),
    ({"calls": [{"call_id": "a", "tool": "t"}], "turns": [["b"]]}, "not a planned call_id"),
    ({"calls": [{"call_id": "a", "tool": "t"}, {"call_id": "b", "tool": "t"}], "turns": [["a"]]}, "exactly once"),
    ({"calls": "a"}, "calls must be a list"),
    ({"calls": [], "answer": 3}, "answer must be a string"),
])
def test_a_plan_the_script_cannot_express_is_refused(plan: dict[str, object], message: str) -> None:
    with pytest.raises(ScriptError, match=message):
        Script.from_plan(plan)
