"""The black-box rules: a runtime that keeps its own durable record (a ``[journal]`` scenario), judged from it.

Such a runtime writes no decisions and no class snapshots. What the rules
expect of each planned call after a kill comes from the runtime's store, copied
at the kill and read by its reader (``judge/stores``), and from the
catalogue the harness handed the incarnation that ran the call; what the
runtime did comes from the ledger (the fake tools' invoked, probe and effect
lines, split at the harness's kill markers). The state of a call at kill k is
the store's record at kill k (SUCCEEDED or FAILED); else it was interrupted
(outcome UNKNOWN) if the store holds it RUNNING or the ledger shows its tool
invoked before the kill; else it had not started. Every finding quotes the
ledger lines and the store's rows it rests on (or that the store holds none).
"""

from __future__ import annotations

from dataclasses import dataclass

from killpoint import protocol as p
from killpoint.harness.judge.evidence import Line
from killpoint.harness.judge.properties import (PROPERTY_BY_STATUS, Facts, LedgerAroundKill, WithNotes, decided,
                                                drift_excuse, expected_action, incarnations_failed, judged, of_kind,
                                                repeated_effect, timeouts_on_slow_storage)
from killpoint.harness.judge.stores._agent_seams import SEAMS_FILE
from killpoint.harness.layout import STORE_FINAL, handed_catalogue_file, store_at_kill_name, store_found_name
from killpoint.harness.model import AtPoint, DurableState, Finding, PowerLoss, StepRecord

NO_PROBE_HINT = ("no read-only probe of it was run: check with one before re-running (a killpoint fake tool's is "
                 "`python -m killpoint.fake_tools probe`; a framework step's, killpoint.frameworks.step(..., probe=...))")
# An agent judged at its seams does not probe: it tells the model, and the model asks for the probe.
NO_PROBE_HINT_AGENT = ("no read-only probe of it was run: after a restart, tell the model the call may already have "
                       "run and its outcome is unknown (its result, or a note naming its tool-call id), and the model "
                       "asks for verify_effect before it asks for the call again (docs/agents.md)")
_RECORDED = (p.SUCCEEDED, p.FAILED)
# The crash points a call reaches before its effect: a kill there leaves no effect of the incarnation it killed.
_BEFORE_EFFECT = (p.BEFORE_STARTED, p.AFTER_STARTED, p.STEP_ENTERED)
# The points a framework's saver announces once the step has returned, from its own thread (LangGraph's
# checkpointer): a kill there may land while a later step already runs, and a finding is then that step's.
_SAVER_POINTS = (p.STEP_SAVING, p.STEP_RECORDED)


@dataclass(frozen=True)
class CallAtKill:
    """One planned call at one kill, as the store and the ledger before the kill's marker show it."""

    call: str
    tool: str
    found: str  # SUCCEEDED, FAILED, OUTCOME_UNKNOWN (interrupted) or NOT_STARTED
    record: StepRecord | None  # the store's record of it, if any
    invoked: Line | None  # the last ledger line of its tool invoked before the kill
    writer: int  # the incarnation that ran it (its last invoke), else the one killed: its catalogue judges the call
    copy: str  # the store copy it was read from, as quotes name it
    held: tuple[str, ...]  # every record the copy holds, "c1 SUCCEEDED": what a missing record's quote lists

    @property
    def quoted_record(self) -> tuple[str, ...]:
        """The store's row for the call, as a finding quotes it; when it holds none, that absence and what it holds.

        A missing record is evidence too: quoting nothing would leave a reader
        unsure whether the store was read at all.
        """
        if self.record is not None:
            return (f"{self.copy}: {self.record.quote}",)
        holds = f"{len(self.held)} record(s): {', '.join(self.held)}" if self.held else "no record at all"
        return (f"{self.copy}: no record of {self.call} (it holds {holds})",)


