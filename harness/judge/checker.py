"""The checker: a pure function of (scenario, evidence, golden run) -> Verdict, composed of rules.

A rule is one property of the recovery rules (``PROPERTIES``), called by that
one name in results, findings, the JSON reports and the docs. It is judged by
the judgements that find it (``judge/properties``), each declaring the evidence
it needs, its guard. A judgement whose evidence is missing (a journal copy or
kill marker lost, a file refused, a catalogue the workload was handed gone)
leaves its rules unknown with the reason, never a pass; an exception inside one
does the same with the error and keeps every other judgement's findings. The
rules' results merge false > unknown > true (Jepsen's ``compose``,
``check-safe`` and ``merge-valid``).

A scenario with a ``[journal]`` table (a runtime that keeps its own durable
record) is judged by ``BLACK_BOX_JUDGEMENTS`` (``judge/blackbox``): from the
copies of its store, the ledger and the world, with no decisions to read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from killpoint import protocol as p
from killpoint.errors import InternalError
from killpoint.harness.judge import blackbox, properties
from killpoint.harness.judge.evidence import Evidence, MissingEvidence, lines_no_kill_left
from killpoint.harness.judge.properties import PROPERTIES, Facts, WithNotes, expected_action
from killpoint.harness.judge.stores import AGENT_SEAMS, framework_versions
from killpoint.harness.judge.validate import trusted
from killpoint.harness.layout import (STORE_AT_KILL_PREFIX, STORE_FINAL, handed_catalogue_file, store_at_kill_name,
                                      torn_journal_name)
from killpoint.harness.model import (FAILED, PASSED, UNKNOWN, DurableState, Finding, GoldenRun, PowerLoss, RuleResult,
                                     TornTail, Verdict, merged_validity)

if TYPE_CHECKING:
    from killpoint.harness.model import Scenario, StoreTable

__all__ = ["BLACK_BOX_JUDGEMENTS", "BLACK_BOX_RULES", "JUDGEMENTS", "PROPERTIES", "RULES", "Judgement", "check",
           "expected_action"]

# -- guards: the evidence a rule needs; each returns why it is missing, or None ----------------

Guard = Callable[[Evidence], "str | None"]
_INCARNATIONS_FILE = "incarnations.json"


def incarnations_recorded(evidence: Evidence) -> str | None:
    """The runner's record of the incarnations: without it no kill and no exit is known."""
    return evidence.unreadable.get(_INCARNATIONS_FILE)


def kill_copies(evidence: Evidence) -> str | None:
    """Each kill's journal copy, and the torn copy where the kill tore the journal: what each incarnation wrote
    and what the next one found."""
    if why := incarnations_recorded(evidence):
        return why
    killed = [incarnation for incarnation in evidence.incarnations if incarnation.killed_at is not None]
    if len(evidence.journals_at_kill) < len(killed):
        return f"{len(killed)} kill(s) made but {len(evidence.journals_at_kill)} journal copies found"
    refused = [why for name, why in evidence.unreadable.items()
               if name.startswith(("journal-at-kill-", "journal-after-drop-"))]
    if refused:
        return "; ".join(refused)
    for number, incarnation in enumerate(killed):
        copy = evidence.journals_at_kill[number]
        # The nemesis tears a journal that ends with a whole record; the torn copy is then what the next incarnation found.
        tearable = copy.torn_tail is None and bool(copy.lines or copy.problems)
        torn_kept = number < len(evidence.journals_found) and evidence.journals_found[number] is not None
        kill = incarnation.kill
        if kill is not None and isinstance(kill.fault, TornTail) and tearable and not torn_kept:
            return (f"kill {number} ({incarnation.killed_at}) tore the journal but {torn_journal_name(number)} "
                    f"is missing: what the next incarnation found is not known")
        if kill is not None and isinstance(kill.fault, PowerLoss) and not torn_kept:
            return (f"kill {number} ({incarnation.killed_at}) was a power loss but the journal after its drop "
                    f"is missing: what the next incarnation found is not known")
    return None


def kill_markers(evidence: Evidence) -> str | None:
    """The ledger, split by the harness's kill markers, one per kill in order: what ran before and after each;
    and every line of it read, but the one a kill cut short (``evidence.lines_no_kill_left``)."""
    if why := incarnations_recorded(evidence) or evidence.unreadable.get("ledger.jsonl"):
        return why
    killed = [incarnation.number for incarnation in evidence.incarnations if incarnation.killed_at is not None]
    markers = [line for line in evidence.ledger.lines if p.LEDGER_KILLED in line.record]
    if [line.get(p.LEDGER_KILLED) for line in markers] != killed:
        found = ", ".join(line.quote() for line in markers) or "none"
        return (f"the ledger's kill markers do not match the kills made (of incarnations {killed}): "
                f"found {found}; a marker was lost or forged")
    if unread := lines_no_kill_left(evidence.ledger):
        # Quoted short, so that runs unknown for the same reason are counted together; the notes quote every line.
        others = " (and other lines, quoted in the notes)" if len(unread) > 1 else ""
        return (f"{unread[0].quote(40)}: no kill leaves such a line, and a tool's record may be glued onto it"
                f"{others}")
    return None


