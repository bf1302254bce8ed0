"""The checker: a pure function of (scenario, evidence, golden run) -> Verdict.

It judges from the journal, the ledger and the world against its own table of
the recovery rules (recovery-rules.md); it never calls the runtime's code.
Every finding names its property, the call and the kill point, and quotes the
journal and ledger lines that prove it. A checker exception is not a crash of
the run: it becomes an "unknown" verdict carrying the error (Jepsen's rule).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from killpoint import protocol as p
from killpoint.fake_tools.catalogue import Catalogue
from killpoint.fake_tools.world import diff_snapshots
from killpoint.harness.evidence import Evidence, Incarnation, Line, MissingEvidence
from killpoint.harness.model import Finding, GoldenRun, Verdict
from killpoint.harness.scenario import Scenario
from killpoint.harness.validate import trusted

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
class ClassBook:
    """Which catalogue each incarnation was handed, so which class each started record must carry.

    The rule is that a decision follows the class snapshot of the ``started``
    record, so a started record is judged on the catalogue of the incarnation
    that wrote it, told apart by the journal copies taken at each kill.
    """

    base: Catalogue
    by_incarnation: dict[int, Catalogue]
    last_line_by_kill: tuple[tuple[int, int], ...]  # (last line found after the kill, killed incarnation)
    final_incarnation: int

    @classmethod
    def of(cls, scenario: Scenario, evidence: Evidence) -> ClassBook:
        by_incarnation = {}
        for incarnation in evidence.incarnations:
            if incarnation.catalogue_drift:
                tool, _, new_class = incarnation.catalogue_drift.partition("=")
                by_incarnation[incarnation.number] = scenario.catalogue.with_class(tool, new_class)
        killed = [incarnation.number for incarnation in evidence.incarnations if incarnation.killed_at is not None]
        bounds = tuple((max((line.number for line in evidence.journal_found(k).lines), default=0), number)
                       for k, number in enumerate(killed[: len(evidence.journals_at_kill)]))
        final = evidence.incarnations[-1].number if evidence.incarnations else 0
        return cls(scenario.catalogue, by_incarnation, bounds, final)

    def writer(self, line: Line) -> int:
        """The incarnation that wrote a line of the final journal."""
        return next((number for last, number in self.last_line_by_kill if line.number <= last), self.final_incarnation)

    def catalogue_for(self, line: Line) -> tuple[Catalogue, int]:
        writer = self.writer(line)
        return self.by_incarnation.get(writer, self.base), writer


def check(scenario: Scenario, evidence: Evidence, golden: GoldenRun) -> Verdict:
    """Judge one run; never raises (an internal error makes the verdict unknown)."""
    notes = _notes(evidence)
    try:
        evidence, journal_problems, ledger_problems = trusted(evidence)
        notes += tuple(f"ledger record left out: {problem}" for problem in ledger_problems)
        book = ClassBook.of(scenario, evidence)
        findings = [
            *(Finding("journal-well-formed", problem) for problem in journal_problems),
            *_journal_well_formed(book, evidence),
            *_kills(scenario, book, evidence, golden),
            *_liveness(evidence),
        ]
        world = _world(evidence, golden)
        excuses = _retries_made_unsafe_by_drift(book, evidence)
        if world and excuses:
            notes += tuple(f"{excuse}; so the world is not held to the crash-free run's" for excuse in excuses)
        else:
            findings += world
    except MissingEvidence as missing:
        return Verdict(None, (), notes, f"evidence missing, so the kills cannot be judged: {missing}")
    except Exception as error:  # noqa: BLE001 - a checker bug must not pass as a verdict
        return Verdict(None, (), notes, f"checker error: {type(error).__name__}: {error}")
    order = list(PROPERTIES)
    findings.sort(key=lambda finding: order.index(finding.property))
    return Verdict(not findings, tuple(findings), notes)


def _notes(evidence: Evidence) -> tuple[str, ...]:
    notes = []
    if evidence.journal.torn_tail is not None:
        notes.append(f"journal.jsonl ends with a torn record, not trusted: {evidence.journal.torn_tail[:80]!r}")
    notes += [f"ledger line left out: {problem}" for problem in evidence.ledger.problems]
    if evidence.ledger.torn_tail is not None:
        notes.append(f"ledger.jsonl ends with an unterminated line, left out: {evidence.ledger.torn_tail[:80]!r}")
    for incarnation in evidence.incarnations:
        notes += [f"incarnation {incarnation.number} left {leftover} running; the sweep killed it"
                  for leftover in incarnation.leftovers]
        notes += [f"incarnation {incarnation.number}: {problem}" for problem in incarnation.protocol_problems]
    return tuple(notes)


def _journal_well_formed(book: ClassBook, evidence: Evidence) -> list[Finding]:
    findings = [Finding("journal-well-formed", problem) for problem in evidence.journal.problems]
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
            call, op, tool = line.get("call"), line.get("op"), line.get("tool")
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
            catalogue, writer = book.catalogue_for(line)
            want_class, want_interactive = catalogue.class_of(tool), catalogue.is_interactive(tool)
            if line.get("class") != want_class or line.get("interactive") != want_interactive:
                findings.append(Finding(
                    "journal-well-formed",
                    f"started record of {call} snapshots class {line.get('class')} (interactive={line.get('interactive')}) "
                    f"but the catalogue given to incarnation {writer}, which wrote it, says {tool} is {want_class} "
                    f"(interactive={want_interactive})",
                    call, evidence=(line.quote(),)))
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


def _kills(scenario: Scenario, book: ClassBook, evidence: Evidence, golden: GoldenRun) -> list[Finding]:
    findings: list[Finding] = []
    segments = evidence.ledger_segments()
    killed = [incarnation for incarnation in evidence.incarnations if incarnation.killed_at is not None]
    verify_windows: list[tuple[str, int, str]] = []  # (call, kill number, kill) of each VERIFY decided
    _require_kill_evidence(killed, evidence)
    for kill_number, incarnation in enumerate(killed):
        kill = incarnation.killed_at
        written = fold_journal(evidence.journals_at_kill[kill_number].lines)
        found = fold_journal(evidence.journal_found(kill_number).lines)
        before = [line for segment in segments[: kill_number + 1] for line in segment]
        after = [line for segment in segments[kill_number + 1:] for line in segment]
        findings += _write_ahead(written, before, kill)
        findings += _no_replay_of_closed(found, after, kill)
        following = next((i for i in evidence.incarnations if i.number == incarnation.number + 1), None)
        task_done = any(line.get("kind") == p.TASK for line in evidence.journal_found(kill_number).lines)
        if following is not None and found and not task_done:
            # A killed incarnation's own decisions are read from its copy at its kill: a torn
            # tail may since have cut the last of them, and that cut is the nemesis's doing.
            written_by_following = (evidence.journals_at_kill[kill_number + 1].lines
                                    if following.killed_at is not None and kill_number + 1 < len(evidence.journals_at_kill)
                                    else evidence.journal.lines)
            decisions = [line for line in written_by_following
                         if line.get("kind") == p.DECISION and line.get("incarnation") == following.number]
            required = p.AFTER_DECISIONS in following.points or (following.killed_at is None and following.exit_code == 0)
            findings += _decisions(scenario, book, found, decisions, kill, following.number, required)
            next_segment = segments[kill_number + 1]
            for call, state in found.items():
                if state.found == p.OUTCOME_UNKNOWN and _judged_class(book, state)[3] == p.VERIFY:
                    verify_windows.append((call, kill_number, kill))
                    findings += _probe_before_invoke(call, next_segment, kill)
    findings += _effects_once(verify_windows, segments, golden)
    return findings


def _require_kill_evidence(killed: list[Incarnation], evidence: Evidence) -> None:
    """Each kill the harness made has its journal copy and its marker in the ledger, in order.

    The markers split the ledger into what ran before and after each kill. One
    missing (deleted, overwritten) or forged by the workload would misalign every
    judgement after it, so the run cannot be judged at all.
    """
    if len(evidence.journals_at_kill) < len(killed):
        raise MissingEvidence(f"{len(killed)} kill(s) made but {len(evidence.journals_at_kill)} journal copies found")
    markers = [line for line in evidence.ledger.lines if "killed" in line.record]
    if [line.get("killed") for line in markers] != [incarnation.number for incarnation in killed]:
        found = ", ".join(line.quote() for line in markers) or "none"
        raise MissingEvidence(
            f"the ledger's kill markers do not match the kills made (of incarnations "
            f"{[incarnation.number for incarnation in killed]}): found {found}; a marker was lost or forged")


def _judged_class(book: ClassBook, state: OpState) -> tuple[str, bool, int, str]:
    """(class, interactive, writer incarnation, expected action) for an operation found at a kill."""
    catalogue, writer = book.catalogue_for(state.started)
    tool = state.started.get("tool")
    tool_class, interactive = catalogue.class_of(tool), catalogue.is_interactive(tool)
    return tool_class, interactive, writer, expected_action(state.found, tool_class, interactive)


def _invocations(lines: list[Line], call: str) -> list[Line]:
    return [line for line in lines if "invoked" in line.record and line.get("call") == call]


def _write_ahead(at_kill: dict[str, OpState], before: list[Line], kill: str) -> list[Finding]:
    findings = []
    invoked = Counter(line.get("call") for line in before if "invoked" in line.record)
    for call, count in invoked.items():
        state = at_kill.get(call)
        starts = state.starts if state else 0
        if count > starts:
            ledger_line = _invocations(before, call)[-1]
            findings.append(Finding(
                "write-ahead",
                f"{call} was invoked {count} time(s) before the kill but the journal at the kill holds {starts} "
                f"started record(s): the tool ran before its started record was durable",
                call, kill, (ledger_line.quote(),)))
    for call, state in at_kill.items():
        if state.status in (p.SUCCEEDED, p.FAILED) and not state.closed_by_verify and invoked[call] == 0:
            findings.append(Finding(
                "write-ahead",
                f"the journal at the kill says {call} {state.status}, but the ledger shows its tool never ran: "
                f"finished was written before the tool was called",
                call, kill, (state.closing.quote(),) if state.closing else ()))
    return findings


def _no_replay_of_closed(at_kill: dict[str, OpState], after: list[Line], kill: str) -> list[Finding]:
    findings = []
    for call, state in at_kill.items():
        if state.status not in (p.SUCCEEDED, p.FAILED):
            continue
        replays = _invocations(after, call)
        if replays:
            findings.append(Finding(
                PROPERTY_BY_STATUS[state.status],
                f"{call} was {state.status} in the journal at the kill, yet its tool {state.started.get('tool')} "
                f"ran again {len(replays)} time(s) after the kill",
                call, kill, tuple(line.quote() for line in (state.closing, replays[0]) if line is not None)))
    return findings


def _decisions(scenario: Scenario, book: ClassBook, at_kill: dict[str, OpState], decisions: list[Line], kill: str,
               incarnation: int, required: bool) -> list[Finding]:
    findings = []
    op_to_call = {state.op: call for call, state in at_kill.items()}
    by_call: dict[str, list[Line]] = {}
    for line in decisions:
        call = line.get("call") or op_to_call.get(line.get("op"))
        by_call.setdefault(call, []).append(line)
    for planned in scenario.plan.calls:
        call = planned.call_id
        state = at_kill.get(call)
        found = state.found if state else p.NOT_STARTED
        lines = by_call.get(call, [])
        if not lines:
            if required:
                findings.append(Finding(
                    "journal-well-formed",
                    f"incarnation {incarnation} wrote no decision for {call} (found {found}); the protocol wants one "
                    f"decision per planned call before acting on any", call, kill))
            continue
        if len(lines) > 1:
            findings.append(Finding("journal-well-formed", f"incarnation {incarnation} decided {call} {len(lines)} times",
                                    call, kill, tuple(line.quote() for line in lines)))
        decision = lines[0]
        if state is None:
            expected, because = p.SKIP, "it never started"
        elif found in ACTION_BY_STATUS:
            expected, because = ACTION_BY_STATUS[found], f"the journal says it {found}, whatever its class"
        else:
            tool_class, interactive, writer, expected = _judged_class(book, state)
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
                call, kill, quoted))
        elif decision.get("found") != found:
            findings.append(Finding(
                "journal-well-formed",
                f"incarnation {incarnation} records {call} as found {decision.get('found')}, "
                f"but the journal at the kill says {found}", call, kill, quoted))
    return findings


def _probe_before_invoke(call: str, segment: list[Line], kill: str) -> list[Finding]:
    """In the incarnation after the kill, a VERIFY call may be re-invoked only after its probe."""
    for line in segment:
        if line.get("call") != call:
            continue
        if "probe" in line.record:
            return []
        if "invoked" in line.record:
            return [Finding("verify-before-replay",
                            f"{call} was interrupted and must be VERIFIED, but recovery re-ran its tool with no "
                            f"read-only check before it", call, kill, (line.quote(),))]
    return []


def _effects_once(verify_windows: list[tuple[str, int, str]], segments: list[list[Line]],
                  golden: GoldenRun) -> list[Finding]:
    """After each kill that makes a call VERIFY, its effect may be completed, never repeated.

    Each VERIFY is judged against the ledger as it stood at the kill before it:
    the effects already there count against what the crash-free run leaves, so
    the incarnation after that kill may add only what is missing. Effects made
    earlier under a legitimate RETRY (an IDEMPOTENT_WRITE before a drift made it
    VERIFY) are the world the VERIFY found, not a repeat.
    """
    findings = []
    for call, kill_number, kill in verify_windows:
        had = [line for segment in segments[: kill_number + 1] for line in segment
               if "effect" in line.record and line.get("call") == call]
        added = [line for line in segments[kill_number + 1] if "effect" in line.record and line.get("call") == call]
        want = golden.effects_per_call.get(call, 0)
        if len(added) > max(0, want - len(had)):
            findings.append(Finding(
                "verify-before-replay",
                f"{call} had {len(had)} effect record(s) at the kill, where the crash-free run leaves {want}, "
                f"and the recovery added {len(added)} more: an effect that had already happened was repeated",
                call, kill, evidence=tuple(line.quote() for line in (*had, *added))))
    return findings


def _retries_made_unsafe_by_drift(book: ClassBook, evidence: Evidence) -> list[str]:
    """The RETRYs the rules required only because a drifted catalogue called a tool safer than it is.

    When an incarnation handed a drifted catalogue starts a call that the
    scenario's own catalogue says is NON_IDEMPOTENT or UNKNOWN under a retry-safe
    class, and is killed after its effect, the recovery must RETRY by that
    snapshot and repeat the effect. No runtime can then leave the crash-free
    world; every other property still judges the run.
    """
    excuses = []
    segments = evidence.ledger_segments()
    killed = [incarnation for incarnation in evidence.incarnations if incarnation.killed_at is not None]
    for kill_number, incarnation in enumerate(killed[: len(evidence.journals_at_kill)]):
        before = [line for segment in segments[: kill_number + 1] for line in segment if "effect" in line.record]
        for call, state in fold_journal(evidence.journal_found(kill_number).lines).items():
            if state.found != p.OUTCOME_UNKNOWN or not any(line.get("call") == call for line in before):
                continue
            tool_class, interactive, writer, expected = _judged_class(book, state)
            tool = state.started.get("tool")
            truly = expected_action(state.found, book.base.class_of(tool), book.base.is_interactive(tool))
            if writer in book.by_incarnation and expected == p.RETRY and truly == p.VERIFY:
                excuses.append(f"{call}'s tool {tool} is {book.base.class_of(tool)} in the scenario's catalogue, but "
                               f"the drifted one given to incarnation {writer} called it {tool_class}: the RETRY the "
                               f"rules require after kill {incarnation.killed_at} repeated its effect")
    return excuses


def _liveness(evidence: Evidence) -> list[Finding]:
    findings = []
    for incarnation in evidence.incarnations:
        tail = f"; stderr ends: {incarnation.stderr_tail[-300:]}" if incarnation.stderr_tail else ""
        if incarnation.timed_out:
            findings.append(Finding("liveness", f"incarnation {incarnation.number} hung until the timeout and was killed"))
        elif incarnation.killed_at is None and incarnation.exit_code != 0:
            findings.append(Finding("liveness", f"incarnation {incarnation.number} exited with code "
                                                f"{incarnation.exit_code} on its own{tail}"))
    if not any(line.get("status") == p.COMPLETED for line in evidence.journal_records(p.TASK)):
        findings.append(Finding("liveness", f"the task did not complete within {len(evidence.incarnations)} incarnations"))
    return findings


def _world(evidence: Evidence, golden: GoldenRun) -> list[Finding]:
    completed = any(line.get("status") == p.COMPLETED for line in evidence.journal_records(p.TASK))
    if not completed or evidence.world == golden.world:
        return []
    return [Finding("world-equals-golden", "the recovered world differs from the crash-free run's world",
                    evidence=tuple(diff_snapshots(golden.world, evidence.world)))]