@dataclass(frozen=True)
class StoreKill:
    """One kill with the store as the kill left it (``written``) and as the next incarnation found it."""

    around: LedgerAroundKill
    written: dict[str, CallAtKill]
    found: dict[str, CallAtKill]
    records_start: bool  # the store at the kill records a step when it begins


def store_kills(facts: Facts) -> list[StoreKill]:
    """Every kill with its store copies read as call states; needs the store copies and the kill markers."""
    evidence = facts.evidence
    kills = facts.ledger_around_kills
    result = []
    for around in kills:
        written = evidence.stores_at_kill[around.number]
        torn = around.number < len(evidence.stores_found) and evidence.stores_found[around.number] is not None
        # An agent's copy also holds its own store's files: the one judged from is named.
        judged = f"/{SEAMS_FILE}" if facts.scenario.agent is not None else ""
        found_copy = (store_found_name(around.number) if torn else store_at_kill_name(around.number)) + judged
        result.append(StoreKill(
            around, call_states(facts, kills, around, written, store_at_kill_name(around.number) + judged),
            call_states(facts, kills, around, evidence.store_found(around.number), found_copy),
            written.records_start))
    return result


def call_states(facts: Facts, kills: list[LedgerAroundKill], kill: LedgerAroundKill, store: DurableState,
                copy: str) -> dict[str, CallAtKill]:
    """Each planned call's state at ``kill``, from ``store`` (a copy at the kill) and the ledger before its marker."""
    states = {}
    held = tuple(f"{record.call} {record.status}" for record in store.records.values())
    for planned in facts.scenario.plan.calls:
        call = planned.call_id
        record = store.records.get(call)
        invokes = of_kind(kill.before, p.LEDGER_INVOKED, call)
        if record is not None and record.status in _RECORDED:
            found = record.status
        elif record is not None or invokes:
            found = p.OUTCOME_UNKNOWN
        else:
            found = p.NOT_STARTED
        ran_in = next((earlier for earlier in reversed(kills[: kill.number + 1])
                       if of_kind(earlier.segment_before, p.LEDGER_INVOKED, call)), kill)
        states[call] = CallAtKill(call, planned.tool, found, record, invokes[-1] if invokes else None,
                                  ran_in.incarnation.number, copy, held)
    return states


def judged_classes(facts: Facts, state: CallAtKill) -> list[tuple[str, bool, int]]:
    """(class, interactive, incarnation) of the call's tool by each catalogue its start may have been judged by,
    the one handed to the incarnation that ran it first.

    A decision follows the class the runtime snapshotted when it wrote the call's start, and a runtime may
    write it in an earlier incarnation than the one that ran the tool (an agent journals the model's choice,
    is killed before the tool call, and its next incarnation calls the tool). The store cannot date that
    start, so every catalogue handed up to the running incarnation is one the runtime may rightly have
    followed; they differ only under ``--drift``.
    """
    found: dict[tuple[str, bool], int] = {}
    for incarnation in sorted(facts.evidence.incarnations, key=lambda each: each.number != state.writer):
        if incarnation.number <= state.writer:
            catalogue = facts.evidence.catalogues[handed_catalogue_file(incarnation)]
            found.setdefault((catalogue.class_of(state.tool), catalogue.is_interactive(state.tool)),
                             incarnation.number)
    return [(tool_class, interactive, number) for (tool_class, interactive), number in found.items()]


# -- the rules -------------------------------------------------------------------------------------


def recorded_not_replayed(facts: Facts) -> list[Finding]:
    """A call the store recorded SUCCEEDED or FAILED at a kill never has its tool run again after it (SKIP)."""
    findings = []
    for kill in store_kills(facts):
        for call, state in kill.found.items():
            if state.found not in _RECORDED:
                continue
            if replays := of_kind(kill.around.after, p.LEDGER_INVOKED, call):
                findings.append(Finding(
                    PROPERTY_BY_STATUS[state.found],
                    f"{call} was recorded {state.found} in the store at the kill, yet its tool {state.tool} ran "
                    f"again {len(replays)} time(s) after the kill",
                    call, kill.around.point, (*state.quoted_record, replays[0].quote())))
    return findings


