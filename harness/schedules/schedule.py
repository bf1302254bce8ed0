"""Schedules: when to SIGKILL each incarnation, and what faults to add. Pure data and functions.

A ``Schedule`` (``model.Schedule``) is a tuple of ``model.Kill``: the first is
used in incarnation 0, the second in incarnation 1 (the first recovery), and so
on; incarnations after the last kill run freely. A kill is one of:

- ``AtPoint``: a crash point, ``c3:after_effect`` or ``after_decisions`` (rendezvous);
- ``AfterPoint``: the first crash point after one, ``c3:after_started+`` (how a timed kill is pinned);
- ``AfterDelay``: ``@0.0342`` seconds after the incarnation's work began: its first crash point or
  journal/ledger write (no rendezvous needed; ``rendezvous.work_began``); or ``c3:after_started@0.0012``,
  that long after the incarnation first reached a crash point (how ``--timed`` draws them: ``explore.timed_delay``);
- ``OnEvent``: an event seen in the evidence files, ``ledger:effect:c3`` or ``journal:started:c5``;

and carries a fault: a plain kill, ``/torn:N`` (``TornTail``): after the
kill, cut the journal's last record, keeping N per mille of its bytes, as a
write cut mid-way would; or ``/power`` (``PowerLoss``): after the kill, lose
every write the runtime never made durable. A crash-point kill may be ``/now`` (``non_pausing``):
the workload is told to kill itself at the point instead of being left waiting
there. Nothing here touches a process: the same plan and seed always give the
same schedules.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from killpoint import protocol
from killpoint.errors import ConfigError
from killpoint.harness.config.limits import LIMITS
from killpoint.harness.model import (CALL_SEPARATOR, POWER_VARIANTS, RENDEZVOUS_KILLS, AfterDelay, AfterPoint, AtPoint,
                                     Fault, Kill, KillSyntaxError, OnEvent, PlainKill, Plan, PowerLoss, Schedule,
                                     TornTail, parse_kill)

# Points reached right after a journal write: the only ones where a torn last
# record is a realistic crash (the write itself was cut). Anywhere else the
# last record was durable long before the kill.
TEARABLE_POINTS = (protocol.AFTER_STARTED, protocol.AFTER_FINISHED, protocol.AFTER_DECISIONS, protocol.AFTER_VERIFY)


def planned_kill(text: str, plan: Plan) -> Kill:
    """The kill ``text`` spells (``model.parse_kill``) if its call is one the plan makes; KillSyntaxError if not."""
    kill = parse_kill(text)
    call = (kill.call if isinstance(kill, AtPoint | AfterPoint | OnEvent)
            else parse_point_reached(kill.after).call if kill.after is not None else None)
    if call is not None and call not in plan.call_ids:
        raise KillSyntaxError(kill.trigger, f"the plan has no call {call!r}; its calls are {', '.join(plan.call_ids)}")
    return kill


def parse_kill_point(text: str, plan: Plan) -> Kill:
    """A kill given on the command line (or in a token), checked against the plan: ConfigError naming the flag."""
    try:
        kill = planned_kill(text, plan)
    except KillSyntaxError as error:
        raise ConfigError(str(error)) from None
    if isinstance(kill, AfterDelay) and kill.seconds > LIMITS["timeout"].high:
        # No incarnation outlives the longest timeout, so a later kill would never come.
        raise ConfigError(f"--kill-at {text!r}: a timed kill comes within an incarnation's time, at most "
                          f"{LIMITS['timeout'].high} s; give @SECONDS from 0 to {LIMITS['timeout'].high}")
    return kill


def point_reached(point: str, call: str | None) -> str:
    """A crash point as the runner records it: "c3:after_effect", or "after_decisions" for one of no call."""
    return point if call is None else f"{call}{CALL_SEPARATOR}{point}"


def parse_point_reached(reached: str) -> AtPoint:
    """A crash point as the runner records it ("c3:after_effect", "after_decisions"), as a kill at it.

    Lenient on purpose: the points are what the workload announced, which the
    runner records whatever they are.
    """
    call, _, point = reached.rpartition(CALL_SEPARATOR)
    return AtPoint(point, call or None)


def format_schedule(schedule: Schedule) -> str:
    return " then ".join(map(str, schedule)) if schedule else "no kill"


def children(schedule: Schedule, points_reached: tuple[str, ...]) -> list[Schedule]:
    """Depth k+1 from depth k: one more kill at each distinct point the next incarnation reached."""
    return [schedule + (parse_point_reached(point),) for point in dict.fromkeys(points_reached)]


def torn_variants(schedules: list[Schedule], permille: int = 500, *, anywhere: bool = False) -> list[Schedule]:
    """For each schedule whose last kill follows a journal write (``anywhere``: any crash point), the same kill
    with a torn tail.

    A torn tail cuts the journal's last record, which only a kill right after a
    journal write can find half-written; a torn power loss tears whatever was
    not yet synced, which may be anything anywhere (a framework's database
    page), so under ``--power-loss`` every kill is torn too.
    """
    return [schedule[:-1] + (replace(last, fault=TornTail(permille)),)
            for schedule in schedules
            if isinstance(last := schedule[-1], AtPoint) and (anywhere or last.point in TEARABLE_POINTS)]


def power_lost(schedule: Schedule) -> Schedule:
    """The same schedule with every kill a power loss (``--power-loss``).

    A kill that tears the journal's tail (``/torn:N``, from ``--torn-tail``)
    becomes a torn power loss instead, seeded with N: torn-op for N odd,
    torn-seq for N even (``--exhaustive`` tears each kill twice, 499 and 500,
    so it runs both). A power loss already chosen is kept as it is.
    """
    return tuple(kill if isinstance(kill.fault, PowerLoss) else replace(kill, fault=_power_loss_for(kill.fault))
                 for kill in schedule)


def has_power_loss(schedule: Schedule) -> bool:
    """Whether a kill of ``schedule`` is a power loss: its run needs the lazy file system then."""
    return any(isinstance(kill.fault, PowerLoss) for kill in schedule)


def _power_loss_for(fault: Fault) -> PowerLoss:
    if isinstance(fault, TornTail):
        return PowerLoss(POWER_VARIANTS[(fault.permille + 1) % 2], fault.permille)
    return PowerLoss()


POWER_TORN_PERMILLES = (499, 500)  # the tears --exhaustive --torn-tail --power-loss makes: torn-op, then torn-seq


def non_pausing(schedule: Schedule) -> Schedule:
    """The same schedule with every crash-point kill made ``/now``; timed and event kills never pause anyway."""
    return tuple(replace(kill, now=True) if isinstance(kill, RENDEZVOUS_KILLS) else kill for kill in schedule)


@dataclass(frozen=True)
class EveryKill:
    """What a session's flags make of every kill: ``/now`` (``--no-pause``), ``/power`` (``--power-loss``)."""

    no_pause: bool = False
    power_loss: bool = False

    def apply(self, schedule: Schedule) -> Schedule:
        schedule = non_pausing(schedule) if self.no_pause else schedule
        return power_lost(schedule) if self.power_loss else schedule

    def __str__(self) -> str:
        """``, no pause, power loss``: what a session's description adds; empty when neither."""
        return "".join(text for text, chosen in ((", no pause", self.no_pause), (", power loss", self.power_loss))
                       if chosen)


