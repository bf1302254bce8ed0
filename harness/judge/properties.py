"""The recovery rules' judgements, each a function of the run's facts returning findings.

The checker (``judge/checker``) runs each behind its guard: a judgement here
may assume the evidence its rule declares it needs is all there. Everything is
judged from the journal, the ledger and the world against the checker's own
table of the recovery rules (recovery-rules.md); the runtime's code is never
called, and what the runtime announces (its crash points) never exempts it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from killpoint import protocol as p
from killpoint.catalogue import Catalogue
from killpoint.errors import InternalError
from killpoint.fake_tools.world import diff_snapshots
from killpoint.harness.judge.evidence import Evidence, Line, MissingEvidence
from killpoint.harness.layout import RunPaths, handed_catalogue_file
from killpoint.harness.model import Finding, GoldenRun, Incarnation, PowerLoss

if TYPE_CHECKING:
    from killpoint.harness.model import Scenario

# Property names, in the order findings are reported (the rules' order).
PROPERTIES: dict[str, str] = {
    "succeeded-not-replayed": "an operation SUCCEEDED at the kill is decided SKIP and never runs again",
    "interrupted-action": "an operation RUNNING at the kill gets RETRY or VERIFY as the matrix says",
    "verify-before-replay": "a VERIFY re-runs a call only after a read-only check, and its effect ends exactly once",
    "failed-not-replayed": "FAILED and NOT_STARTED operations are decided SKIP and not replayed by the recovery",
    "liveness": "after recovery the task completes; no incarnation crashes or hangs on its own",
    "world-equals-golden": "the recovered world equals the world of the same plan run without a crash",
    "write-ahead": "the journal never runs ahead of the world: started is durable before the tool runs, finished after",
    "journal-well-formed": "one op id per call, finished after started, class snapshots as the catalogue says, one decision per call",
}

# The decision matrix, as the checker's own table (not the runtime's code).
ACTION_BY_STATUS = {p.SUCCEEDED: p.SKIP, p.FAILED: p.SKIP, p.NOT_STARTED: p.SKIP}
ACTION_BY_CLASS = {p.READ_ONLY: p.RETRY, p.IDEMPOTENT_WRITE: p.RETRY, p.NON_IDEMPOTENT: p.VERIFY, p.UNKNOWN: p.VERIFY}
PROPERTY_BY_STATUS = {p.SUCCEEDED: "succeeded-not-replayed", p.FAILED: "failed-not-replayed",
                      p.NOT_STARTED: "failed-not-replayed", p.OUTCOME_UNKNOWN: "interrupted-action"}


def expected_action(found: str, tool_class: str, interactive: bool) -> str:
    """What the rules say recovery does with an operation found in state ``found``."""
    if found in ACTION_BY_STATUS:
        return ACTION_BY_STATUS[found]
    return p.RETRY if interactive else ACTION_BY_CLASS[tool_class]


@dataclass
class OpState:
    """The checker's own fold of one call's journal records."""

    call: str
    op: str
    started: Line
    status: str = p.RUNNING
    starts: int = 1
    closing: Line | None = None
    closed_by_verify: bool = False

    @property
    def found(self) -> str:
        return p.OUTCOME_UNKNOWN if self.status == p.RUNNING else self.status


def fold_journal(lines: tuple[Line, ...]) -> dict[str, OpState]:
    """Operation state per call: ``started`` makes it RUNNING, ``finished`` sets its status."""
    states: dict[str, OpState] = {}
    by_op: dict[str, OpState] = {}
    verified_present: set[str] = set()
    for line in lines:
        kind = line.get("kind")
        if kind == p.STARTED and line.get("call") is not None:
            state = states.get(line.get("call"))
            if state is None:
                state = states[line.get("call")] = OpState(line.get("call"), line.get("op"), line)
            else:
                state.status, state.starts, state.started = p.RUNNING, state.starts + 1, line
            by_op[line.get("op")] = state
        elif kind == p.VERIFIED and line.get("effect_found") is True:
            verified_present.add(line.get("op"))
        elif kind == p.FINISHED and line.get("op") in by_op and line.get("status") in (p.SUCCEEDED, p.FAILED):
            # A finished record with any other status closes nothing (journal-well-formed names it).
            state = by_op[line.get("op")]
            state.status, state.closing = line.get("status"), line
            state.closed_by_verify = line.get("op") in verified_present
    return states


@dataclass(frozen=True)
class LedgerAroundKill:
    """One kill the harness made, with the ledger around it (a scheduled one is a ``model.Kill``)."""

    number: int  # 0 for the first kill of the run
    incarnation: Incarnation  # the one killed
    point: str
    segment_before: list[Line]  # ledger lines of the tools between the previous kill (or the start) and this one
    before: list[Line]  # ledger lines of the tools before this kill
    segment_after: list[Line]  # ledger lines of the tools between this kill and the next
    after: list[Line]  # ledger lines of the tools after this kill
    following: Incarnation | None


@dataclass(frozen=True)
class StruckKill(LedgerAroundKill):
    """One kill with the journal as it was written at the kill and as the next incarnation found it."""

    written: dict[str, OpState] = field(default_factory=dict)  # the journal's operations when the kill was confirmed
    found_lines: tuple[Line, ...] = ()  # the journal the next incarnation started from (torn, if the nemesis tore it)

    @cached_property
    def found(self) -> dict[str, OpState]:
        return fold_journal(self.found_lines)


@dataclass(frozen=True)
class WithNotes:
    """A judgement's findings, and what it has to say beside them (a part it could not judge, an excuse it took):
    what a judgement returns that says more than its findings."""

    findings: list[Finding]
    notes: list[str]


@dataclass
class Facts:
    """What the rules share about one run; each fact is built from the evidence only when a rule asks for it.

    ``kills`` needs every kill's journal copy and marker, ``catalogue_for`` the
    catalogues handed to the incarnations: the checker's guards make sure a rule
    that uses them runs only when they are there.
    """

    scenario: Scenario
    evidence: Evidence
    golden: GoldenRun
    journal_problems: tuple[str, ...] = ()

    @cached_property
    def killed(self) -> list[Incarnation]:
        return [incarnation for incarnation in self.evidence.incarnations if incarnation.killed_at is not None]

    @cached_property
    def ledger_around_kills(self) -> list[LedgerAroundKill]:
        """Each kill with the ledger split at its marker; needs only the ledger's kill markers (``kill_markers``)."""
        segments = self.evidence.ledger_segments()
        by_number = {incarnation.number: incarnation for incarnation in self.evidence.incarnations}
        return [LedgerAroundKill(number, incarnation, incarnation.killed_at or "", segments[number],
                                 [line for segment in segments[: number + 1] for line in segment], segments[number + 1],
                                 [line for segment in segments[number + 1:] for line in segment],
                                 by_number.get(incarnation.number + 1))
                for number, incarnation in enumerate(self.killed)]

    @cached_property
    def kills(self) -> list[StruckKill]:
        """Each kill with the journal around it too; needs the journal copies (``kill_copies``)."""
        return [StruckKill(around.number, around.incarnation, around.point, around.segment_before, around.before,
                           around.segment_after, around.after, around.following,
                           fold_journal(self.evidence.journals_at_kill[around.number].lines),
                           self.evidence.journal_found(around.number).lines)
                for around in self.ledger_around_kills]

    @cached_property
    def _last_line_by_kill(self) -> tuple[tuple[int, int], ...]:
        """(last line of the journal copy at a kill, the incarnation killed), kill by kill."""
        return tuple((max((line.number for line in self.evidence.journal_found(number).lines), default=0),
                      incarnation.number) for number, incarnation in enumerate(self.killed))

    def writer(self, line: Line) -> int:
        """The incarnation that wrote a line of the final journal, told apart by the journal copies at the kills."""
        final = self.evidence.incarnations[-1].number if self.evidence.incarnations else 0
        return next((number for last, number in self._last_line_by_kill if line.number <= last), final)

    def catalogue_for(self, line: Line) -> tuple[Catalogue, int]:
        """The catalogue handed to the incarnation that wrote a started record (read from the file handed to it)."""
        writer = self.writer(line)
        incarnation = next(incarnation for incarnation in self.evidence.incarnations if incarnation.number == writer)
        return self.evidence.catalogues[handed_catalogue_file(incarnation)], writer

    def judged_class(self, state: OpState) -> tuple[str, bool, int, str]:
        """(class, interactive, writer incarnation, expected action) for an operation found at a kill.

        The rule is that a decision follows the class snapshot of the ``started``
        record, so a started record is judged on the catalogue of the
        incarnation that wrote it.
        """
        catalogue, writer = self.catalogue_for(state.started)
        tool = state.started.get("tool")
        tool_class, interactive = catalogue.class_of(tool), catalogue.is_interactive(tool)
        return tool_class, interactive, writer, expected_action(state.found, tool_class, interactive)

    def completed(self) -> bool:
        """The task completed: journaled COMPLETED, or, judged black-box, the last incarnation exited 0 on its own."""
        if self.scenario.journal is not None:
            last = self.evidence.incarnations[-1] if self.evidence.incarnations else None
            return last is not None and last.killed_at is None and not last.timed_out and last.exit_code == 0
        return any(line.get("status") == p.COMPLETED for line in self.evidence.journal_records(p.TASK))


