"""What a user may give killpoint: the bounds of every number, and the shape of names, in one table.

A flag and the scenario field for the same choice (``--random N`` and
``[schedule] runs``, ``--timeout`` and ``timeout``) refuse the same values, with
the bounds read from ``LIMITS`` here; the CLI's subcommands and the pytest
plugin check their numbers with ``check_numbers`` and ``number_problems``. A
bound is there to refuse what cannot be meant (``-j 100000`` forks that many
workers, ``--random 10**12`` never ends), not to second-guess a large but real
session. Names are refused at parse: an empty one (``--runs-dir ''`` would be
the working folder), and an image tag outside Docker's reference grammar.

Kept free of the harness's imports (like ``defaults``; ``killpoint.errors`` imports nothing), so the parser and
the plugin load it for nothing.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from killpoint.errors import ConfigError


@dataclass(frozen=True)
class Limit:
    """The values one choice may take: a whole number in ``low..high``, or a finite one (``whole=False``),
    above ``low`` when ``above`` (seconds: 0 is no time), else from it; ``noun`` says what it counts."""

    low: float
    high: int
    whole: bool = True
    above: bool = False
    noun: str = "a whole number"

    def allows(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int if self.whole else int | float):
            return False
        if isinstance(value, float) and not math.isfinite(value) or value > self.high:  # an int of any size compares
            return False
        return value > self.low if self.above else value >= self.low

    def wanted(self) -> str:
        """What to give: ``a whole number from 1 to 128``, ``a number of seconds above 0 and at most 86400``."""
        return f"{self.noun} above {self.low} and at most {self.high}" if self.above else \
            f"{self.noun} from {self.low} to {self.high}"


# Past a day an incarnation, a certify call or a timed window is hung, and the clocks that wait for it overflow
# long before 1e300 s.
MAX_SECONDS = 86_400
SECONDS = Limit(0, MAX_SECONDS, whole=False, above=True, noun="a number of seconds")
# What an incarnation, a certify call or a certification may be given: under 10 ms no process even starts, and a
# timeout of 1e-300 s reads as a workload that hung.
WAIT = Limit(0.01, MAX_SECONDS, whole=False, noun="a number of seconds")
LIMITS = {
    "depth": Limit(1, 6),  # kills per exhaustive schedule: about P^depth schedules for P crash points
    "runs": Limit(1, 1_000_000),  # random or timed schedules of one session
    "seed": Limit(0, 2**63 - 1),  # a seed travels in repro tokens and JSON reports as a 64-bit integer
    # Parallel runs: each worker is a process with its own backend (a fork server is two); past this many the
    # machine, not the count, is the bound, and the memory of as many interpreters runs out first.
    "jobs": Limit(1, 128),
    "shards": Limit(1, 10_000),  # --shard K/N: N matrix jobs
    "timeout": WAIT,
    "timed_window": SECONDS,
    "min_coverage": Limit(0, 100, whole=False, noun="a percentage"),  # of the crash-free run's crash points
    "max_incarnations": Limit(1, 100),  # incarnations allowed after a schedule's last kill
    "keep": Limit(0, 1_000_000),  # sessions prune keeps
    "older_than": Limit(0, 36_500, whole=False, noun="a number of days"),  # a century
    "examples": Limit(1, 1_000_000),  # hunt's examples
    "max_calls": Limit(1, 100),  # the longest plan hunt draws
    "trials": Limit(1, 100_000),  # certify's draws per tool
    "call_timeout": WAIT,
    "budget": WAIT,
}


def number_problems(given: Iterable[tuple[str, str, Any]]) -> list[str]:
    """``FLAG VALUE: give ...`` for each (flag, limit name, value) whose value is given (not None) and outside."""
    return [f"{flag} {value}: give {LIMITS[name].wanted()}" for flag, name, value in given
            if value is not None and not LIMITS[name].allows(value)]


def check_numbers(given: Iterable[tuple[str, str, Any]]) -> None:
    """ConfigError naming every flag of ``given`` (flag, limit name, value) whose value is outside its bound."""
    problems = number_problems(given)
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        raise ConfigError(f"{len(problems)} flag(s) out of bounds", tuple(problems))


def text(value: str) -> str:
    """An argparse ``type``: a flag's text, which may not be empty (an empty ``--workload ''`` is no choice)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("empty; give a value, or leave the flag out")
    if "\x00" in value:
        raise argparse.ArgumentTypeError("holds a NUL byte, which no file name or command can carry")
    return value


def path(value: str) -> Path:
    """An argparse ``type``: a file or folder name, never empty (``Path('')`` would be the working folder)."""
    return Path(text(value))


# Docker's reference grammar (github.com/distribution/reference, reference.go): [DOMAIN/]PATH[:TAG][@DIGEST].
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_TAG = re.compile(rf"(?P<name>{_NAME})(?::{_TAG})?")
IMAGE_REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::{_TAG})?(?:@{_DIGEST})?")
MAX_IMAGE_NAME = 255  # the name part, as Docker counts it


def _image(pattern: re.Pattern[str], example: str) -> Any:
    def convert(value: str) -> str:
        matched = pattern.fullmatch(value)
        if matched is None or len(matched["name"]) > MAX_IMAGE_NAME:
            raise argparse.ArgumentTypeError(
                f"{value!r} is not a Docker image reference: write [REGISTRY/]NAME[:TAG] with NAME in lower case "
                f"(letters, digits, '.', '_', '-', separated by '/'), TAG of letters, digits, '_', '.', '-' "
                f"(at most 128), e.g. {example}")
        return value

    return convert


image_tag = _image(IMAGE_TAG, "killpoint-host:2")  # what ``image build --tag`` names
image_reference = _image(IMAGE_REFERENCE, "killpoint-host:1")  # what ``--image`` may name (a digest too)