def derived_seed(seed: int, index: int) -> int:
    """The seed of run ``index`` of a random session: stable, and distinct per run."""
    return random.Random(f"killpoint:{seed}:{index}").getrandbits(48)


@dataclass(frozen=True)
class RandomFaults:
    """Which faults random mode mixes in, and how often."""

    max_kills: int = 2
    torn_rate: float = 0.0
    timed_rate: float = 0.0
    timed_window_s: tuple[float, float] | None = None  # timed kills' delays; None: the golden run's working period
    tear_anywhere: bool = False  # tear kills at any crash point, not only after a journal write (torn power losses)


class Draw(Protocol):
    """The choices a random schedule is made of; a seeded ``random.Random`` or Hypothesis makes them."""

    def count(self, low: int, high: int) -> int:
        """How many kills, ``low`` to ``high``."""

    def delay(self) -> float | None:
        """Seconds of a timed kill, or None for a kill at a crash point."""

    def choice(self, options: Sequence[str]) -> str:
        """One of ``options``."""

    def torn(self) -> int | None:
        """Per mille of the last record a kill after a journal write keeps, or None for no tear."""


def draw_schedule(plan: Plan, draw: Draw, max_kills: int, *, tear_anywhere: bool = False,
                  points: tuple[str, ...] = protocol.CALL_POINTS) -> Schedule:
    """The one random schedule generator: 1..max_kills kills at a call's ``points``; later ones may hit
    recovery points (those of a protocol runtime: a workload of another kind reaches none).

    Random mode draws with ``SeededDraw`` (``random_schedule``); ``killpoint hunt``
    with Hypothesis, which can then shrink the schedule.
    """
    recovery = protocol.RECOVERY_POINTS if points == protocol.CALL_POINTS else ()
    kills: list[Kill] = []
    for incarnation in range(draw.count(1, max_kills)):
        delay = draw.delay()
        if delay is not None:
            kills.append(AfterDelay(delay))
            continue
        point = draw.choice(points + (recovery if incarnation else ()))
        call = None if point == protocol.AFTER_DECISIONS else draw.choice(plan.call_ids)
        torn = draw.torn() if tear_anywhere or point in TEARABLE_POINTS else None
        fault: Fault = PlainKill() if torn is None else TornTail(torn)
        kills.append(AtPoint(point, call, fault))
    return tuple(kills)


@dataclass(frozen=True)
class SeededDraw:
    """Random mode's choices, from one run's seed and the faults it mixes in (``timed_window_s`` resolved)."""

    rng: random.Random
    faults: RandomFaults

    def count(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def delay(self) -> float | None:
        if self.rng.random() >= self.faults.timed_rate:
            return None
        return round(self.rng.uniform(*(self.faults.timed_window_s or (0.0, 0.0))), 4)

    def choice(self, options: Sequence[str]) -> str:
        return self.rng.choice(options)

    def torn(self) -> int | None:
        return self.rng.randint(1, 999) if self.rng.random() < self.faults.torn_rate else None


def random_schedule(plan: Plan, run_seed: int, faults: RandomFaults = RandomFaults(),
                    points: tuple[str, ...] = protocol.CALL_POINTS) -> Schedule:
    """Draw one schedule from ``run_seed``: the same seed, faults and points always draw the same schedule."""
    return draw_schedule(plan, SeededDraw(random.Random(run_seed), faults), faults.max_kills,
                         tear_anywhere=faults.tear_anywhere, points=points)


def call_points_of(golden_points: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The points a call reaches, as a random schedule draws them: a protocol runtime's (``CALL_POINTS``, so a
    seed draws what it always drew), else those the crash-free run reached (a framework's steps, an agent's
    seams), in the order it first reached them; a kill at a point of another kind would never land."""
    reached = tuple(dict.fromkeys(kill.point for kill in map(parse_point_reached, golden_points) if kill.call))
    return protocol.CALL_POINTS if set(reached) <= set(protocol.CALL_POINTS) else reached