def of_kind(lines: Iterable[Line], kind: str, call: str | None = None) -> list[Line]:
    return [line for line in lines if kind in line.record and (call is None or line.get("call") == call)]


# -- journal-well-formed -------------------------------------------------------


def journal_records(facts: Facts) -> list[Finding]:
    """Every line parses and is well typed; one op id per call and one call per op id; attempts count up;
    ``finished`` follows ``started`` and carries a valid status."""
    evidence = facts.evidence
    findings = [Finding("journal-well-formed", problem) for problem in (*facts.journal_problems, *evidence.journal.problems)]
    if not evidence.journal.lines and not evidence.journal.problems and evidence.incarnations:
        findings.append(Finding("journal-well-formed", f"journal.jsonl is empty or gone after "
                                                       f"{len(evidence.incarnations)} incarnation(s): nothing was journaled"))
    op_of_call: dict[str, Line] = {}
    call_of_op: dict[str, Line] = {}
    last_started: dict[str, Line] = {}
    open_ops: set[str] = set()
    for line in evidence.journal.lines:
        kind = line.get("kind")
        if kind == p.STARTED:
            call, op = line.get("call"), line.get("op")
            previous = last_started.get(call)
            want_attempt = previous.get("attempt", 0) + 1 if previous else 1
            if line.get("attempt") != want_attempt:
                findings.append(Finding("journal-well-formed",
                                        f"started record of {call} says attempt {line.get('attempt')}, expected {want_attempt}",
                                        call, evidence=tuple(x.quote() for x in (previous, line) if x)))
            last_started[call] = line
            first = op_of_call.setdefault(call, line)
            if first.get("op") != op:
                findings.append(Finding("journal-well-formed", f"call {call} has two op ids, {first.get('op')} and {op}",
                                        call, evidence=(first.quote(), line.quote())))
            owner = call_of_op.setdefault(op, line)
            if owner.get("call") != call:
                findings.append(Finding("journal-well-formed", f"op id {op} is used for calls {owner.get('call')} and {call}",
                                        call, evidence=(owner.quote(), line.quote())))
            open_ops.add(op)
        elif kind == p.FINISHED:
            if line.get("op") not in open_ops:
                findings.append(Finding("journal-well-formed",
                                        f"finished record for op {line.get('op')} that is not running (no started before it)",
                                        evidence=(line.quote(),)))
            if line.get("status") not in (p.SUCCEEDED, p.FAILED):
                findings.append(Finding("journal-well-formed", f"finished record with status {line.get('status')!r}",
                                        evidence=(line.quote(),)))
            open_ops.discard(line.get("op"))
    return findings