def verify_before_replay(facts: Facts) -> list[Finding]:
    """An interrupted call the rules make VERIFY is re-run only after a read-only probe, its effect never repeated.

    A re-run with no probe before it is at-least-once execution, said in those
    words with the effect's count; with a probe, effects beyond what the
    crash-free run leaves are still a repeat.
    """
    findings: list[Finding] = []
    unjudged: list[str] = []
    for kill in store_kills(facts):
        if kill.around.following is None:
            continue
        for call, state in kill.found.items():
            if state.found != p.OUTCOME_UNKNOWN:
                continue
            classes = judged_classes(facts, state)
            if any(expected_action(state.found, judged, interactive) != p.VERIFY for judged, interactive, _ in classes):
                continue  # a class it may rightly have followed lets it retry
            tool_class = classes[0][0]
            first = next((line for line in kill.around.segment_after if line.get("call") == call
                          and (p.LEDGER_PROBE in line.record or p.LEDGER_INVOKED in line.record)), None)
            if first is not None and p.LEDGER_INVOKED in first.record and not _probed_since_run(kill.around, call):
                findings.append(_at_least_once(facts, kill, state, tool_class, first))
            elif repeated := repeated_effect(facts, call, kill.around, unjudged):
                findings.append(repeated)
    return judged(findings, unjudged)


def _probed_since_run(around: LedgerAroundKill, call: str) -> bool:
    """A read-only probe of ``call`` came after its last run before the kill: its outcome was checked already.

    An incarnation that verified the interrupted call and was killed before
    the redo leaves the check valid, as nothing ran the call since: the next
    incarnation may redo it on that probe's word (an effect the probe missed
    is still a repeat, ``repeated_effect``).
    """
    probed = False
    for line in around.before:
        if line.get("call") == call and (p.LEDGER_INVOKED in line.record or p.LEDGER_PROBE in line.record):
            probed = p.LEDGER_PROBE in line.record
    return probed


def _at_least_once(facts: Facts, kill: StoreKill, state: CallAtKill, tool_class: str, rerun: Line) -> Finding:
    """The re-run with no probe before it, with what the store and the ledger say of the call at the kill."""
    call = state.call
    effects = of_kind(facts.evidence.ledger.lines, p.LEDGER_EFFECT, call)
    probed = of_kind(facts.evidence.ledger.lines, p.LEDGER_PROBE, call)
    hint = "" if probed else f"; {NO_PROBE_HINT_AGENT if facts.scenario.agent is not None else NO_PROBE_HINT}"
    lost = _lost_record(kill, state)
    quoted = (*state.quoted_record, *((lost.quote,) if lost else ()),
              *((state.invoked.quote(),) if state.invoked else ()), rerun.quote(),
              *(line.quote() for line in effects))
    return Finding("verify-before-replay",
                   f"at-least-once: {call} ({state.tool}, {tool_class}) was re-executed after the kill without a "
                   f"read-only check; {_landed_inside(facts, kill, state)}{_missing_record(state, facts)}"
                   f"{_said_lost(kill, lost)}"
                   f"{_effects_in_ledger(facts, kill, call, effects)}{hint}",
                   call, kill.around.point, tuple(dict.fromkeys(quoted)))


def _lost_record(kill: StoreKill, state: CallAtKill) -> StepRecord | None:
    """The call's outcome the store held as the kill left it, when the store the recovery started from had lost it
    (a power loss dropped a commit the framework had been told was done); None otherwise."""
    written = kill.written.get(state.call)
    if state.record is None and written is not None and written.record is not None and written.record.status in (
            p.SUCCEEDED, p.FAILED):
        return written.record
    return None