def handed_catalogues(evidence: Evidence) -> str | None:
    """The catalogue files the runner handed each incarnation, as they were handed (not rebuilt)."""
    if why := incarnations_recorded(evidence):
        return why
    if not evidence.incarnations:
        return "no incarnation is recorded, so which catalogue each was handed is not known"
    for incarnation in evidence.incarnations:
        name = handed_catalogue_file(incarnation)
        if name not in evidence.catalogues:
            why = evidence.unreadable.get(name, f"{name} was not read")
            return f"the catalogue handed to incarnation {incarnation.number} cannot be read: {why}"
    return None


KILLS = (kill_copies, kill_markers)


def contained(evidence: Evidence) -> str | None:
    """No process escaped an incarnation's containment: what one wrote, even after its incarnation's kill, is not
    the run's evidence (``harness/execute/_escapees.py``), so no rule can be judged on the files it held."""
    escaped = [f"incarnation {incarnation.number}'s {escapee}" for incarnation in evidence.incarnations
               for escapee in incarnation.escaped]
    if not escaped:
        return None
    return (f"{len(escaped)} process(es) escaped the incarnation's containment (its cgroup, process tree and "
            f"environment) and held the run's files; each was killed, but what it wrote is not the run's doing: "
            + "; ".join(escaped))


def store_copies(evidence: Evidence) -> str | None:
    """Each kill's copy of the runtime's own store, read (and its copy after a torn tail, where one was cut)."""
    if why := incarnations_recorded(evidence):
        return why
    killed = [incarnation for incarnation in evidence.incarnations if incarnation.killed_at is not None]
    refused = [why for name, why in evidence.unreadable.items() if name.startswith(STORE_AT_KILL_PREFIX)]
    if refused:
        return "; ".join(refused)
    if len(evidence.stores_at_kill) < len(killed):
        return f"{len(killed)} kill(s) made but {len(evidence.stores_at_kill)} store copies read"
    return None


def final_stores(evidence: Evidence) -> str | None:
    """The store as this run and as the crash-free run left it: what every run must end up recording."""
    reasons = [why for name, why in evidence.unreadable.items() if name.endswith(STORE_FINAL)]
    if not reasons and (evidence.store_final is None or evidence.golden_store_final is None):
        reasons.append(f"{STORE_FINAL} was not read")
    return "; ".join(reasons) or None


STORE_KILLS = (store_copies, kill_markers)


# -- rules: each a property, judged by every judgement that finds it -------------------------------


@dataclass(frozen=True)
class Judgement:
    """One judging function (``judge/properties``, ``judge/blackbox``) behind its guard (``needs``), and the
    properties its findings may name (``finds``). A rule is a property: results, findings, the JSON reports and
    the docs call it by one name, and it is judged by every judgement that ``finds`` it."""

    finds: tuple[str, ...]
    needs: tuple[Guard, ...]
    judge: Callable[[Facts], list[Finding] | WithNotes]  # WithNotes: its findings, and notes to say beside them


def world_rule(excuses: Callable[[Facts], list[str]],
               kills: tuple[Guard, ...]) -> Callable[[Facts], WithNotes]:
    """The judgement that the world equals the crash-free run's, unless a drifted catalogue made the rules
    require a repeat: ``excuses`` finds those, from the kills' evidence that ``kills`` guards."""

    def world(facts: Facts) -> WithNotes:
        differs = properties.world_differs(facts)
        if not differs.findings:
            return differs
        _require(facts.evidence, (incarnations_recorded,))  # whether a drift was handed is in the incarnations' record
        if not any(incarnation.catalogue_drift for incarnation in facts.evidence.incarnations):
            return differs
        _require(facts.evidence, (*kills, handed_catalogues))  # the excuse reads the kills and the handed catalogues
        if found := excuses(facts):
            return WithNotes([], [f"{excuse}; so the world is not held to the crash-free run's" for excuse in found])
        return differs

    return world


NOT_REPLAYED = ("succeeded-not-replayed", "failed-not-replayed")
WELL_FORMED, INTERRUPTED = "journal-well-formed", "interrupted-action"