def class_snapshots(facts: Facts) -> list[Finding]:
    """Each started record snapshots the class the catalogue handed to the incarnation that wrote it gives its tool."""
    findings = []
    for line in facts.evidence.journal_records(p.STARTED):
        call, tool = line.get("call"), line.get("tool")
        catalogue, writer = facts.catalogue_for(line)
        want_class, want_interactive = catalogue.class_of(tool), catalogue.is_interactive(tool)
        if line.get("class") != want_class or line.get("interactive") != want_interactive:
            findings.append(Finding(
                "journal-well-formed",
                f"started record of {call} snapshots class {line.get('class')} (interactive={line.get('interactive')}) "
                f"but the catalogue given to incarnation {writer}, which wrote it, says {tool} is {want_class} "
                f"(interactive={want_interactive})",
                call, evidence=(line.quote(),)))
    return findings


# -- the kills -----------------------------------------------------------------


def write_ahead(facts: Facts) -> list[Finding]:
    """At each kill, no tool ran more often than its started records say, and no finished came before its tool."""
    findings = []
    for kill in facts.kills:
        invoked = Counter(line.get("call") for line in of_kind(kill.before, p.LEDGER_INVOKED))
        for call, count in invoked.items():
            state = kill.written.get(call)
            starts = state.starts if state else 0
            if count > starts:
                findings.append(Finding(
                    "write-ahead",
                    f"{call} was invoked {count} time(s) before the kill but the journal at the kill holds {starts} "
                    f"started record(s): the tool ran before its started record was durable",
                    call, kill.point, (of_kind(kill.before, p.LEDGER_INVOKED, call)[-1].quote(),)))
        struck = kill.incarnation.kill
        if struck is not None and isinstance(struck.fault, PowerLoss):
            findings += _started_lost_at_power_loss(kill, invoked, facts.evidence.drops.get(kill.number, ()))
        for call, state in kill.written.items():
            if state.status in (p.SUCCEEDED, p.FAILED) and not state.closed_by_verify and invoked[call] == 0:
                findings.append(Finding(
                    "write-ahead",
                    f"the journal at the kill says {call} {state.status}, but the ledger shows its tool never ran: "
                    f"finished was written before the tool was called",
                    call, kill.point, (state.closing.quote(),) if state.closing else ()))
    return findings


