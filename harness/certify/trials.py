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

A tool that acts only on what another tool made (an observation added to an
entity) is refused on every fresh world. For such a tool, and only for it,
the search runs again from built states, as Hypothesis's stateful testing
reaches them (``StateBuilder``): each trial first draws 1 to ``MAX_SETUP``
calls of the server's creator tools, runs them on its fresh world, and draws
the tool's names from theirs; the observations name that setup.

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
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hypothesis import HealthCheck, Phase, Verbosity, given
from hypothesis import seed as hypothesis_seed
from hypothesis import settings
from hypothesis import strategies as st

from killpoint import protocol
from killpoint.errors import InternalError
from killpoint.harness.certify.adapters import Target, TrialError
from killpoint.harness.execute.leftovers import owner_prefix

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

REPLAY, KILL = "replay", "kill"
TEMPORARY_NAME = re.compile(r"[0-9a-f]{16,}")  # the random part of a temporary file's name (a.txt.<hex>.tmp)
Snapshot = dict[str, str]
Setup = tuple[dict[str, Any], ...]  # calls that build a state: {"tool", "args"}; once run, "ok" (and "error") too
MAX_SETUP = 3  # calls a setup draws at most: a short sequence, as Hypothesis's stateful tests shrink toward


class StateBuilder(Protocol):
    """A target whose tool may act only on what other tools of its server make (``mcp.McpTarget``)."""

    @property
    def creators(self) -> tuple[str, ...]: ...  # the tools a setup calls, the one a shrink goes toward first
    def arguments_for(self, tool: str, setup: Setup) -> SearchStrategy[dict[str, Any]]: ...  # naming what it made
    def build(self, world: Path, setup: Setup, scratch: Path) -> Setup: ...  # run on the world's server
    def restart(self, world: Path) -> None: ...  # the next call starts a server on what the world kept


@dataclass(frozen=True)
class Staged:
    """The setup one trial runs before the tool (``StateBuilder``)."""

    builder: StateBuilder
    setup: Setup

    def build(self, world: Path, folder: Path) -> Setup:
        return self.builder.build(world, self.setup, folder)


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
    setup: Setup | None = None        # the calls that built the state the tool acted on (``StateBuilder``)

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
    setup: dict[str, Any] | None = None  # why trials built states first, and with which tools (``setup_record``)


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


class _Found(InternalError):
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


def replay_trial(target: Target, args: dict[str, Any], folder: Path,
                 staged: Staged | None = None) -> tuple[Observation, dict[str, Snapshot], float]:
    """One call then its replay on a fresh world (after the setup, if staged): (observation, snapshots, seconds)."""
    world = target.fresh_world(folder)
    setup = staged.build(world, folder) if staged else None
    before = target.snapshot(world)
    first = target.call(world, args, folder)
    once = target.snapshot(world)
    target.call(world, args, folder)
    twice = target.snapshot(world)
    observation = Observation(REPLAY, args, first.ok, first.error, once != before, twice != once,
                              points=len(first.labels), setup=setup)
    return observation, {"before": before, "after one call": once, "after the replay": twice}, first.seconds


def restarted_call(target: Target, args: dict[str, Any], folder: Path, staged: Staged) -> Snapshot:
    """The world after the setup, a restart, and one call: what a kill and a replay must leave.

    A kill ends the server, and the replay runs on its restart, which sees only
    what the setup left in the world: kept in memory, it is gone. So the
    replay is held to one call made after a restart too, not to one made on
    the server that still holds the setup in memory (that would refute every
    tool of an in-memory store whose kill loses what its replay needs).
    """
    world = target.fresh_world(folder)
    staged.build(world, folder)
    staged.builder.restart(world)
    target.call(world, args, folder)
    return target.snapshot(world)


