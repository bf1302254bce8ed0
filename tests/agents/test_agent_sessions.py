"""Agents judged at their network seams, by the real harness: real SIGKILLs of real agent processes.

The reference agent (a plain ``openai`` chat loop that obeys the rules) is the
correct runtime: it must pass every kill in every mode, a false alarm being the
worst defect. Each of its mutants breaks one rule and must be caught with that
rule named. The real frameworks' agents (the OpenAI Agents SDK, LangGraph's
prebuilt agent), unmodified but for their URLs, are judged as they are: where a
kill lands after an append's effect in a turn the framework re-runs, the append
is named; where it lands where the framework does not repeat the effect, nothing.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from killpoint.harness.agents import seam_client
from tests.helpers import ROOT

pytestmark = pytest.mark.integration

AGENTS = ROOT / "scenarios" / "agents"
REFERENCE = AGENTS / "reference_agent.toml"


def findings(out: str, rule: str) -> list[str]:
    """The report's finding lines of ``rule`` (``  [rule] c3 ...``)."""
    return [line.strip() for line in out.splitlines() if line.strip().startswith(f"[{rule}]")]


# The final answer's model_reply is the one seam an agent can outrun: the reply is already its own and no request of
# its follows to be held behind the seam (``ReplyWrites``), so under load it may print the answer and exit before the
# harness has read the seam's announcement, and the run is untested (its one incarnation exited 0, unkilled). Every
# other seam holds the agent (a held request, a frozen store) or its next request until the kill, so it must land.
FINAL_REPLY = "model_reply"


def assert_every_kill_passed(report: Path, runs: int) -> None:
    """The JSON report holds ``runs`` runs, each passed, or one whose first kill, at the final answer's model_reply,
    the agent outran: untested, having exited 0 with no kill landed (a finding there still fails the run)."""
    done = json.loads(report.read_text())["runs"]
    assert len(done) == runs, [run["schedule"] for run in done]
    for run in done:
        outran = (run["schedule"][0].split("/")[0] == FINAL_REPLY
                  and [(each["killed_at"], each["exit_code"]) for each in run["incarnations"]] == [(None, 0)])
        assert run["outcome"] == "passed" or (run["outcome"] == "untested" and outran), run


@pytest.mark.parametrize("mode", [
    ("--exhaustive",),
    ("--exhaustive", "--no-pause"),
    ("--exhaustive", "--drift", "append=IDEMPOTENT_WRITE"),
    ("--exhaustive", "--drift", "write_file=NON_IDEMPOTENT"),
    # Its journal on a disk that loses what was never fsynced: the agent fsyncs each line, and the folder once.
    ("--exhaustive", "--power-loss"),
], ids=["pausing", "no-pause", "drift-to-retry", "drift-to-verify", "power-loss"])
def test_the_reference_agent_passes_every_kill(killpoint, tmp_path, mode):
    """Three calls, two of them parallel in one turn: 5 seams and its store's point each, and the final answer's
    request and reply (which the agent may outrun: ``assert_every_kill_passed``)."""
    result = killpoint("run", REFERENCE, *mode, "-j", "2", "--json", tmp_path / "report.json")
    assert result.exit_code == 0, result.out + result.err
    assert "20 runs: " in result.out and " 0 failed" in result.out, result.out
    assert_every_kill_passed(tmp_path / "report.json", 20)


def test_the_reference_agent_passes_every_pair_of_kills(killpoint, tmp_path):
    result = killpoint("run", AGENTS / "one_append.toml", "--exhaustive", "--depth", "2", "-j", "2",
                       "--json", tmp_path / "report.json")
    assert result.exit_code == 0, result.out + result.err
    assert " 0 failed" in result.out, result.out
    runs = len(json.loads((tmp_path / "report.json").read_text())["runs"])
    assert runs > 8, runs  # the 8 first kills, each with the second kills of its recovery
    assert_every_kill_passed(tmp_path / "report.json", runs)