def _started_lost_at_power_loss(kill: StruckKill, invoked: Counter[str], drop: tuple[str, ...]) -> list[Finding]:
    """Under a power loss, each tool run before it must keep its started record in the journal after the drop.

    The record was in the journal at the kill (else the check above speaks), so
    only the drop lost it: it was written but not yet durable (no fsync of the
    journal, or of its directory for a new journal) when its tool ran.
    """
    findings = []
    # the journal's, not the world's
    journal_lines = f"{RunPaths(Path()).power_loss_report(kill.number).name}: {p.JOURNAL_NAME}: "
    for call, count in invoked.items():
        written = kill.written[call].starts if call in kill.written else 0
        survived = kill.found[call].starts if call in kill.found else 0
        if survived < count <= written:
            how = ("the whole journal was lost: its records were never fsynced, or its directory entry was never "
                   "made durable (an fsync of the directory after creating it)" if not kill.found_lines else
                   "its started record was written but not fsynced")
            findings.append(Finding(
                "write-ahead",
                f"{call} was invoked {count} time(s) before a power loss, and the journal at the kill held {written} "
                f"started record(s), but only {survived} survived the loss of what was never durable: {how} when "
                f"its tool ran",
                call, kill.point, (of_kind(kill.before, p.LEDGER_INVOKED, call)[-1].quote(),
                                   *(line for line in drop if line.startswith(journal_lines)))))
    return findings


def closed_not_replayed(facts: Facts) -> list[Finding]:
    """A call SUCCEEDED or FAILED in the journal the next incarnation found never has its tool run again."""
    findings = []
    for kill in facts.kills:
        for call, state in kill.found.items():
            if state.status not in (p.SUCCEEDED, p.FAILED):
                continue
            if replays := of_kind(kill.after, p.LEDGER_INVOKED, call):
                findings.append(Finding(
                    PROPERTY_BY_STATUS[state.status],
                    f"{call} was {state.status} in the journal at the kill, yet its tool {state.started.get('tool')} "
                    f"ran again {len(replays)} time(s) after the kill",
                    call, kill.point, tuple(line.quote() for line in (state.closing, replays[0]) if line is not None)))
    return findings