JUDGEMENTS: tuple[Judgement, ...] = (
    Judgement((WELL_FORMED,), (), properties.journal_records),
    Judgement((WELL_FORMED,), (kill_copies, handed_catalogues), properties.class_snapshots),
    Judgement(("write-ahead",), KILLS, properties.write_ahead),
    Judgement(NOT_REPLAYED, KILLS, properties.closed_not_replayed),
    Judgement((*NOT_REPLAYED, INTERRUPTED, WELL_FORMED), (*KILLS, handed_catalogues), properties.decisions),
    Judgement(("verify-before-replay",), (*KILLS, handed_catalogues), properties.verify_before_replay),
    Judgement(("liveness",), (incarnations_recorded,), properties.liveness),
    Judgement(("world-equals-golden",), (), world_rule(properties.retries_made_unsafe_by_drift, KILLS)),
)

# Judged black-box there are no decisions, class snapshots or killpoint journal records to judge.
BLACK_BOX_JUDGEMENTS: tuple[Judgement, ...] = (
    Judgement(("write-ahead",), STORE_KILLS, blackbox.write_ahead),
    Judgement(NOT_REPLAYED, STORE_KILLS, blackbox.recorded_not_replayed),
    Judgement(("verify-before-replay",), (*STORE_KILLS, handed_catalogues), blackbox.verify_before_replay),
    Judgement(("liveness",), (incarnations_recorded, final_stores), blackbox.liveness),
    Judgement(("world-equals-golden",), (), world_rule(blackbox.retries_made_unsafe_by_drift, STORE_KILLS)),
)


def rules_judged(judgements: tuple[Judgement, ...]) -> tuple[str, ...]:
    """The rules (properties) ``judgements`` judge, in the order findings are reported."""
    found = {name for judgement in judgements for name in judgement.finds}
    return tuple(name for name in PROPERTIES if name in found)


RULES, BLACK_BOX_RULES = rules_judged(JUDGEMENTS), rules_judged(BLACK_BOX_JUDGEMENTS)


def _require(evidence: Evidence, needs: tuple[Guard, ...]) -> None:
    """Raise MissingEvidence with every distinct reason a guard gives."""
    reasons = list(dict.fromkeys(why for need in needs if (why := need(evidence))))
    if reasons:
        raise MissingEvidence("; ".join(reasons))


def _judge_safe(judgement: Judgement, facts: Facts) -> tuple[WithNotes, str | None]:
    """One judgement's findings and notes, or why it could not judge: its evidence missing, the run undecidable,
    or an error inside it (a finding naming a property it does not judge is one)."""
    try:
        _require(facts.evidence, judgement.needs)
        judged = judgement.judge(facts)
        judged = judged if isinstance(judged, WithNotes) else WithNotes(judged, [])
        if strays := sorted({finding.property for finding in judged.findings} - set(judgement.finds)):
            raise InternalError(f"{judgement.judge.__name__} found {', '.join(strays)}, which it does not judge")
    except MissingEvidence as missing:
        return WithNotes([], []), f"evidence missing: {missing}"
    except properties.Undecidable as why:
        return WithNotes([], []), f"not decidable: {why}"
    except Exception as error:  # noqa: BLE001 - a checker bug must not pass as a verdict, nor hide the other rules
        return WithNotes([], []), f"checker error: {type(error).__name__}: {error}"
    return judged, None


def _rule_result(rule: str, judged: list[tuple[Judgement, WithNotes, str | None]]) -> RuleResult:
    """A rule failed if a judgement found it broken; else unknown if a judgement of it could not judge; else
    passed. The reasons a judgement of it could not judge are merged, each said once: why it is unknown, or why
    a failed rule was judged only in part."""
    reasons = [why for judgement, _, why in judged if why is not None and rule in judgement.finds]
    reason = _merged_reasons(reasons) if reasons else None
    if any(finding.property == rule for _, found, _ in judged for finding in found.findings):
        return RuleResult(rule, FAILED, reason)
    return RuleResult(rule, UNKNOWN, reason) if reason else RuleResult(rule, PASSED)


def _merged_reasons(reasons: list[str]) -> str:
    """``evidence missing: A; B`` from ``evidence missing: A`` and ``evidence missing: A; B``: each kind of
    reason once, each of its parts once."""
    parts: dict[str, dict[str, None]] = {}
    for reason in reasons:
        kind, _, text = reason.partition(": ")
        parts.setdefault(kind, {}).update(dict.fromkeys(text.split("; ")))
    return "; ".join(f"{kind}: {'; '.join(texts)}" for kind, texts in parts.items())


