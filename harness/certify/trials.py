"""Trials on fresh worlds, and the Hypothesis search that finds (and shrinks) the one that breaks a claim.

Two kinds of trial, each on a fresh world:

- replay: one call, then the same call again; snapshots before, after one, after both.
- kill: the call runs in a child that is SIGKILLed at a seeded kill point (see
  ``points``), then the call is replayed; the world must equal the world of one
  uninterrupted call. Run only where a replay looked harmless and the world
  changed (a read leaves nothing half-done; a replay that already differs
  needs no kill to be caught). What the replay left beyond one call is split
  (``debris``): entries the kill left, untouched by the replay, whose removal
  leaves exactly one call's world, are debris, a crash-safety finding reported
  apart; they count against the class only when the replay failed. Anything else
  (a file changed, missing, or new and not the kill's) is a repeated effect.

Hypothesis draws the arguments (and the kill point), runs the property
"this trial keeps the claim's promise", and shrinks a failure: the last failing
example it runs is the minimal one, and that is the counterexample. Trials are
memoised by their draw, so a shrink replays a known result instead of a new,
possibly different one (a time-stamping tool would otherwise look flaky).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from killpoint import protocol
from killpoint.harness.certify.adapters import Target, TrialError
from killpoint.harness.leftovers import owner_prefix

REPLAY, KILL = "replay", "kill"
TEMPORARY_NAME = re.compile(r"[0-9a-f]{16,}")  # the random part of a temporary file's name (a.txt.<hex>.tmp)
Snapshot = dict[str, str]


@dataclass(frozen=True)
class Observation:
    """What one trial showed; plain data, so its JSON is the evidence a certificate digests."""

    kind: str                         # REPLAY or KILL
    args: dict[str, Any]
    ok: bool                          # the (first, or replaying) call succeeded
    error: str | None
    changed: bool                     # replay: one call changed the world; kill: the killed call had
    differs: bool                     # replay: the replay changed it again; kill: it did not end as one call
    points: int = 0                   # kill points the call passed (uninterrupted) or reached (killed)
    kill_at: int | None = None        # the point where the SIGKILL landed
    kill_label: str | None = None     # what the tool was about to do there
    kill_after_ms: int | None = None  # a timed kill (a command that declares no points, an MCP server)
    killed: bool = True               # False: the call ended before the kill came
    left: str | None = None           # kill: what the kill left, against never and once (``kill_left``)
    debris: tuple[str, ...] | None = None  # kill: what the kill left that the replay did not remove (``debris``)

    def to_json(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass(frozen=True)
class Evidence:
    """A trial with its snapshots, in the order they were taken (the counterexample or the witness)."""

    observation: Observation
    snapshots: dict[str, Snapshot]


@dataclass(frozen=True)
class SearchResult:
    observations: tuple[Observation, ...]
    found: Evidence | None   # the shrunk trial that broke the searched property
    error: str | None        # why the trials could not go on (or, ``skipped``, why none ran)
    seconds: float
    skipped: bool = False    # not run on purpose (an MCP tool that may reach the network)
    out_of_budget: bool = False  # the per-tool budget ended the draws before ``trials`` of them
    unseen: str = ""         # where the tool can keep an effect no snapshot shows (``Target.unseen``)


def kill_left(before: Snapshot, at_kill: Snapshot, once: Snapshot) -> str:
    """What a kill left in the world: ``never`` (as before the call), ``once`` (as one whole call), or what differs.

    The rest is "torn": each key that is neither as before nor as after one call,
    ``+`` extra, ``-`` missing, ``~`` changed (a stray temp file, a partial write,
    a lock left behind).
    """
    if at_kill == before:
        return "never"
    if at_kill == once:
        return "once"
    keys = sorted(key for key in at_kill.keys() | once.keys() | before.keys()
                  if at_kill.get(key) != once.get(key) and at_kill.get(key) != before.get(key))
    marks = [("+" if key not in once else "-" if key not in at_kill else "~") + key for key in keys]
    return "torn: " + TEMPORARY_NAME.sub("<hex>", " ".join(marks))


def debris(at_kill: Snapshot, recovered: Snapshot, expected: Snapshot) -> tuple[str, ...]:
    """The entries that are all that keeps the replayed world from one call's: debris of the kill, or ``()``.

    An entry is debris when one uninterrupted call's world has no such entry,
    the kill left it and the replay left it exactly as the kill did; and only
    when removing every such entry makes the replayed world equal to one call's.
    A name is no criterion: a temporary file the replay rewrote, a file changed
    or missing, or one the replay made, is a difference, not debris.
    """
    extra = sorted(key for key in recovered if key not in expected)
    if not extra or any(at_kill.get(key) != recovered[key] for key in extra):
        return ()
    rest = {key: value for key, value in recovered.items() if key in expected}
    return tuple(extra) if rest == expected else ()


class _Found(Exception):
    """The property failed; Hypothesis shrinks, and the last one raised is the minimal example."""


class _Abort(BaseException):
    """Not an ``Exception``: Hypothesis lets it through at once instead of shrinking a broken harness."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def breaks_promise(claim: str, interactive: bool, observation: Observation) -> bool:
    """Does this trial break what ``claim`` promises (for NON_IDEMPOTENT/UNKNOWN: "a replay is harmless")?"""
    if claim == protocol.READ_ONLY and not interactive:
        return observation.changed or observation.differs
    return observation.differs


