"""``killpoint merge``: the JSON reports of one session's shards, judged as the one session they split.

``killpoint run --shard K/N --json`` runs a disjoint part of a session's schedules (``explore.shard_of``
puts every schedule in the shard of its first kill). Merging rebuilds each report's runs as the
``RunOutcome`` values they were written from, so the merged summary, coverage map, HTML report and
verdict are rendered by the very functions that render an unsharded session's: nothing is counted twice
in two ways.

What is refused (bad input, exit 2): a file that is no killpoint report, or one changed since killpoint
wrote it (its plan or catalogue no longer hashes to its digest, a run's outcome disagrees with its
verdict or its verdict with its own findings and rules, a run sits in a shard its first kill does not
belong to, two runs share an index, an index or duration is negative or past any session's, its summary
is not what its runs add up to); a run index two reports of a drawn session both hold; reports of
different sessions (scenario, plan, catalogue, workload, how runs are judged, the mode and its options,
the seed, the backend, the shard count); and one shard given twice.

What is *not* refused is a missing shard: the reports given are real evidence of the session, so a
failure among them is still a real bug (exit 1), and without one the session is incomplete, which is
"not established" (exit 3), never a pass. A shard is typically missing because its CI job died,
timed out or was cancelled, which is not the fault of the input given to merge, and refusing would
hide the failures the other shards found.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from killpoint._input_files import REPORT_LIMIT_BYTES, read_input
from killpoint._json import strict_json
from killpoint.catalogue import Catalogue
from killpoint.errors import ConfigError
from killpoint.harness.config.limits import LIMITS
from killpoint.harness.config.scenario import parse_plan
from killpoint.harness.codec import NONE, Undecodable, field_problems, is_of, seconds_problems
from killpoint.harness.model import GoldenRun, RunOutcome, Scenario
from killpoint.harness.reporting.report import REPORT_FORMAT, write_json_report
from killpoint.harness.reporting.summary import Summary, summarise
from killpoint.harness.schedules.explore import shard_of

WRITTEN_BY = "killpoint run --shard K/N --json REPORT.json"
MAX_PROBLEMS = 20  # problems listed per report; the rest are counted
# The most shards a session has (a CI matrix; `missing` counts them one by one): past it, none wrote the report.
MAX_SHARDS = LIMITS["shards"].high
REPORT_TYPES: dict[str, tuple[type, ...]] = {
    "scenario": (str,), "origin": (dict,), "plan_digest": (str,), "catalogue_digest": (str,), "judged": (str,),
    "session": (str,), "session_digest": (str,), "seed": (int, NONE), "backend": (str,), "shard": (list, NONE),
    "workload": (list,), "plan": (dict,), "catalogue": (dict,), "golden": (dict,), "summary": (dict,),
    "runs": (list,),
}
GOLDEN_TYPES: dict[str, tuple[type, ...]] = {"run_dir": (str,), "seconds": (int, float), "points": (list,)}
CATALOGUE_TYPES: dict[str, tuple[type, ...]] = {"default": (str,), "interactive": (list,), "tools": (dict,)}
# The fields every shard of one session has alike, each with the fix when two reports differ in it.
SAME_SESSION: tuple[tuple[str, str], ...] = (
    ("scenario", "merge the shards of one scenario only"),
    ("plan_digest", "the plan changed between the shards: run every shard from one commit"),
    ("catalogue_digest", "the catalogue changed between the shards: run every shard from one commit"),
    ("workload", "run every shard with the same --workload (or none)"),
    ("judged", "the scenario's [journal] changed between the shards: run every shard from one commit"),
    ("seed", "give every shard the same --seed (under CI, CI=true, the seed is 0 unless one is given)"),
    ("session_digest", ("run every shard with the same flags, all but --shard (mode, depth, faults, --drift, "
                        "--timeout, --timed-window)")),
    ("backend", "run every shard on the same --backend (and --image, --restart)"),
    ("shards", "give every shard the same N in --shard K/N"),
)
SESSION_FIELDS = ("session", *(field for field, _ in SAME_SESSION))


@dataclass(frozen=True)
class ShardReport:
    """One shard's report, read back into the values it was written from."""

    path: Path
    shard: int  # K of --shard K/N; 1 for a session run whole
    identity: dict[str, Any]  # the SAME_SESSION fields
    scenario: Scenario
    golden: GoldenRun
    outcomes: tuple[RunOutcome, ...]
    seconds: float


