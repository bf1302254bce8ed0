"""The values that flow through a session: pure data, importing nothing of the harness.

Everything here can be built, compared and serialised without a process, a
socket or a backend, so the checker and the reports depend on this module and
the protocol names only. New values that cross module boundaries belong here.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Generator, Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from killpoint import protocol
from killpoint.errors import InternalError
from killpoint.harness.codec import (NONE, SCHEMA, Undecodable, decode_all, field_problems, is_of, schema_problems,
                                     seconds_problems)

if TYPE_CHECKING:
    from killpoint.catalogue import Catalogue

# The backends a scenario or flag may name; harness.backends maps each to its implementation.
BACKENDS = ("subprocess", "forkserver", "docker")
RESTART_MODES = ("new", "same")  # docker: a new container per incarnation, or the killed one started again
DEFAULT_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Drift:
    """Catalogue drift: from the first recovery on, the workload is told ``tool`` has ``new_class``."""

    tool: str
    new_class: str

    def __str__(self) -> str:
        return f"{self.tool}={self.new_class}"


@dataclass(frozen=True)
class GoldenRun:
    """The crash-free run of a scenario: the world every recovered run must reach."""

    run_dir: Path
    world: dict[str, str]
    effects_per_call: dict[str, int]
    points: tuple[str, ...]
    seconds: float
    # Seconds from the moment its work began (its first crash point or journal/ledger write, so 0.0)
    # to its last crash point (or write, for a workload that announces none): where timed kills are
    # drawn, each counted from its own incarnation's start of work. None: not measured.
    work_window_s: tuple[float, float] | None = None
    # Why effects_per_call cannot be trusted (its ledger was refused, or holds a line that does not parse,
    # which may hide an effect record); None: counted from every line.
    effects_unknown: str | None = None
    # Seconds from the moment its work began to each of ``points`` (``runner.work_period``): the stretches
    # between them are where ``--timed`` kills are drawn (``explore.timed_delay``). Empty: not measured.
    point_times_s: tuple[float, ...] = ()


FINDING_TYPES: dict[str, tuple[type, ...]] = {
    "property": (str,), "message": (str,), "call": (str, NONE), "kill": (str, NONE), "evidence": (list,),
}


@dataclass(frozen=True)
class Finding:
    property: str
    message: str
    call: str | None = None
    kill: str | None = None
    evidence: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, entry: Any) -> Finding:
        problems = (field_problems(entry, FINDING_TYPES, text_lists=("evidence",)) if isinstance(entry, dict)
                    else ["not an object"])
        if problems:
            raise Undecodable(problems)
        return cls(entry["property"], entry["message"], entry["call"], entry["kill"], tuple(entry["evidence"]))


# What one checker rule concluded (Jepsen's :valid? true / false / :unknown).
PASSED, FAILED, UNKNOWN = "passed", "failed", "unknown"
RULE_STATUSES = (PASSED, FAILED, UNKNOWN)


@dataclass(frozen=True)
class RuleResult:
    """One rule's conclusion; ``reason`` says why it is unknown (evidence missing, or the rule's own error), or why
    a failed rule was judged only in part."""

    rule: str
    status: str  # PASSED, FAILED or UNKNOWN
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """What ``Verdict.to_json`` holds under the rule's name."""
        return {"status": self.status, "reason": self.reason}

    @classmethod
    def from_json(cls, rule: str, entry: Any) -> RuleResult:
        if not (isinstance(entry, dict) and entry.get("status") in RULE_STATUSES and "reason" in entry
                and is_of(entry["reason"], (str, NONE))):
            raise Undecodable([f"rules.{rule}: {entry!r:.60} is not {{\"status\": one of {', '.join(RULE_STATUSES)}, "
                               f"\"reason\": text or null}}"])
        return cls(rule, entry["status"], entry["reason"])


def merged_validity(results: tuple[RuleResult, ...]) -> bool | None:
    """False if any rule failed, else None if any is unknown, else True (Jepsen's merge-valid)."""
    statuses = {result.status for result in results}
    return False if FAILED in statuses else None if UNKNOWN in statuses else True