def wants_kill(claim: str, interactive: bool, observation: Observation) -> bool:
    """Kill part-way where a replay looked harmless and the world changed: only there can a torn call hide."""
    return (not interactive and claim != protocol.READ_ONLY and observation.kind == REPLAY
            and observation.changed and not observation.differs)


def replay_trial(target: Target, args: dict[str, Any], folder: Path) -> tuple[Observation, dict[str, Snapshot], float]:
    """One call then its replay on a fresh world: (observation, snapshots, seconds the first call took)."""
    world = target.fresh_world(folder)
    before = target.snapshot(world)
    first = target.call(world, args, folder)
    once = target.snapshot(world)
    target.call(world, args, folder)
    twice = target.snapshot(world)
    observation = Observation(REPLAY, args, first.ok, first.error, once != before, twice != once,
                              points=len(first.labels))
    return observation, {"before": before, "after one call": once, "after the replay": twice}, first.seconds


def kill_trial(target: Target, args: dict[str, Any], folder: Path, expected: Snapshot, *,
               at_point: int | None = None, after_ms: int | None = None) -> tuple[Observation, dict[str, Snapshot]]:
    """The call SIGKILLed at a point (or after a delay) in a child, then replayed, on a fresh world."""
    world = target.fresh_world(folder)
    before = target.snapshot(world)
    run = target.kill(world, args, folder, at_point=at_point, after_s=None if after_ms is None else after_ms / 1000)
    if run.timed_out:
        raise TrialError(f"{target.name}: the call to be killed hung (no point, no exit)")
    at_kill = target.snapshot(world)
    replay = target.call(world, args, folder)
    recovered = target.snapshot(world)
    killed = run.killed_at is not None or run.killed_after_s is not None
    left_over = debris(at_kill, recovered, expected)
    # Debris is no repeated effect: it counts only when the replay failed (on a lock the kill left, say).
    differs = recovered != expected and not (left_over and replay.ok)
    observation = Observation(
        KILL, args, replay.ok, replay.error, at_kill != before, differs, points=len(run.labels),
        kill_at=run.killed_at, kill_after_ms=after_ms, killed=killed, left=kill_left(before, at_kill, expected),
        kill_label=TEMPORARY_NAME.sub("<hex>", run.labels[-1]) if run.killed_at else None,
        debris=tuple(TEMPORARY_NAME.sub("<hex>", key) for key in left_over) or None)
    return observation, {"before": before, "after the kill": at_kill, "after the replay": recovered,
                         "after one uninterrupted call": expected}


