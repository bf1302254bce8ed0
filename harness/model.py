"""The values that flow through a session: pure data, importing nothing of the harness.

Everything here can be built, compared and serialised without a process, a
socket or a backend, so the checker and the reports depend on this module and
the protocol names only. New values that cross module boundaries belong here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

# The backends a scenario or flag may name; harness.backends maps each to its implementation.
BACKENDS = ("subprocess", "forkserver", "docker")
RESTART_MODES = ("new", "same")  # docker: a new container per incarnation, or the killed one started again


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