def _recovering(kill: StruckKill) -> bool:
    """The incarnation after ``kill`` recovers: it found started records and no completed task."""
    return (kill.following is not None and bool(kill.found)
            and not any(line.get("kind") == p.TASK for line in kill.found_lines))


def decisions(facts: Facts) -> list[Finding]:
    """Each recovering incarnation decides every planned call once, as the matrix says, before acting on any."""
    findings = []
    for kill in facts.kills:
        if not _recovering(kill):
            continue
        assert kill.following is not None
        following = kill.following
        written = _written_by_following(facts, kill)
        own = [line for line in written if line.get("kind") == p.DECISION and line.get("incarnation") == following.number]
        findings += _judge_decisions(facts, kill, own, _must_decide_all(kill, written))
    return findings


def _written_by_following(facts: Facts, kill: StruckKill) -> tuple[Line, ...]:
    """The journal as the incarnation after ``kill`` left it: its copy at its own kill (a torn tail may since
    have cut its last records, and that cut is the nemesis's doing), else the final journal."""
    following = kill.following
    if following is not None and following.killed_at is not None:
        return facts.evidence.journals_at_kill[kill.number + 1].lines
    return facts.evidence.journal.lines


def _must_decide_all(kill: StruckKill, written: tuple[Line, ...]) -> bool:
    """Whether the incarnation after ``kill`` must have decided every planned call, judged on the harness's evidence.

    It must once it has acted on any call: a tool of its ran (the ledger
    between this kill and the next), or it journaled anything but decisions
    beyond the journal it found; or it exited 0 on its own. Announcing
    ``after_decisions`` is its own claim that it has decided all, so it holds it
    to that too; not announcing it exempts nothing.
    """
    following = kill.following
    assert following is not None
    acted = (bool(of_kind(kill.segment_after, p.LEDGER_INVOKED) or of_kind(kill.segment_after, p.LEDGER_PROBE))
             or any(line.get("kind") != p.DECISION for line in written[len(kill.found_lines):]))
    exited_done = following.killed_at is None and following.exit_code == 0
    return acted or exited_done or p.AFTER_DECISIONS in following.points


def _judge_decisions(facts: Facts, kill: StruckKill, own: list[Line], required: bool) -> list[Finding]:
    findings = []
    incarnation = kill.following.number if kill.following else None
    op_to_call = {state.op: call for call, state in kill.found.items()}
    by_call: dict[str | None, list[Line]] = {}
    for line in own:
        by_call.setdefault(line.get("call") or op_to_call.get(line.get("op")), []).append(line)
    for planned in facts.scenario.plan.calls:
        call = planned.call_id
        state = kill.found.get(call)
        found = state.found if state else p.NOT_STARTED
        lines = by_call.get(call, [])
        if not lines:
            if required:
                findings.append(Finding(
                    "journal-well-formed",
                    f"incarnation {incarnation} wrote no decision for {call} (found {found}); the protocol wants one "
                    f"decision per planned call before acting on any", call, kill.point))
            continue
        if len(lines) > 1:
            findings.append(Finding("journal-well-formed", f"incarnation {incarnation} decided {call} {len(lines)} times",
                                    call, kill.point, tuple(line.quote() for line in lines)))
        decision = lines[0]
        if state is None:
            expected, because = p.SKIP, "it never started"
        elif found in ACTION_BY_STATUS:
            expected, because = ACTION_BY_STATUS[found], f"the journal says it {found}, whatever its class"
        else:
            tool_class, interactive, writer, expected = facts.judged_class(state)
            kind = "the user-interaction family" if interactive else tool_class
            because = (f"its tool {state.started.get('tool')} is {kind} (the class its started record snapshots, "
                       f"from the catalogue given to incarnation {writer})")
        quoted = tuple(line.quote() for line in ((state.closing or state.started) if state else None, decision) if line)
        if decision.get("action") != expected:
            status = "RUNNING (outcome UNKNOWN)" if found == p.OUTCOME_UNKNOWN else found
            findings.append(Finding(
                PROPERTY_BY_STATUS[found],
                f"{call} was {status} at the kill; {because} "
                f"so the rules say {expected}, but incarnation {incarnation} decided {decision.get('action')}",
                call, kill.point, quoted))
        elif decision.get("found") != found:
            findings.append(Finding(
                "journal-well-formed",
                f"incarnation {incarnation} records {call} as found {decision.get('found')}, "
                f"but the journal at the kill says {found}", call, kill.point, quoted))
    return findings