def search(target: Target, claim: str, *, interactive: bool, trials: int, seed: int,
           kill: bool = True, budget_s: float | None = None) -> SearchResult:
    """Run up to ``trials`` drawn examples of the claim's property; shrink the first failure.

    ``budget_s`` bounds the tool's time: past it, a draw not seen before runs no
    trial (a shrink still replays known ones), and the result says so.
    """
    started = time.monotonic()
    over_budget: list[bool] = []
    observations: list[Observation] = []
    found: list[Evidence] = []
    memo: dict[str, Any] = {}
    strategy = target.arguments()  # before the scratch folder: a schema it cannot draw from leaves nothing behind
    work = Path(tempfile.mkdtemp(prefix=owner_prefix("killpoint-certify-")))
    folders = (work / f"trial-{number}" for number in itertools.count())

    def once(key: str, run: Callable[[Path], Any]) -> Any:
        """Run a trial the first time its draw comes; later (shrinking) return the same result."""
        if key not in memo:
            folder = next(folders)
            folder.mkdir()
            try:
                memo[key] = run(folder)
            finally:
                target.release()
                shutil.rmtree(folder, ignore_errors=True)
            observations.append(memo[key][0])
        return memo[key]

    def judge(observation: Observation, snapshots: dict[str, Snapshot]) -> None:
        if breaks_promise(claim, interactive, observation):
            found.append(Evidence(observation, snapshots))
            raise _Found(observation.kind)

    def attempt(data: st.DataObject) -> None:
        args = data.draw(strategy, label="args")
        key = json.dumps(args, sort_keys=True, default=str)
        if budget_s is not None and key not in memo and time.monotonic() - started > budget_s:
            over_budget.append(True)
            return
        try:
            observation, snapshots, seconds = once(key, lambda folder: replay_trial(target, args, folder))
            judge(observation, snapshots)
            if not (kill and wants_kill(claim, interactive, observation)):
                return
            expected = snapshots["after one call"]
            timed = not observation.points or (
                target.timed_kills and data.draw(st.booleans(), label="kill after a delay, not at a point"))
            if not timed:
                point = data.draw(st.integers(1, observation.points), label="kill at point")
                evidence = once(f"{key} @{point}", lambda folder: kill_trial(
                    target, args, folder, expected, at_point=point))
            else:  # a command that declares no points, or a server: a seeded delay within one call's duration
                delay = data.draw(st.integers(0, max(1, math.ceil(seconds * 1000))), label="kill after ms")
                evidence = once(f"{key} +{delay}ms", lambda folder: kill_trial(
                    target, args, folder, expected, after_ms=delay))
            judge(*evidence)
        except (_Found, _Abort):
            raise
        except TrialError as error:
            raise _Abort(str(error)) from None
        except Exception as error:  # a harness bug must not crash a whole catalogue: this tool is INCONCLUSIVE
            raise _Abort(f"{type(error).__name__}: {error}") from None

    run = hypothesis_seed(seed)(settings(
        max_examples=trials, deadline=None, database=None, derandomize=False, print_blob=False,
        suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink],
        verbosity=Verbosity.quiet, report_multiple_bugs=False,
    )(given(st.data())(attempt)))
    def smallest(evidence: Evidence) -> Evidence:
        """The shrunk example, or a simpler variant the target offers (``Target.smaller``) that fails the same way.

        Hypothesis shrinks toward what is drawn first, and an MCP tool draws a
        4 MiB write first (a small one is done before a kill lands); when the
        same check fails with a short text, that is the counterexample to read.
        """
        broken = evidence.observation
        for args in target.smaller(broken.args):
            key = json.dumps(args, sort_keys=True, default=str)
            try:
                replay = once(key, lambda folder: replay_trial(target, args, folder))
                candidate = Evidence(*replay[:2])
                if broken.kind == KILL:
                    expected = replay[1]["after one call"]
                    candidate = Evidence(*once(f"{key} @{broken.kill_at} +{broken.kill_after_ms}ms",
                                               lambda folder: kill_trial(target, args, folder, expected,
                                                                         at_point=broken.kill_at,
                                                                         after_ms=broken.kill_after_ms)))
            except TrialError:
                continue
            if candidate.observation.kind == broken.kind and breaks_promise(claim, interactive, candidate.observation):
                return candidate
        return evidence

    error = None
    try:
        run()
    except _Found:
        if found:
            found.append(smallest(found[-1]))
    except _Abort as abort:
        error = abort.message
    except Exception as unexpected:  # Hypothesis itself gave up (flaky, unsatisfiable): say so, judge nothing
        error = f"{type(unexpected).__name__}: {unexpected}"
    finally:
        target.close()
        shutil.rmtree(work, ignore_errors=True)
    return SearchResult(tuple(observations), found[-1] if found and error is None else None, error,
                        time.monotonic() - started, out_of_budget=bool(over_budget), unseen=target.unseen)