@dataclass(frozen=True)
class MergedSession:
    """The shards given, as one session: its runs, its crash-free run, and what keeps it from being whole."""

    reports: tuple[ShardReport, ...]  # by shard number
    scenario: Scenario
    golden: GoldenRun
    outcomes: tuple[RunOutcome, ...]
    summary: Summary

    @property
    def shards(self) -> int:
        return int(self.reports[0].identity["shards"])

    @property
    def missing(self) -> tuple[int, ...]:
        given = {report.shard for report in self.reports}
        return tuple(shard for shard in range(1, self.shards + 1) if shard not in given)

    def incomplete(self) -> list[str]:
        """Why the shards given do not make up the whole session; [] when they do."""
        gaps = []
        if self.missing:
            gaps.append(f"shard(s) {', '.join(map(str, self.missing))} of {self.shards} missing: their schedules "
                        f"were not judged; merge every shard's report (a missing one's CI job may have failed, "
                        f"timed out or been cancelled)")
        first = self.reports[0]
        for report in self.reports[1:]:
            if set(report.golden.points) != set(first.golden.points):
                gaps.append(f"{report.path} (shard {report.shard}): its crash-free run reached other crash points "
                            f"than {first.path}'s (shard {first.shard}): the workload is not deterministic, so "
                            f"the shards' schedules need not make up one set")
        return gaps

    def evidence_missing(self) -> list[Path]:
        """The directories of failing and unknown runs that are not here: the HTML report draws them empty."""
        return [outcome.run_dir for outcome in self.outcomes
                if not outcome.verdict.valid and not outcome.run_dir.is_dir()]

    def describe(self) -> str:
        """``demo: exhaustive to depth 1; 3 of 3 shards; backend forkserver``: what the header line says."""
        identity = self.reports[0].identity
        return (f"{self.scenario.name}: {identity['session']}; {len(self.reports)} of {self.shards} shard(s); "
                f"{identity['backend']}")


def merge_reports(paths: Sequence[Path]) -> MergedSession:
    """The session the reports at ``paths`` are shards of; ConfigError naming the file, field and fix otherwise."""
    reports = sorted((read_shard_report(path) for path in paths), key=lambda report: report.shard)
    problems = [problem for report in reports[1:] for problem in _differences(reports[0], report)]
    for earlier, later in pairwise(reports):
        if earlier.shard == later.shard and not problems:
            problems.append(f"{earlier.path} and {later.path} are both shard {later.shard} of "
                            f"{later.identity['shards']}: give each shard's report once")
    if not problems and reports[0].identity["seed"] is not None:
        problems += _indices_claimed_twice(reports)
    if problems:
        raise ConfigError(f"these {len(reports)} reports are not the shards of one session; nothing was merged",
                          tuple(problems))
    first = reports[0]
    outcomes = tuple(sorted((outcome for report in reports for outcome in report.outcomes),
                            key=lambda outcome: outcome.job.index))
    golden = GoldenRun(first.golden.run_dir, {}, {}, first.golden.points,
                       max(report.golden.seconds for report in reports))
    # The shards ran side by side: the session took as long as the longest of them.
    summary = summarise(golden, outcomes, max(report.seconds for report in reports))
    return MergedSession(tuple(reports), first.scenario, golden, outcomes, summary)


def _indices_claimed_twice(reports: list[ShardReport]) -> list[str]:
    """Each run index of a drawn session (random, timed: it has a seed) that two reports hold.

    Such a session numbers its runs 0..N-1 across all its shards, so an index is one run's. An exhaustive
    session is not checked so: each shard numbers its deeper levels on from the first level's end, alike, and
    its shards hold runs of the same index (a run is its index and its schedule, which one shard holds).
    """
    holder: dict[int, Path] = {}
    problems = []
    for report in reports:
        for outcome in report.outcomes:
            if (earlier := holder.setdefault(outcome.job.index, report.path)) != report.path:
                problems.append(f"{report.path}: run {outcome.job.index} is also in {earlier}: a session drawn from "
                                f"a seed numbers each of its runs once; merge the reports the shards wrote, unchanged")
    return problems


