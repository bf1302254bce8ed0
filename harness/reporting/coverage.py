"""Coverage: which crash points a session's kills really landed at, and whether it tested enough.

Counted from the outcomes alone (the incarnations each run saw killed), so a
point that no run reached is never counted as covered, and the same figures
feed the summary, the text and HTML reports and the coverage gate.
"""

from __future__ import annotations

from killpoint.harness.model import AFTER_SUFFIX, AtPoint, GoldenRun, RunOutcome

MAX_NAMED_POINTS = 20  # never-killed points named by the coverage gate; the rest are counted
# The coverage key of a timed or event kill that landed before the workload announced any crash point.
BEFORE_FIRST_POINT = f"start{AFTER_SUFFIX}"


def coverage(outcomes: list[RunOutcome]) -> dict[int, dict[str, int]]:
    """Kills actually made, per incarnation: {incarnation: {"c3:after_effect": count}}.

    A kill at a point counts for that point (whatever its fault); any other kill
    covered the stretch after the last point announced, ``"c3:after_effect+"``
    (``BEFORE_FIRST_POINT`` if none was). A kill at the timeout counts for nothing.
    """
    covered: dict[int, dict[str, int]] = {}
    for outcome in outcomes:
        for incarnation in outcome.incarnations:
            kill = incarnation.kill
            if kill is None:
                continue
            if isinstance(kill, AtPoint):
                trigger = kill.trigger
            else:
                trigger = incarnation.points[-1] + AFTER_SUFFIX if incarnation.points else BEFORE_FIRST_POINT
            per = covered.setdefault(incarnation.number, {})
            per[trigger] = per.get(trigger, 0) + 1
    return covered


def points_never_killed(golden: GoldenRun, outcomes: list[RunOutcome]) -> list[str]:
    """The crash-free run's crash points no run's first kill landed at, in the order it reached them.

    A timed or event kill counts for the point it landed after (see ``coverage``).
    """
    killed = {trigger.removesuffix(AFTER_SUFFIX) for trigger in coverage(outcomes).get(0, {})}
    return [point for point in dict.fromkeys(golden.points) if point not in killed]


def untested(golden: GoldenRun, outcomes: list[RunOutcome], min_coverage: float | None = None) -> str | None:
    """Why a session did not test enough, or None.

    Not enough is: runs had kills scheduled and not one landed (every run "passed"
    having tested no recovery at all), or, with ``min_coverage`` (a percentage),
    fewer of the crash-free run's crash points killed than that.
    """
    scheduled = [outcome for outcome in outcomes if outcome.job.schedule]
    if scheduled and not any(outcome.killed_any for outcome in scheduled):
        return (f"nothing was tested: {len(scheduled)} run(s) had kills scheduled and not one landed (each "
                f"kill's moment never came: the workload finished or exited first), so no recovery was judged")
    if min_coverage is None:
        return None
    points = list(dict.fromkeys(golden.points))
    if not points:
        return (f"coverage cannot be measured against the minimum of {min_coverage:g}%: the crash-free run "
                f"announced no crash points (the workload does not speak the control socket, docs/protocol.md)")
    never = points_never_killed(golden, outcomes)
    percent = 100 * (len(points) - len(never)) / len(points)
    if percent >= min_coverage:
        return None
    named = ", ".join(never[:MAX_NAMED_POINTS]) + (
        f" ... {len(never) - MAX_NAMED_POINTS} more" if len(never) > MAX_NAMED_POINTS else "")
    return (f"coverage {percent:.1f}% is below the minimum of {min_coverage:g}%: {len(never)} of the "
            f"{len(points)} crash points of the crash-free run were never killed: {named}")