@pytest.mark.parametrize("mode", [(), ("--no-pause",), ("--drift", "set_status=NON_IDEMPOTENT")],
                         ids=["pausing", "no-pause", "drift"])
def test_the_reference_agent_with_tools_it_declares_passes_every_kill(killpoint, tmp_path, mode):
    """A lookup, an overwrite, a card charge and an email, declared in the scenario ([agent.tools.NAME])."""
    result = killpoint("run", AGENTS / "shop_tools.toml", "--exhaustive", *mode, "-j", "2",
                       "--json", tmp_path / "report.json")
    assert result.exit_code == 0 and "26 runs: " in result.out and " 0 failed" in result.out, result.out + result.err
    assert_every_kill_passed(tmp_path / "report.json", 26)


@pytest.mark.parametrize("kill", ["model_reply", "model_reply/now"])
def test_a_final_answer_the_agent_outran_the_kill_with_is_untested_not_failed(killpoint, tmp_path, monkeypatch,
                                                                              kill):
    """The race ``assert_every_kill_passed`` allows, made certain: after the crash-free run's, the services announce
    the final answer's model_reply only once the harness has seen the agent end (a harness descheduled under
    load), so the agent has printed the answer and exited 0 before the seam could be read. No kill landed,
    nothing was recovered: untested, never a finding, and the harness says the kill's moment never came."""
    announce = seam_client.SeamClient.announce
    final_replies: list[str] = []

    def late_at_the_final_reply(client: seam_client.SeamClient, point: str, call: str | None, op: str | None = None,
                                *, incarnation: int | None = None) -> None:
        if point == FINAL_REPLY and call is None:
            final_replies.append(point)
            deadline = time.monotonic() + 60
            while len(final_replies) > 1 and not client.is_struck() and time.monotonic() < deadline:
                time.sleep(0.01)  # the crash-free run's goes at once; the killed run's waits for its agent's end
        announce(client, point, call, op, incarnation=incarnation)

    monkeypatch.setattr(seam_client.SeamClient, "announce", late_at_the_final_reply)
    result = killpoint("run", AGENTS / "one_append.toml", "--kill-at", kill, "--json", tmp_path / "report.json")
    assert result.exit_code == 3 and "1 runs: 0 passed, 0 failed, 1 untested" in result.out, result.out + result.err
    assert "not one landed" in result.err, result.err
    assert_every_kill_passed(tmp_path / "report.json", 1)


def test_a_blind_retry_of_a_declared_card_charge_is_caught_naming_it(killpoint):
    result = killpoint("run", AGENTS / "shop_tools.toml", "--kill-at", "c3:tool_effect",
                       "--workload", "{python} -m killpoint.scenarios.agents.mutants blind-retry")
    assert result.exit_code == 1, result.out + result.err
    assert any("c3 (charge_card, NON_IDEMPOTENT) was re-executed after the kill without a read-only check" in line
               for line in findings(result.out, "verify-before-replay")), result.out
    assert "tell the model the call may already have run" in result.out  # the fix an agent's author can make


@pytest.mark.parametrize("drift", ["write_file=UNKNOWN", "write_file=NON_IDEMPOTENT"])
def test_a_call_chosen_before_a_drift_and_run_after_it_keeps_the_class_it_was_chosen_with(killpoint, drift):
    """The agent journals c2 with its class when the model chooses it; killed before the tool ran, its next
    incarnation (handed the drifted catalogue) retries c2 by that class, as the rules say. The seams record
    cannot date the start, so either class is the agent's to follow (a soak's hunt once called it a bug)."""
    result = killpoint("run", REFERENCE, "--kill-at", "c2:tool_request", "--kill-at", "c2:tool_effect",
                       "--drift", drift)
    assert result.exit_code == 0 and "1 runs: 1 passed" in result.out, result.out + result.err