def check(scenario: Scenario, evidence: Evidence, golden: GoldenRun,
          judgements: tuple[Judgement, ...] | None = None) -> Verdict:
    """Judge one run by every rule (by default ``JUDGEMENTS``'s, or ``BLACK_BOX_JUDGEMENTS``'s for a
    ``[journal]`` scenario); never raises.

    ``valid`` merges the rules' results (false > unknown > true); ``error``
    says why a verdict is unknown, rule by rule; a failed verdict names the
    rules it could not judge in its notes.
    """
    if judgements is None:
        judgements = JUDGEMENTS if scenario.journal is None else BLACK_BOX_JUDGEMENTS
    rules = rules_judged(judgements)
    notes = [] if scenario.journal is None else [judged_black_box(scenario.journal)]
    notes += _notes(evidence)
    try:
        evidence, journal_problems, ledger_problems = trusted(evidence)
    except Exception as failure:  # noqa: BLE001 - no rule can be judged on evidence that could not be cleaned
        return Verdict(None, (), tuple(notes), f"checker error: {type(failure).__name__}: {failure}",
                       tuple(RuleResult(rule, UNKNOWN, "checker error") for rule in rules))
    notes += [f"ledger record left out: {problem}" for problem in ledger_problems]
    if escaped := contained(evidence):
        return Verdict(None, (), tuple(notes), f"evidence untrusted, so no rule can be judged: {escaped}",
                       tuple(RuleResult(rule, UNKNOWN, f"evidence untrusted: {escaped}") for rule in rules))
    facts = Facts(scenario, evidence, golden, tuple(journal_problems))
    judged = [(judgement, *_judge_safe(judgement, facts)) for judgement in judgements]
    results = tuple(_rule_result(rule, judged) for rule in rules)
    findings = [finding for _, found, _ in judged for finding in found.findings]
    notes += [note for _, found, _ in judged for note in found.notes]
    if evidence.store_final is not None and evidence.store_final.traffic:
        findings = [with_traffic(finding, evidence.store_final.traffic) for finding in findings]
    if kept := kept_by_copy(evidence):
        findings = [with_traffic(finding, kept) for finding in findings]
    order = list(PROPERTIES)
    findings.sort(key=lambda finding: order.index(finding.property) if finding.property in order else len(order))
    valid = merged_validity(tuple(results))
    unknown = [result for result in results if result.status == UNKNOWN]
    error = _unknown_reasons(unknown) if valid is None else None
    if valid is False:
        notes += [f"not judged: {result.rule}: {result.reason}" for result in unknown]
        notes += [f"not judged in full: {result.rule}: {result.reason}" for result in results
                  if result.status == FAILED and result.reason]
    return Verdict(valid, tuple(findings), tuple(notes), error, tuple(results))


def with_traffic(finding: Finding, traffic: Mapping[str, tuple[str, ...]]) -> Finding:
    """``finding`` quoting, after its own evidence, what the store's keeper saw of its call (an agent's HTTP
    exchanges): the requests that show what the agent did, beside the ledger lines that show what it caused."""
    quotes = traffic.get(finding.call or "", ())
    return replace(finding, evidence=tuple(dict.fromkeys((*finding.evidence, *quotes)))) if quotes else finding


def kept_by_copy(evidence: Evidence) -> dict[str, tuple[str, ...]]:
    """What the agent's own store held of each call in every copy, kill by kill and at the end, each quote
    prefixed with its copy's folder: why the agent did what the services saw, as the store let it."""
    copies: list[tuple[str, DurableState | None]] = [
        *((store_at_kill_name(number), state) for number, state in enumerate(evidence.stores_at_kill)),
        (STORE_FINAL, evidence.store_final)]
    kept: dict[str, tuple[str, ...]] = {}
    for name, state in copies:
        for call, quotes in (state.kept if state is not None else {}).items():
            kept[call] = (*kept.get(call, ()), *(f"{name}/{quote}" for quote in quotes))
    return kept


def judged_black_box(journal: StoreTable) -> str:
    """How a report says a run was judged from a runtime's own store: "judged black-box from langgraph-sqlite (...)"."""
    versions = ", ".join(f"{name} {version}" for name, version in framework_versions(journal.format).items())
    if journal.format == AGENT_SEAMS:  # which SDK the agent is built on, the harness cannot say
        return f"judged at the agent's network seams (the agent SDKs installed here: {versions})"
    return f"judged black-box from {journal.format}" + (f" ({versions})" if versions else "")


def _unknown_reasons(unknown: list[RuleResult]) -> str:
    """The unknown rules grouped by reason: "evidence missing, so write-ahead, liveness cannot be judged: ..."."""
    by_reason: dict[str, list[str]] = {}
    for result in unknown:
        by_reason.setdefault(result.reason or "", []).append(result.rule)
    return "; ".join(f"{reason.partition(': ')[0]}, so {', '.join(names)} cannot be judged: {reason.partition(': ')[2]}"
                     for reason, names in by_reason.items())


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
    notes += evidence.store_notes
    return tuple(notes)
