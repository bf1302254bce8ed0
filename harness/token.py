"""Repro tokens: one copy-paste string that names a run exactly.

A token is versioned (``kp1.``) and carries where the scenario came from, the
digests of the plan and catalogue it ran with, the run's seed, schedule and
index in its session, and the properties it found; ``killpoint repro`` reruns
exactly that and says so plainly when the scenario has changed underneath it.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from dataclasses import asdict, dataclass, field

from harness.errors import ConfigError

PREFIX = "kp1."


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
        text = text.strip()
        if not text.startswith(PREFIX):
            raise ConfigError(f"repro token {text[:20]!r}...: not a killpoint token (they start with {PREFIX!r}); "
                              f"copy the whole token from the failure's 'reproduce:' line")
        body = text[len(PREFIX):]
        try:
            data = json.loads(zlib.decompress(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))))
            return cls(origin=data["origin"], plan_digest=data["plan_digest"],
                       catalogue_digest=data["catalogue_digest"], schedule=tuple(data["schedule"]),
                       seed=data.get("seed"), expect=tuple(data.get("expect", ())), drift=data.get("drift"),
                       backend=data.get("backend", "subprocess"), backend_options=dict(data.get("backend_options", {})),
                       run=data.get("run"))
        except (binascii.Error, zlib.error, ValueError, KeyError, TypeError):
            raise ConfigError("repro token is damaged (it does not decode); copy it again, whole, "
                              "from the failure's 'reproduce:' line") from None
