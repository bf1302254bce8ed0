"""A session's figures, counted once from its outcomes.

The terminal's summary line and table, machine mode's summary, the JSON report,
the HTML report and the pytest plugin's failure message (the text JUnit XML
carries) all render one ``Summary``. Counting in one place is what keeps them
agreeing: a figure that two outputs count for themselves drifts apart the day
one of them learns a new kind of run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from killpoint.harness.model import GoldenRun, Verdict
from killpoint.harness.reporting.coverage import coverage

if TYPE_CHECKING:
    from killpoint.harness.model import RunOutcome

# Said of an unknown verdict that names no reason, so an unknown is never shown bare.
NO_REASON = "the checker gave no reason"


@dataclass(frozen=True)
class Coverage:
    """How much of the crash-free run the kills covered."""

    golden_points: int  # crash points the crash-free run reached
    first_kill_points: int  # of those, how many a first kill (incarnation 0) landed at
    points_per_incarnation: dict[str, int]  # incarnation number -> crash points killed in it


@dataclass(frozen=True)
class Summary:
    """What a session found, in figures.

    Runs are counted by ``RunOutcome.result``: "passed" only when a kill landed
    and recovery was judged correct; a valid run where no kill landed is
    "untested"; a run the checker could not judge is "unknown", never a pass or
    a failure, and ``unknown_reasons`` says why.
    """

    runs: int
    passed: int
    failed: int
    unknown: int
    untested: int
    later_kill_never_came: int  # runs where a kill landed but a later kill of the schedule never came
    schedules: int  # distinct ones
    kills: int  # scheduled kills that landed (not kills at the timeout)
    properties: dict[str, int]  # failing runs per broken property, most first
    unknown_reasons: dict[str, int]  # unknown runs per reason, most first
    kill_latency_ms: dict[str, float] | None  # event kills: median and max from the event to the confirmed kill
    coverage: Coverage
    golden_seconds: float
    seconds: float

    @property
    def schedules_per_second(self) -> float:
        return self.runs / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def unknown_reason(verdict: Verdict) -> str:
    """Why a verdict is unknown, in words: its error, or ``NO_REASON``."""
    return verdict.error or NO_REASON


def summarise(golden: GoldenRun, outcomes: Sequence[RunOutcome], seconds: float) -> Summary:
    """The session's figures: call once, when its last run is judged, and hand the value to every output."""
    results = Counter(outcome.result for outcome in outcomes)
    latencies = sorted(incarnation.kill_latency_s * 1000 for outcome in outcomes for incarnation in outcome.incarnations
                       if incarnation.kill_latency_s is not None)
    covered = coverage(list(outcomes))
    return Summary(
        runs=len(outcomes), passed=results["passed"], failed=results["failed"], unknown=results["unknown"],
        untested=results["untested"],
        later_kill_never_came=sum(1 for outcome in outcomes if outcome.killed_any and outcome.unreached),
        schedules=len({tuple(map(str, outcome.job.schedule)) for outcome in outcomes}),
        kills=sum(len(outcome.kills_landed) for outcome in outcomes),
        properties=dict(Counter(prop for outcome in outcomes for prop in outcome.verdict.properties).most_common()),
        unknown_reasons=dict(Counter(unknown_reason(outcome.verdict) for outcome in outcomes
                                     if outcome.result == "unknown").most_common()),
        kill_latency_ms={"median": round(latencies[len(latencies) // 2], 3), "max": round(latencies[-1], 3)}
        if latencies else None,
        coverage=Coverage(
            golden_points=len(golden.points),
            first_kill_points=len(set(covered.get(0, {})) & set(golden.points)),
            points_per_incarnation={str(number): len(points) for number, points in sorted(covered.items())}),
        golden_seconds=golden.seconds,
        seconds=round(seconds, 3),
    )
