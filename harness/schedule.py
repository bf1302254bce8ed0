"""Schedules: which crash point to SIGKILL in each incarnation. Pure data and functions.

A ``Schedule`` is a tuple of ``KillPoint``: the first is hit in incarnation 0,
the second in incarnation 1 (the first recovery), and so on; incarnations after
the last kill run freely. Nothing here touches a process: the same plan and
seed always give the same schedules.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from harness import protocol
from harness.errors import ConfigError
from harness.scenario import Plan


@dataclass(frozen=True, order=True)
class KillPoint:
    """A crash point: ``c3:after_effect``, or ``after_decisions`` (which names no call)."""

    point: str
    call: str | None = None

    def __str__(self) -> str:
        return self.point if self.call is None else f"{self.call}:{self.point}"

    def matches(self, point: str, call: str | None) -> bool:
        return point == self.point and (self.call is None or call == self.call)


Schedule = tuple[KillPoint, ...]


def format_schedule(schedule: Schedule) -> str:
    return " then ".join(map(str, schedule)) if schedule else "no kill"


def parse_kill_point(text: str, plan: Plan) -> KillPoint:
    """Parse ``CALL:POINT`` (or a recovery point alone), checked against the plan."""
    call, _, point = text.rpartition(":")
    points = ", ".join(protocol.ALL_POINTS)
    if point not in protocol.ALL_POINTS:
        raise ConfigError(f"--kill-at {text!r}: unknown point {point!r}; points are {points}")
    if not call:
        if point != protocol.AFTER_DECISIONS:
            raise ConfigError(f"--kill-at {text!r}: {point} happens per call; write CALL:{point}, e.g. c1:{point}")
        return KillPoint(point)
    if call not in plan.call_ids:
        raise ConfigError(f"--kill-at {text!r}: the plan has no call {call!r}; its calls are {', '.join(plan.call_ids)}")
    return KillPoint(point, call)


def exhaustive(plan: Plan) -> Iterator[Schedule]:
    """Every single-kill schedule: every planned call at every call point, in plan order."""
    for call in plan.call_ids:
        for point in protocol.CALL_POINTS:
            yield (KillPoint(point, call),)


def derived_seed(seed: int, index: int) -> int:
    """The seed of run ``index`` of a random session: stable, and distinct per run."""
    return random.Random(f"killpoint:{seed}:{index}").getrandbits(48)


def random_schedule(plan: Plan, run_seed: int, *, max_kills: int = 2) -> Schedule:
    """Draw one schedule from ``run_seed``: 1..max_kills kills; later ones may hit recovery points."""
    rng = random.Random(run_seed)
    kills = []
    for incarnation in range(rng.randint(1, max_kills)):
        points = protocol.CALL_POINTS + (protocol.RECOVERY_POINTS if incarnation else ())
        point = rng.choice(points)
        call = None if point == protocol.AFTER_DECISIONS else rng.choice(plan.call_ids)
        kills.append(KillPoint(point, call))
    return tuple(kills)