def _verify_windows(facts: Facts) -> list[tuple[str, StruckKill]]:
    """(call, kill) for each call the rules make VERIFY after a kill its next incarnation recovers from."""
    return [(call, kill) for kill in facts.kills if _recovering(kill) for call, state in kill.found.items()
            if state.found == p.OUTCOME_UNKNOWN and facts.judged_class(state)[3] == p.VERIFY]


def verify_before_replay(facts: Facts) -> list[Finding]:
    """A VERIFY call is re-run only after its read-only probe, and its effect is completed, never repeated.

    Each VERIFY is judged against the ledger as it stood at the kill before it:
    the effects already there count against what the crash-free run leaves, so
    the incarnation after that kill may add only what is missing. Effects made
    earlier under a legitimate RETRY (an IDEMPOTENT_WRITE before a drift made it
    VERIFY) are the world the VERIFY found, not a repeat.
    """
    findings: list[Finding] = []
    unjudged: list[str] = []
    for call, kill in _verify_windows(facts):
        first = next((line for line in kill.segment_after if line.get("call") == call
                      and (p.LEDGER_PROBE in line.record or p.LEDGER_INVOKED in line.record)), None)
        if first is not None and p.LEDGER_INVOKED in first.record:
            findings.append(Finding("verify-before-replay",
                                    f"{call} was interrupted and must be VERIFIED, but recovery re-ran its tool with no "
                                    f"read-only check before it", call, kill.point, (first.quote(),)))
        if repeated := repeated_effect(facts, call, kill, unjudged):
            findings.append(repeated)
    return judged(findings, unjudged)


def repeated_effect(facts: Facts, call: str, kill: LedgerAroundKill, unjudged: list[str]) -> Finding | None:
    """A VERIFY of ``call`` after ``kill`` added more effects than the crash-free run leaves, counting those before.

    When the crash-free run's effects could not be counted (too few counted
    would make a correct completion a repeat), it adds why to ``unjudged``.
    """
    if facts.golden.effects_unknown:
        unjudged.append(facts.golden.effects_unknown)
        return None
    had = of_kind(kill.before, p.LEDGER_EFFECT, call)
    added = of_kind(kill.segment_after, p.LEDGER_EFFECT, call)
    want = facts.golden.effects_per_call.get(call, 0)
    if len(added) <= max(0, want - len(had)):
        return None
    return Finding("verify-before-replay",
                   f"{call} had {len(had)} effect record(s) at the kill, where the crash-free run leaves {want}, "
                   f"and the recovery added {len(added)} more: an effect that had already happened was repeated",
                   call, kill.point, evidence=tuple(line.quote() for line in (*had, *added)))


def judged(findings: list[Finding], unjudged: list[str]) -> list[Finding]:
    """A rule's findings; if it has none, what it could not judge (``unjudged``) makes it unknown, never a pass."""
    if unjudged and not findings:
        raise MissingEvidence("; ".join(dict.fromkeys(unjudged)))
    return findings


# -- liveness and the world ----------------------------------------------------


class Undecidable(InternalError):
    """The evidence is whole but cannot decide the rule (the message says why): the rule is unknown, never a finding."""