@pytest.mark.parametrize(("mutant", "rule", "kill"), [
    ("blind-retry", "verify-before-replay", "c3:tool_effect"),
    ("forgets", "succeeded-not-replayed", "c3:tool_effect"),
    # Killed while the final answer's request is held: the model had c2's and c3's results, the agent re-runs them.
    ("retries-done", "succeeded-not-replayed", "model_request"),
])
def test_each_mutant_is_caught_with_its_rule_named(killpoint, mutant, rule, kill, tmp_path):
    result = killpoint("run", AGENTS / f"agent-{mutant}.toml", "--kill-at", kill, "--json", tmp_path / "report.json")
    assert result.exit_code == 1, result.out + result.err
    assert findings(result.out, rule), result.out
    # Each finding quotes the HTTP exchanges of its call beside the ledger: the tool request the replay made.
    (run,) = json.loads((tmp_path / "report.json").read_text())["runs"]
    (finding, *_) = [finding for finding in run["findings"] if finding["property"] == rule]
    requests = [json.loads(quote.split(": ", 1)[1]) for quote in finding["evidence"]
                if quote.startswith("agent-exchanges.jsonl:")]
    assert any(request.get("service") == "tools" and request.get("call") == finding["call"]
               and request.get("incarnation", 0) > 0 for request in requests), finding["evidence"]
    # And what the agent's own journal held of the call when it was killed ([agent] store).
    assert any(quote.startswith(("store-at-kill-0/agent-journal.jsonl: line ",
                                 "store-at-kill-0/agent-journal.jsonl: holds nothing"))
               for quote in finding["evidence"]), finding["evidence"]


@pytest.mark.parametrize(("framework", "store"), [("openai_agents_sdk", "session.sqlite"),
                                                   ("openai_agents_mcp", "session.sqlite"),
                                                   ("openai_agents_mcp_stdio", "session.sqlite"),
                                                   ("langgraph_prebuilt", "checkpoints.sqlite")])
def test_a_framework_agent_that_reruns_a_turn_after_an_append_is_named(killpoint, framework, store):
    """Killed after the append's effect (c3, in a turn beside c2): neither framework saved the turn's calls,
    so the restart runs the append again, with no read-only check; the framework's own store, quoted, shows it
    kept no result of c3 at the kill and kept one by the end."""
    result = killpoint("run", AGENTS / f"{framework}.toml", "--kill-at", "c3:tool_effect")
    assert result.exit_code == 1, result.out + result.err
    named = findings(result.out, "verify-before-replay")
    assert named and all(line.startswith("[verify-before-replay] c3 ") for line in named), result.out
    at_kill = [line.strip() for line in result.out.splitlines() if line.strip().startswith(f"store-at-kill-0/{store}")]
    final = [line.strip() for line in result.out.splitlines() if line.strip().startswith(f"store-final/{store}")]
    assert at_kill and not any("holds the result of call_kp_c3" in line for line in at_kill), result.out
    assert any("holds the result of call_kp_c3:" in line for line in final), result.out