def kill_trial(target: Target, args: dict[str, Any], folder: Path, expected: Snapshot, *, at_point: int | None = None,
               after_ms: int | None = None, staged: Staged | None = None) -> tuple[Observation, dict[str, Snapshot]]:
    """The call SIGKILLed at a point (or after a delay) in a child, then replayed, on a fresh (set up) world."""
    world = target.fresh_world(folder)
    setup = staged.build(world, folder) if staged else None
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
        debris=tuple(TEMPORARY_NAME.sub("<hex>", key) for key in left_over) or None, setup=setup)
    return observation, {"before": before, "after the kill": at_kill, "after the replay": recovered,
                         "after one uninterrupted call": expected}


Plan = tuple[Staged | None, dict[str, Any]]  # a draw: the setup to run first (None: none, the plain search), the args


def search(target: Target, claim: str, *, interactive: bool, trials: int, seed: int, kill: bool = True,
           budget_s: float | None = None, builder: StateBuilder | None = None) -> SearchResult:
    """Run up to ``trials`` drawn examples of the claim's property; shrink the first failure.

    Where no call succeeded and ``builder`` has creator tools, search again from
    states they build (``staged_plans``). Only then: a tool that acts on a fresh
    world needs no setup, so its draws, evidence and certificate stay as they
    were, and each setup drawn is one the tool showed it needs (the result's
    ``setup`` says why). ``budget_s`` bounds the tool's time, both searches:
    past it, a draw not seen before runs no trial (a shrink still replays known
    ones), and the result says so.
    """
    # drawn before any scratch folder: a schema it cannot draw from leaves nothing behind
    plain = _search(target, claim, target.arguments().map(lambda args: (None, args)), interactive=interactive,
                    trials=trials, seed=seed, kill=kill, budget_s=budget_s)
    left = None if budget_s is None else budget_s - plain.seconds
    if builder is None or not builder.creators or not refused_all(plain) or (left is not None and left <= 0):
        return plain
    staged = _search(target, claim, staged_plans(builder, target.name), interactive=interactive, trials=trials,
                     seed=seed, kill=kill, budget_s=left, builder=builder)
    return replace(staged, seconds=plain.seconds + staged.seconds, setup=setup_record(builder, plain))


def refused_all(result: SearchResult) -> bool:
    """No call the search ran succeeded (each refused, or the trials could not go on): it ran, and acted on nothing."""
    return not result.skipped and not any(observation.ok for observation in result.observations
                                          if observation.kind == REPLAY)


def staged_plans(builder: StateBuilder, tool: str) -> SearchStrategy[Plan]:
    """1 to ``MAX_SETUP`` creator calls, each naming what the calls before it made, then ``tool``'s arguments.

    Not 0: no setup is the plain search, which already ran and acted on nothing.
    """
    @st.composite
    def plan(draw: Callable[[SearchStrategy[Any]], Any]) -> Plan:
        setup: list[dict[str, Any]] = []
        for _ in range(draw(st.integers(1, MAX_SETUP))):
            creator = draw(st.sampled_from(builder.creators))
            setup.append({"tool": creator, "args": draw(builder.arguments_for(creator, tuple(setup)))})
        return Staged(builder, tuple(setup)), draw(builder.arguments_for(tool, tuple(setup)))

    return plan()


def drawn(setup: Setup) -> Setup:
    """The setup as drawn, from the setup as run (which adds how each call ended)."""
    return tuple({"tool": step["tool"], "args": step["args"]} for step in setup)


def setup_record(builder: StateBuilder, plain: SearchResult) -> dict[str, Any]:
    """Why the trials built states first, and from which tools: the certificate's ``setup``."""
    replays = [observation for observation in plain.observations if observation.kind == REPLAY]
    first = plain.error or next((observation.error for observation in replays if observation.error), "no call ran")
    return {"creators": list(builder.creators), "max_calls": MAX_SETUP,
            "why": f"on a fresh world no call succeeded ({len(replays)} trial(s); first: {first}), so each trial "
                   f"first ran 1 to {MAX_SETUP} calls of the server's creator tools, drawn from their schemas, and "
                   f"drew the tool's names from what they were given; each observation names its setup"}