def liveness(facts: Facts) -> list[Finding]:
    """No incarnation hangs or exits non-zero on its own, and the task completes."""
    findings = incarnations_failed(facts)
    slowed = timeouts_on_slow_storage(facts)
    if not facts.completed() and not slowed:
        findings.append(Finding("liveness", f"the task did not complete within {len(facts.evidence.incarnations)} incarnations"))
    return decided(findings, slowed)


def timeouts_on_slow_storage(facts: Facts) -> list[str]:
    """Why each incarnation that reached its timeout still waiting for the lazy file system is not judged."""
    return [f"incarnation {incarnation.number} reached its timeout after {incarnation.seconds:.1f}s, even moved by "
            f"{incarnation.storage_s or 0:.1f}s of waiting for the lazy file system of the power losses (the most it "
            f"may move; that storage is far slower than a plain folder), so whether it hung or was still working "
            f"is not known; a larger --timeout decides"
            for incarnation in facts.evidence.incarnations if incarnation.timed_out and incarnation.storage_bound]


def decided(findings: list[Finding], undecided: list[str]) -> list[Finding]:
    """``findings``, which decide the rule failed; else Undecidable with the reasons ``undecided`` gives, if any."""
    if undecided and not findings:
        raise Undecidable("; ".join(undecided))
    return findings


def incarnations_failed(facts: Facts) -> list[Finding]:
    """Each incarnation that hung until its timeout (not while waiting for a lazy file system) or exited non-zero on
    its own."""
    findings = []
    for incarnation in facts.evidence.incarnations:
        tail = f"; stderr ends: {incarnation.stderr_tail[-300:]}" if incarnation.stderr_tail else ""
        if incarnation.timed_out and incarnation.storage_bound:
            continue
        if incarnation.timed_out:
            findings.append(Finding("liveness", f"incarnation {incarnation.number} hung until the timeout and was killed"))
        elif incarnation.killed_at is None and incarnation.exit_code != 0:
            findings.append(Finding("liveness", f"incarnation {incarnation.number} exited with code "
                                                f"{incarnation.exit_code} on its own{tail}"))
    return findings


def world_differs(facts: Facts) -> WithNotes:
    """The world a completed task leaves differs from the crash-free run's (no finding for an incomplete task:
    liveness names that), with a note for each entry that is only debris.

    An agent whose model asks for several calls in one turn runs them in
    whatever order it likes (side by side, in threads), so the world's
    bookkeeping (the lists in ``state/``, e.g. the file history) may list their
    effects in another order than the crash-free run did: for such a plan the
    lists compare as multisets. The files compare exactly, and an effect made
    twice or never is still a difference.

    *Debris*, as certification defines it (docs/certify.md), is what a kill
    left that the recovery did not remove: here, the file a real server was
    held opening when the kill landed (``tool_opened``: a temporary file it had
    just created, say), in the world as that kill left it and unchanged in
    every world after it, when without such files the world is the crash-free
    run's. The retry writes another and renames it; the leftover is the tool's
    crash-safety, not the runtime's recovery, so it is a note naming each entry
    and its kill, never a finding. Anything else the crash-free world does not
    have, a file changed or missing, is still a difference.
    """
    golden, recovered = facts.golden.world, facts.evidence.world
    if not facts.completed() or _same_world(facts, golden, recovered):
        return WithNotes([], [])
    left = _debris(facts, golden, recovered)
    if left:
        return WithNotes([], [f"debris: {path}, left by kill {kill} and unchanged since; removing it makes the world "
                              f"the crash-free run's (the tool's crash-safety, not a repeated effect)"
                              for path, kill in left.items()])
    return WithNotes([Finding("world-equals-golden", "the recovered world differs from the crash-free run's world",
                              evidence=tuple(diff_snapshots(golden, recovered)))], [])


def _same_world(facts: Facts, golden: dict[str, str], recovered: dict[str, str]) -> bool:
    return recovered == golden or (_has_parallel_turn(facts) and _unordered(golden) == _unordered(recovered))