def _differences(first: ShardReport, other: ShardReport) -> list[str]:
    return [f"{other.path}: {field} is {_shown(other.identity[field])}, but {first.path}'s is "
            f"{_shown(first.identity[field])}; {fix}"
            for field, fix in SAME_SESSION if other.identity[field] != first.identity[field]]


def _shown(value: Any) -> str:
    return "none" if value is None else repr(value)


def write_merged_json(path: Path, merged: MergedSession) -> None:
    """The merged session as a JSON report; ``merged`` says which shards it holds, and it is never merged again."""
    identity = merged.reports[0].identity
    session = {key: identity[key] for key in ("session", "session_digest", "seed", "backend")}
    write_json_report(path, merged.scenario, merged.golden, list(merged.outcomes), merged.summary, {
        **session, "shard": None,
        "merged": {"shards": merged.shards, "given": [report.shard for report in merged.reports],
                   "missing": list(merged.missing), "reports": [str(report.path) for report in merged.reports]}})


def read_shard_report(path: Path) -> ShardReport:
    """A shard's JSON report; ConfigError naming the file and every problem if it is not one killpoint wrote."""
    data = _read_json(path)
    problems = _report_problems(data)
    if problems:
        raise ConfigError(f"{path}: not a killpoint report as `{WRITTEN_BY}` writes it",
                          tuple(_capped(problems)))
    scenario = Scenario(data["scenario"], tuple(data["workload"]), parse_plan(data["plan"], f"{path}: plan"),
                        _catalogue(data["catalogue"]), origin=data["origin"])
    problems = _digest_problems(data, scenario)
    outcomes = []
    shard, shards = data["shard"] or (1, 1)
    for position, entry in enumerate(data["runs"]):
        outcome, wrong = _outcome(entry, shard, shards)
        problems += [f"{_run_named(position, entry)}: {problem}" for problem in wrong]
        if outcome is not None:
            outcomes.append(outcome)
    problems += _repeated_indices(data["runs"])
    golden = GoldenRun(Path(data["golden"]["run_dir"]), {}, {}, tuple(data["golden"]["points"]),
                       data["golden"]["seconds"])
    if not problems:  # the runs read: what they add up to must be what the report says they do
        problems += _summary_problems(data["summary"], golden, outcomes)
    if problems:
        raise ConfigError(f"{path}: changed since killpoint wrote it, so its runs cannot be trusted; rerun the shard",
                          tuple(_capped(problems)))
    identity = {field: data[field] for field in SESSION_FIELDS if field in data}
    # The workload as given (None: the scenario file's own); the command run names this machine's python.
    identity.update(workload=data["origin"].get("workload"), shards=shards)
    return ShardReport(path, shard, identity, scenario, golden, tuple(outcomes), data["summary"]["seconds"])


def _read_json(path: Path) -> Any:
    raw = read_input(path, "a report", limit=REPORT_LIMIT_BYTES,
                     fix=f"give the JSON reports the shards wrote ({WRITTEN_BY})")
    try:
        return strict_json(raw)
    except ValueError as error:
        raise ConfigError(f"{path}: not JSON ({error}); give the JSON report a shard wrote ({WRITTEN_BY}), "
                          f"not its HTML report or its log") from None