def _search(target: Target, claim: str, plans: SearchStrategy[Plan], *, interactive: bool, trials: int, seed: int,
            kill: bool, budget_s: float | None, builder: StateBuilder | None = None) -> SearchResult:
    """The search of one strategy of plans (staged ones from ``builder``): each draw a trial, a kill after it where
    ``wants_kill``."""
    started = time.monotonic()
    over_budget: list[bool] = []
    observations: list[Observation] = []
    found: list[Evidence] = []
    memo: dict[str, Any] = {}
    work = Path(tempfile.mkdtemp(prefix=owner_prefix("killpoint-certify-")))
    folders = (work / f"trial-{number}" for number in itertools.count())

    def once(key: str, run: Callable[[Path], Any], *, observed: bool = True) -> Any:
        """Run a trial the first time its draw comes; later (shrinking) return the same result."""
        if key not in memo:
            folder = next(folders)
            folder.mkdir()
            try:
                memo[key] = run(folder)
            finally:
                target.release()
                shutil.rmtree(folder, ignore_errors=True)
            if observed:
                observations.append(memo[key][0])
        return memo[key]

    def keyed(staged: Staged | None, args: dict[str, Any]) -> str:
        drawn_args = args if staged is None else {"setup": staged.setup, "args": args}
        return json.dumps(drawn_args, sort_keys=True, default=str)

    def expected_of(key: str, staged: Staged | None, args: dict[str, Any], snapshots: dict[str, Snapshot]) -> Snapshot:
        """One call's world, as a kill and its replay must leave it (after a setup: ``restarted_call``)."""
        if staged is None or not staged.setup:
            return snapshots["after one call"]
        return once(f"{key} restarted", lambda folder: restarted_call(target, args, folder, staged), observed=False)

    def judge(observation: Observation, snapshots: dict[str, Snapshot]) -> None:
        if breaks_promise(claim, interactive, observation):
            found.append(Evidence(observation, snapshots))
            raise _Found(observation.kind)

    def attempt(data: st.DataObject) -> None:
        staged, args = data.draw(plans, label="args")
        key = keyed(staged, args)
        if budget_s is not None and key not in memo and time.monotonic() - started > budget_s:
            over_budget.append(True)
            return
        try:
            observation, snapshots, seconds = once(key, lambda folder: replay_trial(target, args, folder, staged))
            judge(observation, snapshots)
            if not (kill and wants_kill(claim, interactive, observation)):
                return
            expected = expected_of(key, staged, args, snapshots)
            timed = not observation.points or (
                target.timed_kills and data.draw(st.booleans(), label="kill after a delay, not at a point"))
            if not timed:
                point = data.draw(st.integers(1, observation.points), label="kill at point")
                evidence = once(f"{key} @{point}", lambda folder: kill_trial(
                    target, args, folder, expected, at_point=point, staged=staged))
            else:  # a command that declares no points, or a server: a seeded delay within one call's duration
                delay = data.draw(st.integers(0, max(1, math.ceil(seconds * 1000))), label="kill after ms")
                evidence = once(f"{key} +{delay}ms", lambda folder: kill_trial(
                    target, args, folder, expected, after_ms=delay, staged=staged))
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
        staged = None if builder is None else Staged(builder, drawn(broken.setup or ()))
        for args in target.smaller(broken.args):
            key = keyed(staged, args)
            try:
                replay = once(key, lambda folder: replay_trial(target, args, folder, staged))
                candidate = Evidence(*replay[:2])
                if broken.kind == KILL:
                    expected = expected_of(key, staged, args, replay[1])
                    candidate = Evidence(*once(f"{key} @{broken.kill_at} +{broken.kill_after_ms}ms",
                                               lambda folder: kill_trial(target, args, folder, expected,
                                                                         at_point=broken.kill_at,
                                                                         after_ms=broken.kill_after_ms, staged=staged)))
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
