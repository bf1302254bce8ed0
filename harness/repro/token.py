"""Repro tokens: one copy-paste string that names a run exactly.

A token is versioned (``kp1.``) and carries where the scenario came from, the
digests of the plan and catalogue it ran with, the run's seed, schedule and
index in its session, and the properties it found; ``killpoint repro`` reruns
exactly that and says so plainly when the scenario has changed underneath it.

A token is pasted by a person (from a CI log, a chat), so ``decode`` treats it
as untrusted input: its size is bounded before and after decompression, and
its payload must match ``FIELDS`` exactly, or it is refused with every problem
named. What a valid token may *run* is decided elsewhere (``repro/safety``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from killpoint._json import strict_json
from killpoint.errors import ConfigError
from killpoint.harness.model import BACKENDS, RESTART_MODES

PREFIX = "kp1."
LONGEST_TOKEN = 32_768  # characters; a real token is a few hundred
LONGEST_PAYLOAD = 65_536  # bytes decompressed: a zlib bomb stops here
LONGEST_TEXT = 4_096  # one string field (a path, a command)
MOST_KILLS = 100
COPY_AGAIN = "copy the whole token again from the failure's 'reproduce:' line (a token is made by killpoint, not edited)"

# A check takes (where, value) and returns what is wrong there, every problem at once.
Check = Callable[[str, Any], list[str]]


def text(*, pattern: str | None = None, example: str = "", longest: int = LONGEST_TEXT) -> Check:
    """A non-empty string of at most ``longest`` characters (matching ``pattern`` in full, if given)."""
    shape = re.compile(pattern) if pattern else None

    def check(where: str, value: Any) -> list[str]:
        if not isinstance(value, str) or not value:
            return [f"{where}: must be non-empty text{f' like {example!r}' if example else ''}, got {_shown(value)}"]
        if len(value) > longest or "\0" in value:
            return [(f"{where}: {len(value)} characters{' with a NUL' if chr(0) in value else ''}; "
                     f"it holds at most {longest}, no NUL")]
        if shape is not None and not shape.fullmatch(value):
            return [f"{where}: {value[:60]!r} is not of the form {example!r}"]
        return []

    return check


def whole(low: int, high: int) -> Check:
    """An integer (never a boolean, never a string of digits) from ``low`` to ``high``."""

    def check(where: str, value: Any) -> list[str]:
        if isinstance(value, bool) or not isinstance(value, int):
            return [f"{where}: must be a whole number, got {_shown(value)}"]
        if not low <= value <= high:
            return [f"{where}: {value} is outside {low}..{high}"]
        return []

    return check


def choice(*allowed: str) -> Check:
    def check(where: str, value: Any) -> list[str]:
        return [] if value in allowed else [f"{where}: must be one of {', '.join(allowed)}, got {_shown(value)}"]

    return check


def nullable(inner: Check) -> Check:
    return lambda where, value: [] if value is None else inner(where, value)


def items(inner: Check, *, most: int) -> Check:
    """A list of at most ``most`` values, each passing ``inner``."""

    def check(where: str, value: Any) -> list[str]:
        if not isinstance(value, list):
            return [f"{where}: must be a list, got {_shown(value)}"]
        if len(value) > most:
            return [f"{where}: {len(value)} entries; it holds at most {most}"]
        return [problem for index, item in enumerate(value) for problem in inner(f"{where}[{index}]", item)]

    return check


def table(fields: dict[str, Check], *, required: tuple[str, ...] = (), means: str = "") -> Check:
    """An object whose keys are among ``fields`` (each value passing its check) and include ``required``."""

    def check(where: str, value: Any) -> list[str]:
        if not isinstance(value, dict):
            return [f"{where}: must be an object{f' ({means})' if means else ''}, got {_shown(value)}"]
        problems = [f"{where}.{name}: missing" for name in required if name not in value]
        unknown = sorted(set(value) - set(fields))
        if unknown:
            problems.append(f"{where}: unknown field(s) {', '.join(map(repr, unknown))[:200]}; "
                            f"it has {', '.join(fields)}")
        for name, inner in fields.items():
            if name in value:
                problems += inner(f"{where}.{name}", value[name])
        return problems

    return check


def _shown(value: Any) -> str:
    """A value for a message: its JSON type and a short repr."""
    kind = {dict: "object", list: "list", str: "text", bool: "boolean", type(None): "null"}.get(type(value),
                                                                                               type(value).__name__)
    return f"{kind} {value!r:.40}"


PATH, COMMAND = text(example="scenarios/demo.toml"), text(example="{python} -m my_runtime")
SCENARIO_ORIGIN = table({"scenario": PATH, "scenario_absolute": PATH, "workload": COMMAND}, required=("scenario",))
FLAGS_ORIGIN = table({"workload": COMMAND, "plan": PATH, "catalogue": PATH, "directory": PATH,
                      "directory_absolute": PATH}, required=("workload", "plan"))


def origin_check(where: str, value: Any) -> list[str]:
    """Where the scenario came from: a scenario file (``scenario``), or ``workload`` and ``plan`` flags."""
    if not isinstance(value, dict):
        return [f"{where}: must be an object naming the scenario file or the workload and plan, got {_shown(value)}"]
    if "scenario" in value:
        return SCENARIO_ORIGIN(where, value)
    if "workload" in value and "plan" in value:
        return FLAGS_ORIGIN(where, value)
    return [f"{where}: names neither a scenario file ('scenario') nor a workload and its plan ('workload' and 'plan')"]


DIGEST = text(pattern="[0-9a-f]{1,64}", example="3f9a0c2b1d4e")
# The payload, field by field: what ``decode`` accepts and nothing else. Tokens made before a field
# existed decode without it (``backend``, ``backend_options``, ``run``), so only the first four are required.
FIELDS: dict[str, Check] = {
    "origin": origin_check,
    "plan_digest": DIGEST,
    "catalogue_digest": DIGEST,
    "schedule": items(text(example="c3:after_effect", longest=200), most=MOST_KILLS),
    "seed": nullable(whole(-2**63, 2**64)),
    "expect": items(text(pattern="[a-z][a-z0-9-]*", example="interrupted-action", longest=64), most=32),
    "drift": nullable(text(pattern="[^=]+=[A-Z_]+", example="append=READ_ONLY", longest=200)),
    "backend": choice(*BACKENDS),
    "backend_options": table({"image": text(pattern=r"[\w][\w.:/@+-]*", example="killpoint-host:1", longest=255),
                              "restart": choice(*RESTART_MODES)}),
    "run": nullable(whole(0, 10**9)),
}
PAYLOAD = table(FIELDS, required=("origin", "plan_digest", "catalogue_digest", "schedule"), means="a repro token's payload")


@dataclass(frozen=True)
class ReproToken:
    origin: dict[str, str] = field(hash=False)
    plan_digest: str
    catalogue_digest: str
    schedule: tuple[str, ...]
    seed: int | None = None
    expect: tuple[str, ...] = ()
    drift: str | None = None
    backend: str = "subprocess"
    backend_options: dict[str, str] = field(default_factory=dict, hash=False)  # docker: image and restart mode
    run: int | None = None  # the run's index in its session; tokens made before it existed decode without it

    def encode(self) -> str:
        payload = json.dumps(asdict(self), separators=(",", ":"), sort_keys=True).encode()
        return PREFIX + base64.urlsafe_b64encode(zlib.compress(payload, 9)).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> ReproToken:
        """The token ``text`` names; ConfigError naming every problem if it is not one killpoint made."""
        data = _payload(text.strip())
        problems = PAYLOAD("token", data)
        if problems:
            raise ConfigError(f"repro token: {len(problems)} problem(s) with its fields; {COPY_AGAIN}",
                              tuple(problems))
        return cls(origin=dict(data["origin"]), plan_digest=data["plan_digest"],
                   catalogue_digest=data["catalogue_digest"], schedule=tuple(data["schedule"]),
                   seed=data.get("seed"), expect=tuple(data.get("expect", ())), drift=data.get("drift"),
                   backend=data.get("backend", "subprocess"), backend_options=dict(data.get("backend_options", {})),
                   run=data.get("run"))


def _payload(text: str) -> Any:
    """The JSON a token carries, read within ``LONGEST_TOKEN`` and ``LONGEST_PAYLOAD``."""
    if not text.startswith(PREFIX):
        raise ConfigError(f"repro token {text[:20]!r}...: not a killpoint token (they start with {PREFIX!r}); "
                          f"copy the whole token from the failure's 'reproduce:' line")
    if len(text) > LONGEST_TOKEN:
        raise ConfigError(f"repro token: {len(text)} characters, more than a token ever has ({LONGEST_TOKEN}); "
                          f"{COPY_AGAIN}")
    body = text[len(PREFIX):]
    try:
        compressed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise _damaged("it is not base64 text") from None
    inflater = zlib.decompressobj()
    try:
        payload = inflater.decompress(compressed, LONGEST_PAYLOAD)
    except zlib.error:
        raise _damaged("it does not decompress") from None
    if inflater.unconsumed_tail:
        raise ConfigError(f"repro token: it decompresses to more than {LONGEST_PAYLOAD} bytes, far more than a token "
                          f"holds; it was not made by killpoint, so it is not run")
    if not inflater.eof or inflater.unused_data:
        raise _damaged("it is cut short" if not inflater.eof else "bytes follow its end")
    try:
        return strict_json(payload)
    except ValueError as error:
        raise _damaged(f"its payload is not JSON: {error}") from None


def _damaged(why: str) -> ConfigError:
    return ConfigError(f"repro token is damaged ({why}); copy it again, whole, from the failure's 'reproduce:' line")