def _report_problems(data: Any) -> list[str]:
    """What keeps ``data`` from being a shard's report: its kind first, then every field's type."""
    if not isinstance(data, dict):
        return [f"holds {type(data).__name__}, not a report (a JSON object)"]
    if "format" not in data:
        older = "runs" in data and "summary" in data
        return ["format: missing: " + ("written by a killpoint that predates `killpoint merge` (or without its "
                                       f"session); rerun the shard with this killpoint: {WRITTEN_BY}" if older
                                       else f"this is no killpoint report; give the file {WRITTEN_BY} wrote")]
    if data["format"] != REPORT_FORMAT:
        return [(f"format: {data['format']!r:.40}, but this killpoint reads {REPORT_FORMAT!r}: merge reports "
                 f"written by the killpoint version that merges them")]
    if "merged" in data:
        return ["merged: this report is already a merge of shards; merge the shards' own reports instead"]
    problems = field_problems(data, REPORT_TYPES, text_lists=("workload",), exact=False)
    if problems:
        return problems
    problems += [f"golden.{problem}" for problem in field_problems(data["golden"], GOLDEN_TYPES,
                                                                   text_lists=("points",), exact=False)]
    problems += [f"catalogue.{problem}" for problem in field_problems(
        data["catalogue"], CATALOGUE_TYPES, text_lists=("interactive",), text_tables=("tools",))]
    problems += seconds_problems({"golden.seconds": data["golden"].get("seconds"),
                                   "summary.seconds": data["summary"].get("seconds")})
    shard = data["shard"]
    if shard is not None and not (len(shard) == 2 and all(is_of(number, (int,)) for number in shard)
                                  and 1 <= shard[0] <= shard[1] <= MAX_SHARDS):
        problems.append(f"shard: {shard!r:.40} is not [K, N] with 1 <= K <= N <= {MAX_SHARDS}, as --shard K/N "
                        f"writes it")
    return problems


def _catalogue(data: dict[str, Any]) -> Catalogue:
    return Catalogue(dict(data["tools"]), data["default"], frozenset(data["interactive"]))


def _digest_problems(data: dict[str, Any], scenario: Scenario) -> list[str]:
    """The plan and catalogue the report holds must hash to the digests it names (tokens pin those)."""
    return [f"{field}: the report's {what} hashes to {actual}, not to its {field} {data[field]}"
            for field, what, actual in (("plan_digest", "plan", scenario.plan.digest),
                                        ("catalogue_digest", "catalogue", scenario.catalogue_digest))
            if data[field] != actual]


def _outcome(entry: Any, shard: int, shards: int) -> tuple[RunOutcome | None, list[str]]:
    """A run of the report as the ``RunOutcome`` it was written from (``RunOutcome.from_json``), or its problems."""
    try:
        outcome = RunOutcome.from_json(entry)
    except Undecodable as wrong:
        return None, list(wrong.problems)
    if shard_of(outcome.job, shards) != shard:
        schedule = ", ".join(map(str, outcome.job.schedule))
        return None, [f"schedule {schedule} is shard {shard_of(outcome.job, shards)}'s of {shards}, not this "
                      f"report's shard {shard}"]
    return outcome, []


def _run_named(position: int, entry: Any) -> str:
    """``runs[3] (run 17)``: where a run is in the report, and its own index when it has one."""
    index = entry.get("index") if isinstance(entry, dict) else None
    return f"runs[{position}]" + (f" (run {index})" if is_of(index, (int,)) else "")


def _repeated_indices(entries: list[Any]) -> list[str]:
    """Each index more than one run of the report has: a session numbers its runs once each."""
    positions: dict[int, list[int]] = defaultdict(list)
    for position, entry in enumerate(entries):
        if isinstance(entry, dict) and is_of(entry.get("index"), (int,)):
            positions[entry["index"]].append(position)
    return [f"run {index}: {len(where)} runs have this index (runs[{'], runs['.join(map(str, where[:3]))}]"
            f"{', ...' if len(where) > 3 else ''}); a session numbers each of its runs once"
            for index, where in positions.items() if len(where) > 1]


def _summary_problems(reported: dict[str, Any], golden: GoldenRun, outcomes: list[RunOutcome]) -> list[str]:
    """Each figure of the report's summary that its runs do not add up to (``summarise``, as killpoint wrote it)."""
    counted = json.loads(json.dumps(summarise(golden, outcomes, reported["seconds"]).to_json()))
    return [f"summary.{field}: " + (f"says {_shown(reported[field])[:60]}" if field in reported else "missing")
            + f", but its runs make it {_shown(value)[:60]}" for field, value in counted.items()
            if reported.get(field) != value or field not in reported]


def _capped(problems: list[str]) -> list[str]:
    return problems[:MAX_PROBLEMS] + ([f"... and {len(problems) - MAX_PROBLEMS} more"]
                                      if len(problems) > MAX_PROBLEMS else [])