def test_an_agent_store_the_crash_free_run_never_made_is_bad_input(killpoint, tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(REFERENCE.read_text().replace('store = "agent-journal.jsonl"', 'store = "session.db"'))
    result = killpoint("run", scenario, "--kill-at", "c1:tool_effect")
    assert result.exit_code == 2, result.out + result.err
    assert "agent.store: the crash-free run left no 'session.db' in the workload folder" in result.err, result.err


def test_an_agent_with_no_durable_state_runs_again_what_the_model_had_the_result_of(killpoint):
    """Pydantic AI with nothing durable wired in: killed while the request carrying c1's result is held, it starts
    the task again and reads the note a second time."""
    result = killpoint("run", AGENTS / "pydantic_ai_agent.toml", "--kill-at", "c2:model_request")
    assert result.exit_code == 1, result.out + result.err
    named = findings(result.out, "succeeded-not-replayed")
    assert named and named[0].startswith("[succeeded-not-replayed] c1 "), result.out


# LangGraph saves a step in the background by default ("async"), racing the next step's model request: only
# with "sync" is the step saved before that request, held, is sent (the next test judges the default).
SAVED_BEFORE_THE_NEXT_STEP = {"langgraph_prebuilt": (
    "--workload", "{python} -m killpoint.scenarios.agents.langgraph_prebuilt --durability sync")}


@pytest.mark.parametrize("framework", ["openai_agents_sdk", "openai_agents_mcp", "openai_agents_mcp_stdio",
                                       "langgraph_prebuilt"])
@pytest.mark.parametrize("kill", ["c1:tool_request", "c1:tool_effect", "c2:model_request", "model_request"])
def test_a_framework_agent_killed_where_it_repeats_no_effect_passes(killpoint, framework, kill):
    """A read re-run (RETRY), a turn the model is about to choose, the final answer's request: held seams, where
    the kill lands at the same place every time (at a reply's the agent runs on until it lands)."""
    result = killpoint("run", AGENTS / f"{framework}.toml", "--kill-at", kill,
                       *SAVED_BEFORE_THE_NEXT_STEP.get(framework, ()))
    assert result.exit_code == 0, result.out + result.err


SLOW_SAVER = f"{{python}} {ROOT / 'tests' / 'agents' / 'langgraph_slow_saver.py'}"


@pytest.mark.parametrize(("durability", "exit_code"), [("", 1), ("--durability sync", 0)],
                         ids=["default-async", "sync"])
def test_langgraphs_default_durability_loses_the_step_whose_result_the_model_had(killpoint, durability, exit_code):
    """LangGraph's default saves a step in the background while the next step asks the model; with a saver slower
    than that request (half a second a save), the kill there finds the read's step unsaved, and the restart reads
    the note again though the model had its result: named, with the checkpoints at the kill quoted. Saved before
    the next step ("sync"), the same kill finds it saved and passes. (CI once caught the stock agent in this race.)"""
    result = killpoint("run", AGENTS / "langgraph_prebuilt.toml", "--kill-at", "c2:model_request",
                       "--workload", f"{SLOW_SAVER} {durability}")
    assert result.exit_code == exit_code, result.out + result.err
    if exit_code:
        named = [line.strip() for line in result.out.splitlines() if re.match(r"\s*\[[a-z-]+\] c\d ", line)]
        assert named and all(line.startswith("[succeeded-not-replayed] c1 ") for line in named), result.out
        assert "store-at-kill-0/checkpoints.sqlite: holds nothing of c1" in result.out, result.out


def test_a_hunt_over_the_reference_agent_finds_nothing(killpoint, tmp_path):
    """Drawn plans (each call once a plan), one or two kills at the seams, drift: a correct agent passes them all."""
    result = killpoint("hunt", REFERENCE, "--examples", "12", "--seed", "1", "--out", tmp_path / "out")
    assert result.exit_code == 0, result.out + result.err
    assert "no failure in 12 examples" in result.out, result.out


def test_a_hunt_finds_and_shrinks_the_blind_retry_and_its_scenario_reproduces(killpoint, tmp_path):
    out = tmp_path / "out"
    result = killpoint("hunt", REFERENCE, "--workload", "{python} -m killpoint.scenarios.agents.mutants blind-retry",
                       "--examples", "60", "--seed", "0", "--out", out)
    assert result.exit_code == 1, result.out + result.err
    assert "[verify-before-replay]" in result.out, result.out
    found = out / "hunt-found.toml"
    assert "[agent]" in found.read_text()
    token = next(line.split()[-1] for line in result.out.splitlines() if line.startswith("reproduce:"))
    replayed = killpoint("repro", token)
    assert replayed.exit_code == 1 and "reproduced" in replayed.out, replayed.out + replayed.err
