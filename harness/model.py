"""The values that flow through a session: pure data, importing nothing of the harness.

Everything here can be built, compared and serialised without a process, a
socket or a backend, so the checker and the reports depend on this module and
the protocol names only. New values that cross module boundaries belong here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    # Seconds after launch of its first and last crash point (or journal/ledger write, for a
    # workload that announces none): where timed kills are drawn. None: not measured.
    work_window_s: tuple[float, float] | None = None


@dataclass(frozen=True)
class Finding:
    property: str
    message: str
    call: str | None = None
    kill: str | None = None
    evidence: tuple[str, ...] = ()


# What one checker rule concluded (Jepsen's :valid? true / false / :unknown).
PASSED, FAILED, UNKNOWN = "passed", "failed", "unknown"


@dataclass(frozen=True)
class RuleResult:
    """One rule's conclusion; ``reason`` says why it is unknown (evidence missing, or the rule's own error)."""

    rule: str
    status: str  # PASSED, FAILED or UNKNOWN
    reason: str | None = None


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

    def to_json(self) -> dict[str, object]:
        """The verdict as verdict.json and the JSON report hold it."""
        return {
            "valid": self.valid,
            "findings": [asdict(finding) for finding in self.findings],
            "notes": list(self.notes),
            "error": self.error,
            "rules": {result.rule: {"status": result.status, "reason": result.reason} for result in self.rules},
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

    @property
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

    @property
    def catalogue_digest(self) -> str:
        text = json.dumps(self.catalogue.to_protocol(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


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