@dataclass(frozen=True)
class Verdict:
    """``valid`` is True (passed), False (a rule was broken) or None (unknown: see ``error``).

    ``rules`` holds each rule's own result: a failed verdict may still have
    rules that could not be judged, and says so.
    """

    valid: bool | None
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    error: str | None = None
    rules: tuple[RuleResult, ...] = ()

    @property
    def properties(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(finding.property for finding in self.findings))

    def to_json(self) -> dict[str, Any]:
        """The verdict as verdict.json and the JSON report hold it."""
        return {
            "valid": self.valid,
            "findings": [finding.to_json() for finding in self.findings],
            "notes": list(self.notes),
            "error": self.error,
            "rules": {result.rule: result.to_json() for result in self.rules},
        }

    @classmethod
    def from_json(cls, entry: Any) -> Verdict:
        """The verdict ``to_json`` wrote; Undecodable naming every problem, also a verdict at odds with itself
        (``checker.check`` never writes one): valid as its rules merge, failed exactly when it has findings."""
        if not isinstance(entry, dict):
            raise Undecodable([f"holds {type(entry).__name__}, not an object"])
        problems = field_problems(entry, VERDICT_TYPES, text_lists=("notes",), exact=False)
        if problems:
            raise Undecodable(problems)
        findings, wrong_findings = decode_all(Finding.from_json, ((f"findings[{index}].", (finding,))
                                                                for index, finding in enumerate(entry["findings"])))
        rules, wrong_rules = decode_all(RuleResult.from_json, (("", item) for item in entry["rules"].items()))
        problems = wrong_findings + wrong_rules
        if problems:
            raise Undecodable(problems)
        verdict = cls(entry["valid"], tuple(findings), tuple(entry["notes"]), entry["error"], tuple(rules))
        if contradictions := verdict.contradictions():
            raise Undecodable(contradictions)
        return verdict

    def contradictions(self) -> list[str]:
        """What in the verdict disagrees with the rest of it."""
        problems = []
        shown = json.dumps(self.valid)
        if self.rules and self.valid != (merged := merged_validity(self.rules)):
            statuses = ", ".join(f"{result.rule} {result.status}" for result in self.rules)
            problems.append(f"valid: {shown}, but its rules ({statuses}) make it {json.dumps(merged)}")
        if bool(self.findings) != (self.valid is False):
            problems.append(f"valid: {shown}, but it has {len(self.findings)} finding(s): a run fails exactly when "
                            f"it has findings")
        return problems


VERDICT_TYPES: dict[str, tuple[type, ...]] = {
    "valid": (bool, NONE), "findings": (list,), "notes": (list,), "error": (str, NONE), "rules": (dict,),
}