def _said_lost(kill: StoreKill, lost: StepRecord | None) -> str:
    if lost is None:
        return ""
    return (f"yet the store as the kill left it ({kill.written[lost.call].copy}) held it {lost.status}: the fault "
            f"after the kill (a power loss, a torn tail) lost that record; ")


def _landed_inside(facts: Facts, kill: StoreKill, state: CallAtKill) -> str:
    """Says so when a kill at an earlier step's saver point landed inside this step (empty otherwise).

    The saver announces ``step_saving`` and ``step_recorded`` from its own
    thread, so a kill there may strike while the next step already runs: the
    kill names the earlier step, the finding is this one's. The ledger shows
    it: this step's invoked line, of the incarnation killed, precedes the kill.
    """
    struck, invoked = kill.around.incarnation.kill, state.invoked
    if (not isinstance(struck, AtPoint) or struck.point not in _SAVER_POINTS or struck.call is None
            or struck.call == state.call or invoked is None
            or invoked.get("incarnation") != kill.around.incarnation.number):
        return ""
    calls = facts.scenario.plan.call_ids
    if struck.call not in calls or calls.index(state.call) <= calls.index(struck.call):
        return ""
    step = "the next step" if calls.index(state.call) == calls.index(struck.call) + 1 else "a later step"
    return (f"the kill at {struck.call}:{struck.point} landed inside {step}, {state.call}: its invoked line "
            f"({invoked.source}:{invoked.number}) precedes the kill; ")


def _missing_record(state: CallAtKill, facts: Facts) -> str:
    """Says so when the store the recovery started from holds no record of the call (empty when it holds one).

    The call was then judged interrupted on its invoked line alone, which a
    reader should not have to infer from a quote list with no store row in it.
    """
    if state.record is not None:
        return ""
    if facts.scenario.agent is not None:  # the seams' record: what the model had, not the agent's own store
        return (f"the model had received no result of {state.call} by the kill ({state.copy}): only the "
                f"ledger's invoked line says its tool request was under way; ")
    return (f"the store the recovery started from ({state.copy}) holds no record of {state.call}: only the "
            f"ledger's invoked line says it was under way; ")


def _effects_in_ledger(facts: Facts, kill: StoreKill, call: str, effects: list[Line]) -> str:
    """How many of the call's effects the ledger holds, split at the kill, beside the crash-free run's count.

    A bare total ("happened 1 time(s)") reads as if the effect ran before the
    kill; after a kill that came before it (``step_entered``) only the re-run
    made it. The ledger counts what was recorded, so the split is said as
    ledger lines, and the kill point, where it proves it, says the rest.
    """
    want = "not known" if facts.golden.effects_unknown else facts.golden.effects_per_call.get(call, 0)
    if not effects:
        return f"its effect is not in the ledger (the crash-free run: {want})"
    before = len(of_kind(kill.around.before, p.LEDGER_EFFECT, call))
    counted = (f"its effect is in the ledger {len(effects)} time(s), {before} before the kill and "
               f"{len(effects) - before} after it (the crash-free run: {want})")
    struck = kill.around.incarnation.kill
    if isinstance(struck, AtPoint) and struck.call == call and struck.point in _BEFORE_EFFECT:
        return f"{counted}; the kill came at {struck.point}, before the incarnation it killed could make the effect"
    return counted