def _debris(facts: Facts, golden: dict[str, str], recovered: dict[str, str]) -> dict[str, int]:
    """Each entry of ``recovered`` that is debris (see ``world_differs``) with the kill that left it; empty unless
    every difference is. MissingEvidence when only an unreadable world at a kill could tell."""
    extra = [path for path in recovered if path not in golden]
    if not extra or not _same_world(facts, golden, {path: recovered[path] for path in recovered if path not in extra}):
        return {}
    at_kills = facts.evidence.worlds_at_kill
    left: dict[str, int] = {}
    for path in extra:
        kill = next((number for number, at in enumerate(at_kills) if at is not None and at.opened == path), None)
        if kill is None or any(at is None or at.world.get(path) != recovered[path] for at in at_kills[kill:]):
            if None in at_kills and facts.scenario.agent is not None:  # an agent's run records every kill's
                raise MissingEvidence(f"{path} is not in the crash-free run's world, and whether a kill left it "
                                      f"(debris) cannot be told: a world at a kill could not be read")
            return {}
        left[path] = kill
    return left


def _has_parallel_turn(facts: Facts) -> bool:
    turns = (facts.scenario.agent or {}).get("turns") or ()
    return any(isinstance(turn, list) and len(turn) > 1 for turn in turns)


def _unordered(world: dict[str, str]) -> dict[str, object]:
    """``world`` with every list in a ``state/`` JSON file sorted: what its bookkeeping holds, whatever the order."""
    def sort_lists(value: object) -> object:
        if isinstance(value, list):
            return sorted((sort_lists(item) for item in value), key=lambda item: json.dumps(item, sort_keys=True))
        if isinstance(value, dict):
            return {key: sort_lists(item) for key, item in value.items()}
        return value

    unordered: dict[str, object] = {}
    for path, text in world.items():
        try:
            unordered[path] = sort_lists(json.loads(text)) if path.startswith("state/") else text
        except (ValueError, RecursionError):  # not JSON (a digest, an entry the walk did not read): as it is
            unordered[path] = text
    return unordered


def retries_made_unsafe_by_drift(facts: Facts) -> list[str]:
    """The RETRYs the rules required only because a drifted catalogue called a tool safer than it is.

    When an incarnation handed a drifted catalogue starts a call that the
    scenario's own catalogue says is NON_IDEMPOTENT or UNKNOWN under a retry-safe
    class, and is killed after its effect, the recovery must RETRY by that
    snapshot and repeat the effect. No runtime can then leave the crash-free
    world; every other property still judges the run.
    """
    excuses = []
    for kill in facts.kills:
        effects_before = of_kind(kill.before, p.LEDGER_EFFECT)
        for call, state in kill.found.items():
            if state.found != p.OUTCOME_UNKNOWN or not any(line.get("call") == call for line in effects_before):
                continue
            tool_class, _, writer, expected = facts.judged_class(state)
            if excuse := drift_excuse(facts, kill.point, call, state.started.get("tool"), writer, tool_class, expected):
                excuses.append(excuse)
    return excuses


def drift_excuse(facts: Facts, point: str, call: str, tool: str, writer: int, tool_class: str,
                 expected: str) -> str | None:
    """Why a repeated effect of ``call``, interrupted at the kill at ``point``, is no fault of the runtime, or None.

    It is none when ``writer``, the incarnation that started the call, was handed
    a drifted catalogue that calls ``tool`` ``tool_class``, so that the rules
    required the RETRY (``expected``) that the scenario's own catalogue forbids.
    """
    truth = facts.scenario.catalogue
    truly = expected_action(p.OUTCOME_UNKNOWN, truth.class_of(tool), truth.is_interactive(tool))
    drifted = any(incarnation.number == writer and incarnation.catalogue_drift
                  for incarnation in facts.evidence.incarnations)
    if not (drifted and expected == p.RETRY and truly == p.VERIFY):
        return None
    return (f"{call}'s tool {tool} is {truth.class_of(tool)} in the scenario's catalogue, but the drifted one given "
            f"to incarnation {writer} called it {tool_class}: the RETRY the rules require after kill {point} "
            f"repeated its effect")