@dataclass(frozen=True)
class PlannedCall:
    call_id: str
    tool: str
    args: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Plan:
    task_id: str
    calls: tuple[PlannedCall, ...]

    def to_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id,
                "calls": [{"call_id": c.call_id, "tool": c.tool, "args": c.args} for c in self.calls]}

    @cached_property  # asked for by every run's record and token
    def digest(self) -> str:
        """A short hash of the plan's canonical JSON: what a repro token pins."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:12]

    @property
    def call_ids(self) -> tuple[str, ...]:
        return tuple(call.call_id for call in self.calls)

    def call(self, call_id: str) -> PlannedCall | None:
        return next((call for call in self.calls if call.call_id == call_id), None)


@dataclass(frozen=True)
class Scenario:
    name: str
    workload: tuple[str, ...]
    plan: Plan
    catalogue: Catalogue = field(hash=False)
    # Where the scenario came from, as a repro token re-reads it.
    origin: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    cwd: Path = Path(".")
    world_files: dict[str, str] = field(default_factory=dict, hash=False)
    world_state: dict[str, Any] = field(default_factory=dict, hash=False)
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_extra_incarnations: int = 3
    default_schedule: dict[str, Any] = field(default_factory=dict, hash=False)
    backend: str | None = None  # the file's choice; --backend overrides it
    image: str | None = None  # for the docker backend; --image overrides it
    # The fake world is on the device a power loss drops from, beside KILLPOINT_RUN_DIR; else it stands for the
    # world outside the device, which no power loss touches.
    world_on_device: bool = False
    # The scenario's [journal] table, read: the runtime keeps its own durable record (a framework's database, a
    # mapped journal) and is judged from it and the ledger (black-box), not from killpoint's journal.
    journal: StoreTable | None = field(default=None, hash=False, compare=False)
    # The scenario's [agent] table: the workload is an unmodified agent, served a scripted model and the tools by
    # the harness (harness/agents), judged from what the model received (``journal`` is then agent-seams).
    agent: dict[str, Any] | None = field(default=None, hash=False, compare=False)
    # The scenario's [database] table: the workload keeps its state in a database server the harness provides.
    database: DatabaseSpec | None = field(default=None, hash=False, compare=False)

    @cached_property  # asked for by every run's record and token
    def catalogue_digest(self) -> str:
        text = json.dumps(self.catalogue.to_protocol(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @cached_property
    def plan_file_text(self) -> str:
        """The plan as every run directory hands it to the workload (``plan.json``), encoded once per session."""
        return json.dumps(self.plan.to_json(), indent=1)

    @cached_property
    def catalogue_file_text(self) -> str:
        """The catalogue as every run directory hands it to the workload (``catalogue.json``), encoded once."""
        return json.dumps(self.catalogue.to_protocol(), indent=1)


# -- a runtime's own durable record, as a store reader (judge/stores) reads one copy of it --------------


@dataclass(frozen=True)
class StepRecord:
    """What the store durably holds for one planned call, with the row(s) that say so."""

    call: str
    status: str  # protocol.SUCCEEDED, protocol.FAILED or protocol.RUNNING
    quote: str  # e.g. "checkpoints.sqlite: writes(task_path='~__pregel_pull, c2', channel='order')"


@dataclass(frozen=True)
class DurableState:
    """A store copy read as per-call durable states.

    ``records`` holds planned calls only: a call absent has no durable record.
    A state with ``problems`` is incomplete (its records are then empty): the
    rules that need it are unknown, never judged on what is left.
    """

    records: dict[str, StepRecord]
    records_start: bool  # the store records a step when it begins (a RUNNING status exists)
    completed: bool | None  # the store says the task/workflow finished (None: it cannot say)
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what reading it took that a report should say (a hot journal rolled back)
    # What the store's keeper saw of each planned call (an agent's HTTP exchanges, bodies excerpted), as findings
    # about the call quote it; empty for a store that keeps no such record.
    traffic: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # What the agent's own store (``[agent] store``) held of each planned call in this copy, quoted: evidence beside
    # the verdict, which the seams decide; empty when the scenario names no such store.
    kept: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def unreadable(cls, records_start: bool, *problems: str) -> DurableState:
        """The state of a copy that could not be read: no records, the problems, no word on completion."""
        return cls({}, records_start, None, problems)


class StoreReader(Protocol):
    @property
    def name(self) -> str:
        """The format, for reports."""
        ...

    def files(self, plan: Plan) -> tuple[str, ...]:
        """Paths relative to the workload folder to copy at each kill (a SQLite database with its side files)."""
        ...

    def read(self, folder: Path, plan: Plan) -> DurableState:
        """The durable state held by the copy of ``files()`` in ``folder``; never raises."""
        ...


@dataclass(frozen=True)
class DatabaseSpec:
    """A scenario's ``[database]`` table: a PostgreSQL server of the harness's own for each run (``postgres``, with
    ``settings`` written into its configuration), or the user's server at ``url``, where each run gets a database
    of its own. The workload finds its database at ``$KILLPOINT_DATABASE_URL``."""

    postgres: bool = False
    url: str | None = None
    settings: Mapping[str, str | int | float | bool] = field(default_factory=dict)


@dataclass(frozen=True)
class DumpQuery:
    """One query a database store's reader has the harness ask at each kill (``harness/databases/dump.py``): its
    rows, kept under ``name`` in the store's copy, are what the reader reads. ``tables`` are the schema-qualified
    tables it reads, each of which must be a plain table (a view would run what the workload defined);
    ``sql`` is a SELECT with ``%(name)s`` parameters from ``params``."""

    name: str
    tables: tuple[str, ...]
    sql: str
    params: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class DatabaseStoreReader(StoreReader, Protocol):
    """A reader of a store kept in a database server, not in the workload folder: its copy is a dump."""

    def dump_queries(self, plan: Plan) -> tuple[DumpQuery, ...]:
        """What to ask the database at each kill, for ``read`` to read from the dump."""
        ...


@dataclass(frozen=True)
class StoreTable:
    """A scenario's ``[journal]`` table (an ``[agent]``'s seams), read once as the scenario is loaded
    (``judge/stores.store_table``): the format it names, the reader of the store it describes, and the table as
    written, kept for a scenario file written back."""

    format: str
    reader: StoreReader
    table: Mapping[str, Any] = field(hash=False, compare=False)

    @property
    def path(self) -> str | None:
        """The store's file as the table names it (relative to the workload folder); None: the format's own."""
        path = self.table.get("path")
        return path if isinstance(path, str) else None


@dataclass(frozen=True)
class Incarnation:
    """What the runner saw of one launch of the workload."""

    number: int
    pid: int
    exit_code: int | None  # None when the harness killed it
    killed_at: str | None = None  # the kill point, when killed at a crash point
    timed_out: bool = False
    points: tuple[str, ...] = ()  # crash points reached, as "call:point"
    seconds: float = 0.0
    stderr_tail: str = ""
    leftovers: tuple[str, ...] = ()  # processes it left running, killed by the sweep
    catalogue_drift: str | None = None  # "tool=CLASS" when it was handed a drifted catalogue
    kill_latency_s: float | None = None  # event kills: from the event's write to the confirmed kill
    protocol_problems: tuple[str, ...] = ()  # control messages that were not crash points
    # Processes that had left its containment and held the run's files (execute/_escapees.py), killed: the run is
    # unknown.
    escaped: tuple[str, ...] = ()
    # Seconds it waited for the lazy file system of a power-loss run (``power_loss.StorageWait``), by which its
    # deadline moved; None off one.
    storage_s: float | None = None
    # It reached its timeout only once its deadline had moved by the most a wait for that file system may move it
    # (``MAX_STORAGE_TIMEOUTS``): the tool's slowness may explain it as well as a hang.
    storage_bound: bool = False

    @cached_property
    def kill(self) -> Kill | None:
        """The scheduled kill that ended it, read from ``killed_at`` once; None if it ended itself or at its timeout.

        ``killed_at`` stays the kill's text (it is evidence, quoted as the
        token and the flags spell it); a reader comes here rather than testing
        its spelling.
        """
        return None if self.killed_at in (None, TIMEOUT) else parse_kill(self.killed_at)

    def to_json(self) -> dict[str, Any]:
        """The incarnation as incarnations.json, verdict.json and the JSON report hold it: its fields, each a JSON
        value already (not ``asdict``, which copies each deeply, nor ``vars``, which holds the ``kill`` read)."""
        return {name: getattr(self, name) for name in INCARNATION_FIELDS}

    @classmethod
    def from_json(cls, index: int, entry: Any) -> Incarnation:
        """Entry ``index`` of the incarnations as ``to_json`` wrote them (one written before a key was added holds
        what that key's absence meant); Undecodable naming what is wrong."""
        if problem := _incarnation_problem(index, entry):
            raise Undecodable([problem])
        entry = {**INCARNATION_LATER_FIELDS, **entry}
        return cls(**{**entry, **{key: tuple(entry[key]) for key in _INCARNATION_TEXT_LISTS}})

    @classmethod
    def all_from_json(cls, entries: Any) -> tuple[Incarnation, ...]:
        """Every incarnation of ``entries``, numbered 0, 1, ... in order; Undecodable naming each entry wrong."""
        if not isinstance(entries, list):
            raise Undecodable([f"holds {type(entries).__name__}, not a list of the incarnations"])
        incarnations, problems = decode_all(cls.from_json, (("", item) for item in enumerate(entries)))
        if problems:
            raise Undecodable(problems)
        return tuple(incarnations)


# The keys of an incarnation as ``Incarnation.to_json`` writes them, each with its JSON types.
INCARNATION_FIELDS: dict[str, tuple[type, ...]] = {
    "number": (int,), "pid": (int,), "exit_code": (int, NONE), "killed_at": (str, NONE), "timed_out": (bool,),
    "points": (list,), "seconds": (int, float), "stderr_tail": (str,), "leftovers": (list,),
    "catalogue_drift": (str, NONE), "kill_latency_s": (int, float, NONE), "protocol_problems": (list,),
    "escaped": (list,), "storage_s": (int, float, NONE), "storage_bound": (bool,),
}
_INCARNATION_TEXT_LISTS = ("points", "leftovers", "protocol_problems", "escaped")  # held as tuples
# Keys a later killpoint added, and what an entry written before them means: nothing escaped, no lazy file system.
INCARNATION_LATER_FIELDS: dict[str, Any] = {"escaped": [], "storage_s": None, "storage_bound": False}


def _incarnation_problem(index: int, entry: Any) -> str | None:
    """Why entry ``index`` of the incarnations is not an incarnation as the runner writes it, or None."""
    if not isinstance(entry, dict):
        return f"entry {index} is {type(entry).__name__}, not an object"
    problems = []
    if missing := sorted(set(INCARNATION_FIELDS) - set(INCARNATION_LATER_FIELDS) - set(entry)):
        problems.append(f"no {', '.join(missing)}")
    if unknown := sorted(set(entry) - set(INCARNATION_FIELDS)):
        problems.append(f"unknown key(s) {', '.join(map(repr, unknown))}")
    if wrong := [f"{key}={value!r:.40}" for key, value in entry.items() if key in INCARNATION_FIELDS
                 and not _fits(key, value)]:
        problems.append(f"ill-typed {', '.join(wrong)}")
    if problems:
        return f"entry {index} has {'; '.join(problems)}"
    if entry["number"] != index:
        return f"entry {index} is numbered {entry['number']}; incarnations are numbered 0, 1, ... in order"
    if entry["killed_at"] not in (None, TIMEOUT):
        try:
            parse_kill(entry["killed_at"])
        except KillSyntaxError as error:
            return f"entry {index} has killed_at {entry['killed_at']!r:.60}, which is no kill ({error.reason})"
    return None


def _fits(key: str, value: Any) -> bool:
    if key in _INCARNATION_TEXT_LISTS:
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    return is_of(value, INCARNATION_FIELDS[key])


# -- kills: when an incarnation is SIGKILLed, and the fault the kill carries --------------------
#
# A kill's text (``str``) is how tokens, flags, scenario files, verdict.json and the docs spell it:
# ``c3:after_effect``, ``after_decisions``, ``c3:after_started+``, ``@0.0342``, ``c3:after_started@0.0012``,
# ``ledger:effect:c3``,
# a crash-point kill optionally followed by ``/now`` (``c3:after_effect/now``), then any kill by
# ``/torn:500`` or ``/power`` (``/power:op:7``, ``/power:seq:7``). ``parse_kill`` reads every one of them back.

TIMEOUT = "timeout"  # killed_at of an incarnation struck at its timeout, not at a scheduled kill
DELAY_PREFIX = "@"  # [POINT]@SECONDS: a kill that many seconds after the incarnation's work began (after POINT)
AFTER_SUFFIX = "+"  # POINT+: a kill at the first crash point after POINT
CALL_SEPARATOR = ":"  # CALL:POINT, SOURCE:KIND:CALL
TORN_SEPARATOR = "/torn:"  # KILL/torn:N: after the kill, the journal's last record keeps N per mille
NOW_SUFFIX = "/now"  # POINT/now: the point is answered ``kill`` (the workload kills itself), not left waiting
POWER_SUFFIX = "/power"  # KILL/power[:op|seq:SEED]: after the kill, what was never fsynced is lost
LEDGER_SOURCE, JOURNAL_SOURCE = "ledger", "journal"  # the evidence files an event kill watches
EVENT_SOURCES: dict[str, tuple[str, ...]] = {
    LEDGER_SOURCE: protocol.TOOL_LEDGER_KINDS,
    JOURNAL_SOURCE: (protocol.STARTED, protocol.FINISHED, protocol.DECISION, protocol.VERIFIED),
}
KILL_AT_FLAG, KILL_ON_FLAG = "--kill-at", "--kill-on"  # the flags a kill's syntax errors name


@dataclass(frozen=True)
class PlainKill:
    """SIGKILL and nothing more: the journal stays as the workload left it."""

    def __str__(self) -> str:
        return ""


@dataclass(frozen=True)
class TornTail:
    """SIGKILL, then the journal's last record cut to ``permille``/1000 of its bytes: a crash in mid-write."""

    permille: int

    def __str__(self) -> str:
        return f"{TORN_SEPARATOR}{self.permille}"


@dataclass(frozen=True)
class PowerLoss:
    """SIGKILL, then every write the runtime never made durable is lost, as a disk losing power would lose it.

    ``torn`` None drops all of it; ``"op"`` keeps a ``seed``-chosen prefix of
    the last un-synced write, ``"seq"`` a ``seed``-chosen subset of the
    un-synced writes of the file written last (LazyFS's torn-op and torn-seq).
    The runtime's storage is a lazy file system (``faults/lazyfs``) for it.
    """

    torn: str | None = None
    seed: int = 0

    @property
    def variant(self) -> str:
        """The lazy file system's name for the drop: ``plain``, ``op`` or ``seq``."""
        return self.torn or "plain"

    def __str__(self) -> str:
        return POWER_SUFFIX + (f":{self.torn}:{self.seed}" if self.torn else "")


# What a strike does besides the kill: one frozen dataclass per fault, with its ``__str__`` suffix,
# its branch in ``parse_kill`` and in nemesis._inflict.
Fault = PlainKill | TornTail | PowerLoss
POWER_VARIANTS = ("op", "seq")  # the torn power losses: /power:op:SEED, /power:seq:SEED


class _Rendered:
    """A kill's text: its trigger, then its fault's suffix (nothing for a plain kill)."""

    fault: Fault

    @property
    def trigger(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return f"{self.trigger}{self.fault}"


@dataclass(frozen=True)
class _AtCrashPoint(_Rendered):
    """A kill triggered by a crash point the workload announces (``call`` None: a point of no call).

    A pausing kill (``now`` False) leaves the point unanswered: the thread that
    announced it waits while the harness kills, and every other thread of the
    workload runs on until the SIGKILL lands (a background writer finishes its
    write). A non-pausing kill (``now``, spelled ``/now``) answers ``kill``, and
    the workload SIGKILLs its own process group at once, so nothing of it runs
    on; the harness strikes right after, as it always does.
    """

    point: str
    call: str | None = None
    fault: Fault = PlainKill()
    now: bool = False
    _suffix: ClassVar[str] = ""  # after the point reached, in the kill's trigger

    @property
    def trigger(self) -> str:
        """The moment (``c3:after_effect``, ``c3:after_started+``), without ``/now``: the kill marker's point."""
        return f"{self.reached}{self._suffix}"

    def __str__(self) -> str:
        return f"{self.trigger}{NOW_SUFFIX if self.now else ''}{self.fault}"

    @property
    def reached(self) -> str:
        """The point as the runner records it reached: ``c3:after_effect``, ``after_decisions``."""
        return self.point if self.call is None else f"{self.call}{CALL_SEPARATOR}{self.point}"

    def matches(self, point: str, call: str | None) -> bool:
        """A kill of no call matches its point whatever call a runtime attached to it (after_decisions comes once
        a recovery), except at an agent's seams, where the model request of no call is the final answer's."""
        return point == self.point and (call == self.call or (self.call is None and point not in protocol.SEAM_POINTS))


@dataclass(frozen=True)
class AtPoint(_AtCrashPoint):
    """Kill at the crash point itself: the workload's message is never answered (``/now``: answered ``kill``)."""


@dataclass(frozen=True)
class AfterPoint(_AtCrashPoint):
    """Kill at the first crash point after this one (how a timed kill is pinned for a replay)."""

    _suffix: ClassVar[str] = AFTER_SUFFIX


@dataclass(frozen=True)
class AfterDelay(_Rendered):
    """Kill ``seconds`` (rendered to 0.1 ms) after the incarnation's work began (``rendezvous.work_began``),
    ``@0.0342``; or, with ``after`` (a point as the runner records it reached), that long after the incarnation
    first reached that crash point, ``c3:after_started@0.0012``.

    Either way it is a SIGKILL at a wall-clock moment, never a kill at a point: the workload is not paused
    there, and the kill lands wherever the incarnation has got to by then. Counted from a point the
    incarnation reached, the moment follows the incarnation's own progress, so a ``--timed`` kill drawn in
    the stretch between two points of the crash-free run (``explore.timed_delay``) lands in the same stretch
    of an incarnation that runs faster or slower; counted from the start of work, it needs no crash point.
    """

    seconds: float
    fault: Fault = PlainKill()
    after: str | None = None

    @property
    def trigger(self) -> str:
        return f"{self.after or ''}{DELAY_PREFIX}{self.seconds:.4f}"


@dataclass(frozen=True)
class OnEvent(_Rendered):
    """Kill once a record of ``kind`` for ``call`` appears in the ``source`` file (an EVENT_SOURCES key)."""

    source: str
    kind: str
    call: str
    fault: Fault = PlainKill()

    @property
    def trigger(self) -> str:
        return CALL_SEPARATOR.join((self.source, self.kind, self.call))


Kill = AtPoint | AfterPoint | AfterDelay | OnEvent
RENDEZVOUS_KILLS = (AtPoint, AfterPoint)  # the kills that wait for the workload's crash points
Schedule = tuple[Kill, ...]  # kill k is incarnation k's; incarnations after the last run freely


class KillSyntaxError(InternalError, ValueError):
    """A kill's text that is no kill; its message names the flag it is written with and the fix."""

    def __init__(self, text: str, reason: str, flag: str = KILL_AT_FLAG) -> None:
        super().__init__(f"{flag} {text!r}: {reason}")
        self.text, self.reason, self.flag = text, reason, flag

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.text, self.reason, self.flag)


def parse_kill(text: str) -> Kill:
    """The kill ``text`` spells (see above), the inverse of ``str``; KillSyntaxError if it spells none.

    Only the text is checked: whether its call is in a plan is ``schedule.parse_kill_point``'s.
    """
    trigger, fault = _split_power(text)
    trigger, separator, permille = trigger.partition(TORN_SEPARATOR)
    if separator and isinstance(fault, PowerLoss):
        raise KillSyntaxError(text, "a kill carries one fault: /torn:N (the journal's tail cut) or /power "
                                    "(what was never fsynced lost), not both")
    if separator:
        if permille.endswith(NOW_SUFFIX):
            raise KillSyntaxError(text, f"{NOW_SUFFIX} comes before the fault: write "
                                        f"{trigger}{NOW_SUFFIX}{TORN_SEPARATOR}{permille.removesuffix(NOW_SUFFIX)}")
        if not (permille.isascii() and permille.isdigit() and 0 < int(permille) < 1000):
            raise KillSyntaxError(text, "torn:N keeps N per mille of the last record; use 1..999")
        fault = TornTail(int(permille))
    now = trigger.endswith(NOW_SUFFIX)
    trigger = trigger.removesuffix(NOW_SUFFIX)
    source, _, rest = trigger.partition(CALL_SEPARATOR)
    if now and (DELAY_PREFIX in trigger or source in EVENT_SOURCES):
        raise KillSyntaxError(text, f"{NOW_SUFFIX} goes with a crash-point kill (c3:after_effect{NOW_SUFFIX}, "
                                    f"c3:after_started+{NOW_SUFFIX}); a timed or event kill never pauses the workload",
                              KILL_ON_FLAG if source in EVENT_SOURCES else KILL_AT_FLAG)
    if DELAY_PREFIX in trigger:
        return AfterDelay(_seconds(trigger), fault, _delay_anchor(text, trigger))
    if source in EVENT_SOURCES:
        kind, _, call = rest.partition(CALL_SEPARATOR)
        if kind not in EVENT_SOURCES[source] or not call or CALL_SEPARATOR in call:
            kinds = "; ".join(f"{source}: {', '.join(kinds)}" for source, kinds in EVENT_SOURCES.items())
            raise KillSyntaxError(trigger, f"write SOURCE:KIND:CALL, e.g. ledger:effect:c3 ({kinds})", KILL_ON_FLAG)
        return OnEvent(source, kind, call, fault)
    after = trigger.endswith(AFTER_SUFFIX)
    call, _, point = trigger.removesuffix(AFTER_SUFFIX).rpartition(CALL_SEPARATOR)
    if point not in protocol.ALL_POINTS:
        raise KillSyntaxError(trigger, f"unknown point {point!r}; points are {', '.join(protocol.ALL_POINTS)} "
                                       f"(or @SECONDS, or ledger:KIND:CALL / journal:KIND:CALL)")
    if not call and point not in protocol.CALLLESS_POINTS:
        raise KillSyntaxError(trigger, f"{point} happens per call; write CALL:{point}, e.g. c1:{point}")
    return (AfterPoint if after else AtPoint)(point, call or None, fault, now)


def _split_power(text: str) -> tuple[str, Fault]:
    """``text`` without its ``/power`` suffix, and the power loss it spells (``PlainKill`` when none)."""
    trigger, separator, rest = text.partition(POWER_SUFFIX)
    if not separator:
        return text, PlainKill()
    if not rest:
        return trigger, PowerLoss()
    variant, _, seed = rest.removeprefix(":").partition(":")
    if not rest.startswith(":") or variant not in POWER_VARIANTS or not (seed.isascii() and seed.isdigit()):
        raise KillSyntaxError(text, f"write {trigger}{POWER_SUFFIX}, or {trigger}{POWER_SUFFIX}:op:SEED / "
                                    f"{trigger}{POWER_SUFFIX}:seq:SEED for a torn power loss (SEED a whole number)")
    return trigger, PowerLoss(variant, int(seed))


def _delay_anchor(text: str, trigger: str) -> str | None:
    """The crash point a timed kill ``POINT@SECONDS`` counts from (a plain one, as reached: ``c3:after_started``);
    None for ``@SECONDS``, counted from the start of work."""
    anchor = trigger.rpartition(DELAY_PREFIX)[0]
    if not anchor:
        return None
    point = parse_kill(anchor)
    if not isinstance(point, AtPoint) or point != AtPoint(point.point, point.call):
        raise KillSyntaxError(text, f"a timed kill counts from a crash point or from the start of work: write "
                                    f"c3:after_started{DELAY_PREFIX}0.002 or {DELAY_PREFIX}0.002")
    return point.reached


def _seconds(trigger: str) -> float:
    try:
        seconds = float(trigger.rpartition(DELAY_PREFIX)[2])
    except ValueError:
        seconds = -1.0
    if not (math.isfinite(seconds) and seconds >= 0):
        raise KillSyntaxError(trigger, "a timed kill is @SECONDS, a finite number >= 0, e.g. @0.05")
    return seconds


# -- runs: what a session schedules, and what each run came to ---------------------------------------

@dataclass(frozen=True)
class Job:
    """One schedule to run; ``seed`` is set for runs drawn at random."""

    index: int
    schedule: Schedule
    seed: int | None = None
    drift: Drift | None = None
    saves_prefix: bool = False  # its state after its last kill starts the runs that kill once more (prefixes)


@dataclass(frozen=True)
class RunOutcome:
    """What one run came to: its job, where its evidence is, its verdict, its incarnations and its repro token."""

    job: Job
    run_dir: Path
    verdict: Verdict
    incarnations: tuple[Incarnation, ...]
    token: str
    seconds: float
    shared: int = 0  # its first incarnations are another run's, started from the state they left (execute/prefixes.py)

    @property
    def kills_landed(self) -> frozenset[int]:
        """Numbers of the scheduled kills that landed (kill k is incarnation k's); a kill at the timeout is not one."""
        return frozenset(incarnation.number for incarnation in self.incarnations
                         if incarnation.killed_at is not None and not incarnation.timed_out)

    @property
    def killed_any(self) -> bool:
        """Some scheduled kill really landed, so the run tested a recovery."""
        return bool(self.kills_landed)

    @property
    def unreached(self) -> tuple[str, ...]:
        """Scheduled kills whose moment never came (the workload finished, exited or hung first)."""
        return tuple(str(kill) for number, kill in enumerate(self.job.schedule) if number not in self.kills_landed)

    @property
    def result(self) -> str:
        """How the run is reported: one of ``RESULTS``.

        A valid verdict counts as "passed" only when a kill landed: a run none of
        whose kills came tested no recovery, so it is "untested", not a pass.
        """
        if self.verdict.valid is None:
            return "unknown"
        if not self.verdict.valid:
            return "failed"
        return "passed" if self.killed_any else "untested"

    def to_json(self) -> dict[str, Any]:
        """The run as verdict.json and the JSON report hold it (``from_json`` reads it back)."""
        return {
            "schema": SCHEMA,
            "index": self.job.index,
            "schedule": [str(kill) for kill in self.job.schedule],
            "seed": self.job.seed,
            "drift": str(self.job.drift) if self.job.drift else None,
            "run_dir": str(self.run_dir),
            **self.verdict.to_json(),
            "outcome": self.result,
            "unreached": list(self.unreached),
            "incarnations": [incarnation.to_json() for incarnation in self.incarnations],
            "shared_incarnations": self.shared,
            "token": self.token,
            "seconds": self.seconds,
        }


    @classmethod
    def from_json(cls, entry: Any) -> RunOutcome:
        """The run ``to_json`` wrote; Undecodable naming every problem, also a run at odds with itself: an outcome
        its verdict and incarnations do not make, a duration or index out of bounds, a kill that is none."""
        if not isinstance(entry, dict):
            raise Undecodable([f"holds {type(entry).__name__}, not an object"])
        if "schema" not in entry:  # written before the shape had a version: what a key added since meant absent
            entry = {**BEFORE_SCHEMA, **entry}
        problems = schema_problems(entry) or field_problems(entry, OUTCOME_TYPES, text_lists=("schedule", "unreached"),
                                                            exact=False)
        if problems:
            raise Undecodable(problems)
        verdict = incarnations = None
        try:
            verdict = Verdict.from_json(entry)
        except Undecodable as wrong:
            problems += wrong.problems
        try:
            incarnations = Incarnation.all_from_json(entry["incarnations"])
            problems += _outcome_bounds(entry)
        except Undecodable as wrong:
            problems += [f"incarnations: {problem}" for problem in wrong.problems]
        if entry["outcome"] not in RESULTS:
            problems.append(f"outcome: {entry['outcome']!r:.40} is not one of {', '.join(RESULTS)}")
        try:
            schedule = tuple(parse_kill(kill) for kill in entry["schedule"])
            drift = Drift(*entry["drift"].partition("=")[::2]) if entry["drift"] else None
        except KillSyntaxError as error:
            problems.append(f"schedule: {error.text!r} is no kill ({error.reason})")
        if problems:
            raise Undecodable(problems)
        assert verdict is not None and incarnations is not None
        outcome = cls(Job(entry["index"], schedule, entry["seed"], drift), Path(entry["run_dir"]), verdict,
                      incarnations, entry["token"], entry["seconds"], entry.get("shared_incarnations", 0))
        if outcome.result != entry["outcome"]:
            raise Undecodable([f"outcome: says {entry['outcome']}, but its verdict and incarnations make it "
                               f"{outcome.result}"])
        return outcome


# The fields of a run as ``RunOutcome.to_json`` writes them, beside its verdict's (``VERDICT_TYPES``).
OUTCOME_TYPES: dict[str, tuple[type, ...]] = {
    "index": (int,), "schedule": (list,), "seed": (int, NONE), "drift": (str, NONE), "run_dir": (str,),
    "outcome": (str,), "unreached": (list,), "incarnations": (list,), "token": (str,), "seconds": (int, float),
}
MAX_RUN_INDEX = 1_000_000_000  # no session runs a billion schedules: an index past it was never written
# Keys added to a run before its shape had a version (``schema``), and what a run written without them means.
BEFORE_SCHEMA: dict[str, Any] = {"rules": {}}  # no rule's result recorded (before 2026-12-01)


def _outcome_bounds(entry: dict[str, Any]) -> list[str]:
    """A run's index, its shared incarnations (absent before prefixes were shared: none) and every duration
    it gives must be in bounds (a negative or astronomic one was never written); its incarnations decoded."""
    problems = [] if 0 <= entry["index"] <= MAX_RUN_INDEX else [
        f"index: {entry['index']!r:.40} is not a whole number from 0 to {MAX_RUN_INDEX}"]
    shared = entry.get("shared_incarnations", 0)
    if not (is_of(shared, (int,)) and 0 <= shared <= len(entry["incarnations"])):
        problems.append(f"shared_incarnations: {shared!r:.40} is not a whole number from 0 to the run's "
                        f"{len(entry['incarnations'])} incarnations")
    durations = {"seconds": entry["seconds"]}
    for number, incarnation in enumerate(entry["incarnations"]):
        durations[f"incarnations[{number}].seconds"] = incarnation["seconds"]
        if incarnation["kill_latency_s"] is not None:
            durations[f"incarnations[{number}].kill_latency_s"] = incarnation["kill_latency_s"]
    return problems + seconds_problems(durations)


RESULTS = ("passed", "failed", "unknown", "untested")

# Given the golden run, the batches of jobs a session runs, one after the other; each batch's outcomes are sent
# back in (``generator.send``) as the next is asked for: how exhaustive depth k+1 grows from the points depth k
# reached. Iterated without sending, a batch's outcomes are None.
BatchGenerator = Generator[list[Job], "list[RunOutcome] | None", None]
JobBatches = Callable[[GoldenRun], BatchGenerator]


def next_batch(batches: BatchGenerator, done: list[RunOutcome] | None) -> list[Job] | None:
    """The batch after the one whose outcomes are ``done`` (None: the first); None when there is no more."""
    try:
        return batches.send(done)  # send(None) to a generator not yet started is next()
    except StopIteration:
        return None


def each_batch(batches: JobBatches, change: Callable[[list[Job]], list[Job]]) -> JobBatches:
    """``batches`` with each batch changed by ``change`` as it is handed out, and each batch's outcomes handed
    back to ``batches``."""

    def changed(golden: GoldenRun) -> BatchGenerator:
        inner = batches(golden)
        done = None
        while (batch := next_batch(inner, done)) is not None:
            done = yield change(batch)

    return changed