def write_ahead(facts: Facts) -> WithNotes:
    """Where the store records a step when it begins, no tool ran before its call's record was durable; a store
    that records a step only once it returns leaves that unjudged, and says so."""
    findings = []
    kills = store_kills(facts)
    for kill in kills:
        if not kill.records_start:
            continue
        for call, state in kill.written.items():
            if state.record is None and state.invoked is not None:
                findings.append(Finding(
                    "write-ahead",
                    f"{call}'s tool {state.tool} was invoked before the kill, but the store at the kill holds no "
                    f"record of {call}, though it records a step when it begins: the tool ran before its start "
                    f"was durable", call, kill.around.point, (state.invoked.quote(),)))
            elif _lost_at_power_loss(kill, call):
                assert state.invoked is not None
                findings.append(Finding(
                    "write-ahead",
                    f"{call}'s tool {state.tool} was invoked before a power loss, and the store at the kill recorded "
                    f"{call}, but after the loss of what was never durable it holds no record of it: its start was "
                    f"written but not durable (no fsync of the file, or of its folder after a create, rename or unlink) "
                    f"when its tool ran", call, kill.around.point,
                    (state.invoked.quote(), *state.quoted_record, *facts.evidence.drops.get(kill.around.number, ()))))
    if kills and not any(kill.records_start for kill in kills):
        return WithNotes(findings, [f"write-ahead's started half is not judged: the store ({_format(facts)}) "
                                    f"records a step only once it returns, so a tool run before its start was "
                                    f"durable leaves no trace there"])
    return WithNotes(findings, [])


def _lost_at_power_loss(kill: StoreKill, call: str) -> bool:
    """The call's tool ran before this kill, a power loss, and its record was in the store at the kill but not after."""
    struck = kill.around.incarnation.kill
    written, found = kill.written[call], kill.found.get(call)
    return (struck is not None and isinstance(struck.fault, PowerLoss) and written.invoked is not None
            and written.record is not None and (found is None or found.record is None))


def liveness(facts: Facts) -> list[Finding]:
    """No incarnation hangs or fails on its own, the last exits 0, and every call the crash-free run's store
    recorded is recorded in this run's final store (else its run was lost after the crash)."""
    evidence = facts.evidence
    findings = incarnations_failed(facts)
    slowed = timeouts_on_slow_storage(facts)
    if slowed and not facts.completed():  # what the final store lacks is then what the timeout cut short
        return decided(findings, slowed)
    if not facts.completed():
        findings.append(Finding("liveness", f"the task did not complete within {len(evidence.incarnations)} "
                                            f"incarnations: the last did not exit 0"))
    final, golden = evidence.store_final, evidence.golden_store_final
    assert final is not None and golden is not None  # the rule's guard
    for call, recorded in golden.records.items():
        if recorded.status not in _RECORDED or (final.records.get(call) and final.records[call].status in _RECORDED):
            continue
        now = final.records.get(call)
        last = next((line for line in reversed(evidence.ledger.lines) if line.get("call") == call), None)
        findings.append(Finding(
            "liveness",
            f"{call}'s run was lost after the crash: the crash-free run's store records it {recorded.status}, "
            f"this run's final store {'holds it ' + now.status if now else 'holds no record of it'}",
            call, evidence=(f"golden {STORE_FINAL}: {recorded.quote}",
                            *((f"{STORE_FINAL}: {now.quote}",) if now else ()), *((last.quote(),) if last else ()))))
    if golden.completed and final.completed is False:
        findings.append(Finding("liveness", "the store does not say the task finished, as the crash-free run's does"))
    return decided(findings, slowed)


def retries_made_unsafe_by_drift(facts: Facts) -> list[str]:
    """The RETRYs the rules required only because a drifted catalogue called a tool safer than it is
    (``properties.drift_excuse``), for calls interrupted after their effect."""
    excuses = []
    for kill in store_kills(facts):
        effects_before = of_kind(kill.around.before, p.LEDGER_EFFECT)
        for call, state in kill.found.items():
            if state.found != p.OUTCOME_UNKNOWN or not any(line.get("call") == call for line in effects_before):
                continue
            for tool_class, interactive, writer in judged_classes(facts, state):
                expected = expected_action(state.found, tool_class, interactive)
                if excuse := drift_excuse(facts, kill.around.point, call, state.tool, writer, tool_class, expected):
                    excuses.append(excuse)
                    break
    return excuses


def _format(facts: Facts) -> str:
    return str(facts.scenario.journal.format if facts.scenario.journal is not None else None)
