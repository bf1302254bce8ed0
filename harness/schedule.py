"""Schedules: when to SIGKILL each incarnation, and what faults to add. Pure data and functions.

A ``Schedule`` is a tuple of ``KillPoint``: the first is used in incarnation 0,
the second in incarnation 1 (the first recovery), and so on; incarnations after
the last kill run freely. A kill is triggered by one of:

- a crash point, ``c3:after_effect`` or ``after_decisions`` (rendezvous);
- the first crash point after one, ``c3:after_started+`` (how a timed kill is pinned);
- a delay, ``@0.0342`` seconds after the incarnation started (no rendezvous needed);
- an event seen in the evidence files, ``ledger:effect:c3`` or ``journal:started:c5``;

and may add ``/torn:N``: after the kill, cut the journal's last record, keeping
N per mille of its bytes, as a write cut mid-way would. Nothing here touches a
process: the same plan and seed always give the same schedules.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from killpoint import protocol
from killpoint.errors import ConfigError
from killpoint.harness.model import Plan

# Points reached right after a journal write: the only ones where a torn last
# record is a realistic crash (the write itself was cut). Anywhere else the
# last record was durable long before the kill.
TEARABLE_POINTS = ("after_started", "after_finished", protocol.AFTER_DECISIONS, protocol.AFTER_VERIFY)
EVENT_SOURCES = {"ledger": ("invoked", "effect", "probe"),
                 "journal": (protocol.STARTED, protocol.FINISHED, protocol.DECISION, protocol.VERIFIED)}
_TORN = re.compile(r"^(?P<trigger>.+?)/torn:(?P<permille>\d+)$")


@dataclass(frozen=True)
class KillPoint:
    point: str | None = None
    call: str | None = None
    after: bool = False  # kill at the first crash point after (point, call)
    after_s: float | None = None  # timed kill
    event: str | None = None  # "ledger:effect:c3"
    torn: int | None = None  # per mille of the last journal record kept after the kill

    def __str__(self) -> str:
        if self.after_s is not None:
            trigger = f"@{self.after_s:.4f}"
        elif self.event is not None:
            trigger = self.event
        else:
            trigger = (self.point if self.call is None else f"{self.call}:{self.point}") + ("+" if self.after else "")
        return trigger + (f"/torn:{self.torn}" if self.torn is not None else "")

    @property
    def uses_rendezvous(self) -> bool:
        return self.point is not None

    def matches(self, point: str, call: str | None) -> bool:
        return point == self.point and (self.call is None or call == self.call)


Schedule = tuple[KillPoint, ...]


def format_schedule(schedule: Schedule) -> str:
    return " then ".join(map(str, schedule)) if schedule else "no kill"


def parse_kill_point(text: str, plan: Plan) -> KillPoint:
    """Parse one kill (see the module docstring), checked against the plan."""
    torn = None
    match = _TORN.match(text)
    if match:
        torn = int(match["permille"])
        if not 0 < torn < 1000:
            raise ConfigError(f"--kill-at {text!r}: torn:N keeps N per mille of the last record; use 1..999")
        text = match["trigger"]
    return replace(_parse_trigger(text, plan), torn=torn)


def _parse_trigger(text: str, plan: Plan) -> KillPoint:
    if text.startswith("@"):
        try:
            seconds = float(text[1:])
        except ValueError:
            seconds = -1.0
        if not (math.isfinite(seconds) and seconds >= 0):
            raise ConfigError(f"--kill-at {text!r}: a timed kill is @SECONDS, a finite number >= 0, e.g. @0.05")
        return KillPoint(after_s=seconds)
    source = text.split(":", 1)[0]
    if source in EVENT_SOURCES:
        return parse_event(text, plan)
    after = text.endswith("+")
    call, _, point = text.removesuffix("+").rpartition(":")
    points = ", ".join(protocol.ALL_POINTS)
    if point not in protocol.ALL_POINTS:
        raise ConfigError(f"--kill-at {text!r}: unknown point {point!r}; points are {points} "
                          f"(or @SECONDS, or ledger:KIND:CALL / journal:KIND:CALL)")
    if not call:
        if point != protocol.AFTER_DECISIONS:
            raise ConfigError(f"--kill-at {text!r}: {point} happens per call; write CALL:{point}, e.g. c1:{point}")
        return KillPoint(point, after=after)
    _check_call(text, call, plan)
    return KillPoint(point, call, after=after)


def parse_event(text: str, plan: Plan) -> KillPoint:
    """``ledger:KIND:CALL`` or ``journal:KIND:CALL``: kill once that record appears."""
    parts = text.split(":")
    if len(parts) != 3 or parts[0] not in EVENT_SOURCES or parts[1] not in EVENT_SOURCES[parts[0]]:
        kinds = "; ".join(f"{source}: {', '.join(kinds)}" for source, kinds in EVENT_SOURCES.items())
        raise ConfigError(f"--kill-on {text!r}: write SOURCE:KIND:CALL, e.g. ledger:effect:c3 ({kinds})")
    _check_call(text, parts[2], plan)
    return KillPoint(event=text)


def _check_call(text: str, call: str, plan: Plan) -> None:
    if call not in plan.call_ids:
        raise ConfigError(f"--kill-at {text!r}: the plan has no call {call!r}; its calls are {', '.join(plan.call_ids)}")


def parse_point_reached(reached: str) -> KillPoint:
    """A crash point as the runner records it ("c3:after_effect", "after_decisions")."""
    call, _, point = reached.rpartition(":")
    return KillPoint(point, call or None)


def children(schedule: Schedule, points_reached: tuple[str, ...]) -> list[Schedule]:
    """Depth k+1 from depth k: one more kill at each distinct point the next incarnation reached."""
    return [schedule + (parse_point_reached(point),) for point in dict.fromkeys(points_reached)]


def torn_variants(schedules: list[Schedule], permille: int = 500) -> list[Schedule]:
    """For each schedule whose last kill follows a journal write, the same kill with a torn tail."""
    return [schedule[:-1] + (replace(schedule[-1], torn=permille),)
            for schedule in schedules if schedule[-1].point in TEARABLE_POINTS and not schedule[-1].after]


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


def draw_schedule(plan: Plan, draw: Draw, max_kills: int) -> Schedule:
    """The one random schedule generator: 1..max_kills kills; later ones may hit recovery points.

    Random mode draws with ``SeededDraw`` (``random_schedule``); ``killpoint hunt``
    with Hypothesis, which can then shrink the schedule.
    """
    kills = []
    for incarnation in range(draw.count(1, max_kills)):
        delay = draw.delay()
        if delay is not None:
            kills.append(KillPoint(after_s=delay))
            continue
        point = draw.choice(protocol.CALL_POINTS + (protocol.RECOVERY_POINTS if incarnation else ()))
        call = None if point == protocol.AFTER_DECISIONS else draw.choice(plan.call_ids)
        torn = draw.torn() if point in TEARABLE_POINTS else None
        kills.append(KillPoint(point, call, torn=torn))
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


def random_schedule(plan: Plan, run_seed: int, faults: RandomFaults = RandomFaults()) -> Schedule:
    """Draw one schedule from ``run_seed``: the same seed and faults always draw the same schedule."""
    return draw_schedule(plan, SeededDraw(random.Random(run_seed), faults), faults.max_kills)
