"""Verdicts and certificates: a pure judgement of the trials, and the JSON file that records it.

``judge`` is a pure function of (claim, what the trials observed): CONFIRMED,
REFUTED (with the shrunk counterexample), or INCONCLUSIVE (with why), and the
strongest class the evidence supports. Calls that changed nothing the snapshots
see are evidence of READ_ONLY only where the world holds all a tool's state: an
MCP server keeps state in its memory too (``SearchResult.unseen``), so there they
establish nothing but a READ_ONLY claim. A certificate pins the tool's version
(a source or script digest), so a later ``killpoint certify --check`` can tell
a certificate that no longer describes the tool (stale) from a valid one.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from killpoint import protocol
from killpoint._input_files import DOCUMENT_LIMIT_BYTES, kind_of, read_input
from killpoint.catalogue import MAX_TOOL_NAME  # MCP's bound, and well within a file name's 255 bytes
from killpoint.fake_tools.world import diff_snapshots
from killpoint.harness.certify.trials import (
    KILL,
    Evidence,
    Observation,
    SearchResult,
    Snapshot,
)

CONFIRMED, REFUTED, INCONCLUSIVE = "CONFIRMED", "REFUTED", "INCONCLUSIVE"
# The tool is safer than the MCP hints that made its class say: a NON_IDEMPOTENT claim from hints whose replays
# never repeated an effect. Not a pass for a class a person wrote (that stays INCONCLUSIVE, "looks over-cautious").
CONSERVATIVE = "CONSERVATIVE"
VERDICTS = (CONFIRMED, REFUTED, CONSERVATIVE, INCONCLUSIVE)
FORMAT = 1
HINT = re.compile(r"\b(readOnlyHint|destructiveHint|idempotentHint|openWorldHint)\b")
NOTHING_SEEN = "no change was visible in the world"  # how an INCONCLUSIVE from unseen effects begins (cli's NOTE)


@dataclass(frozen=True)
class Judgement:
    verdict: str
    strongest: str | None  # the strongest class the evidence supports; None when nothing ran or nothing could be seen
    reason: str


def strongest_supported(observations: tuple[Observation, ...]) -> str | None:
    """READ_ONLY if nothing ever changed, IDEMPOTENT_WRITE if no replay (or killed replay) differed, else NON_IDEMPOTENT."""
    if any(observation.differs for observation in observations):
        return protocol.NON_IDEMPOTENT
    if any(observation.changed for observation in observations):
        return protocol.IDEMPOTENT_WRITE
    return protocol.READ_ONLY if any(observation.ok for observation in observations) else None


def unseen_effects(result: SearchResult) -> bool:
    """Every call left the world as it was, but the tool can keep an effect where no snapshot looks.

    A toggle in an MCP server's memory (one call turns a setting on, the next
    off) leaves every snapshot equal, exactly as a read does: then the silence
    is no evidence of READ_ONLY, and nothing may be advised from it.
    """
    return bool(result.unseen) and strongest_supported(result.observations) == protocol.READ_ONLY


def unseen_reason(result: SearchResult) -> str:
    """Why calls that changed nothing seen establish nothing (``unseen_effects``), in one sentence's tail."""
    return f"an effect kept in {result.unseen} cannot be seen, so this is no evidence of READ_ONLY"


def judge(claim: str, *, interactive: bool, result: SearchResult, why: str = "") -> Judgement:
    """The verdict on ``claim`` (``_verdict``), its reason saying what debris a kill left apart (``trials.debris``).

    Debris the replay survived is a crash-safety finding, not a repeated effect:
    it changes no verdict, and the reason names it so it is not lost.
    """
    judgement = _verdict(claim, interactive=interactive, result=result, why=why)
    files = debris_text(debris_found(tuple(o for o in result.observations if o.kind == KILL)))
    if not files:
        return judgement
    return Judgement(judgement.verdict, judgement.strongest,
                     f"{judgement.reason}; a kill left {files.removeprefix('debris: ')}, which the replay did not "
                     f"remove and one call does not leave: debris (a crash-safety finding), not a repeated effect")


def _verdict(claim: str, *, interactive: bool, result: SearchResult, why: str = "") -> Judgement:
    """The verdict on ``claim`` from the trials (pure: literal observations in, a value out).

    ``why`` is the catalogue's reason for the claim: when it names MCP hints, a
    claim the evidence shows over-cautious is CONSERVATIVE (the hints promise less
    than the tool does), not INCONCLUSIVE. Where calls changed nothing seen and
    the tool can keep an effect unseen (``unseen_effects``), every claim but
    READ_ONLY is INCONCLUSIVE (UNKNOWN stays accepted) and no class is supported:
    never a READ_ONLY, nor advice that VERIFY could become RETRY, from silence.
    """
    observations, found = result.observations, result.found
    if result.skipped:
        return Judgement(INCONCLUSIVE, None, f"skipped: {result.error}")
    blind = unseen_effects(result)
    strongest = None if blind and claim != protocol.READ_ONLY else strongest_supported(observations)
    replays = [observation for observation in observations if observation.kind != KILL]
    kills = len(observations) - len(replays)
    ok = sum(observation.ok for observation in replays)
    seen = f"{len(replays)} trial(s), {ok} call(s) succeeded, {kills} killed part-way"
    if result.error is not None:
        return Judgement(INCONCLUSIVE, strongest, f"the trials could not go on: {result.error}")
    if claim == protocol.UNKNOWN:
        observed = (f"a replay changed the world again ({_what_differed(found)})" if found
                    else f"{NOTHING_SEEN}; {unseen_reason(result)}" if blind
                    else f"no replay differed; the evidence supports {strongest or 'nothing yet'}")
        return Judgement(CONFIRMED, strongest, f"UNKNOWN is always accepted (VERIFY on interruption); {seen}; {observed}")
    if found is not None and (claim != protocol.NON_IDEMPOTENT or interactive):
        why = _what_differed(found, claim)
        if interactive:
            why += "; asking again is not harmless, so the RETRY of an interrupted question is unsafe"
        return Judgement(REFUTED, strongest, why)
    if ok == 0:
        first = next((observation.error for observation in replays if observation.error), "no call ran")
        return Judgement(INCONCLUSIVE, strongest, f"every drawn call was refused ({seen}; first: {first}); "
                                                  f"seed a world the calls fit (--world) or narrow the schema")
    if blind and claim != protocol.READ_ONLY:
        return Judgement(INCONCLUSIVE, None, f"{NOTHING_SEEN} ({seen}); {unseen_reason(result)}")
    if interactive:
        return Judgement(CONFIRMED, strongest, f"interactive: an interrupted question is asked again (RETRY); "
                                               f"{seen}; asking twice left the world as asking once")
    if claim == protocol.NON_IDEMPOTENT:
        if found is not None:
            return Judgement(CONFIRMED, strongest, f"{_what_differed(found)} ({seen})")
        if hints_in(why):
            return Judgement(CONSERVATIVE, strongest,
                             f"safer than its hints: no replay repeated an effect ({seen}); the evidence supports "
                             f"{strongest}, so VERIFY could become RETRY")
        return Judgement(INCONCLUSIVE, strongest,
                         f"looks over-cautious: no replay repeated an effect ({seen}); safe, but VERIFY could "
                         f"become RETRY if it were {strongest}")
    if claim == protocol.READ_ONLY:
        unseen = f"; an effect kept in {result.unseen} cannot be seen, so READ_ONLY rests on the claim" if blind else ""
        return Judgement(CONFIRMED, strongest, f"no call changed the world ({seen}){unseen}")
    unchanged = "; no call changed the world, so READ_ONLY fits too" if strongest == protocol.READ_ONLY else ""
    return Judgement(CONFIRMED, strongest, f"every replay, and every replay after a kill, left the world as one "
                                           f"call did ({seen}){unchanged}")


def _what_differed(found: Evidence | None, claim: str = "") -> str:
    if found is None:
        return "nothing differed"
    observation = found.observation
    if claim == protocol.READ_ONLY and observation.changed:
        return "one call changed the world" + (", and its replay changed it again" if observation.differs else "")
    if observation.kind == KILL:
        where = (f"point {observation.kill_at} of the call ({point_text(observation.kill_label)})" if observation.kill_at
                 else f"{observation.kill_after_ms} ms")
        if observation.debris and not observation.ok:
            return (f"killed at {where}, the replay failed on what the kill left ({', '.join(observation.debris)}): "
                    f"{observation.error}")
        return f"killed at {where} and replayed, the world did not end as one uninterrupted call leaves it"
    return "a replay changed the world again" if observation.changed else "the replay changed the world"


AFTER = "just after "  # a point a tool reached by doing it (an MCP server's change in the world), not one announced


def point_text(label: str | None) -> str:
    """A kill point as a sentence reads it: ``before write a.txt`` (announced) or ``just after create a.txt``."""
    return str(label) if str(label).startswith(AFTER) else f"before {label}"


def hints_in(why: str) -> list[str]:
    """The MCP hints a catalogue's ``why`` names, in order (``catalogue from-mcp`` writes the deciding ones there)."""
    return list(dict.fromkeys(HINT.findall(why or "")))


def hint_contradiction(claim: str, judgement: Judgement, why: str) -> str | None:
    """Where the evidence goes against the hints that decided the claim, in one sentence; None if it does not."""
    if not hints_in(why):
        return None
    if judgement.verdict == REFUTED:
        return f"the evidence contradicts the MCP hints ({why}) that made it {claim}: {judgement.reason}"
    if judgement.verdict == CONSERVATIVE:
        return (f"the MCP hints ({why}) made it {claim}, but no trial showed a replay repeating an effect "
                f"(the evidence supports {judgement.strongest})")
    return None


def evidence_digest(observations: tuple[Observation, ...], found: Evidence | None) -> str:
    """sha256 of every observation and the counterexample's: equal seeds on an unchanged tool give equal digests."""
    payload = {"observations": [observation.to_json() for observation in observations],
               "found": None if found is None else {"observation": found.observation.to_json(),
                                                    "snapshots": found.snapshots}}
    return "sha256:" + hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _diff(before: Snapshot, after: Snapshot) -> list[str]:
    """``diff_snapshots`` without its "--- expected / +++ actual" headers: each title says what is compared."""
    return [line for line in diff_snapshots(before, after) if line.strip() not in ("--- expected", "+++ actual")]


def evidence_json(found: Evidence) -> dict[str, Any]:
    """The counterexample (or witness) as data: the call, the snapshots and readable diffs between them."""
    observation, snapshots = found.observation, found.snapshots
    data: dict[str, Any] = {"args": observation.args, "call_ok": observation.ok}
    if observation.setup is not None:
        data["setup"] = list(observation.setup)
    if observation.kind == KILL:
        data["check"] = "killed part-way, then replayed"
        data["kill"] = {"point": observation.kill_at, "label": observation.kill_label,
                        "after_ms": observation.kill_after_ms, "killed": observation.killed}
        data["diffs"] = {
            "the kill left (against before)": _diff(snapshots["before"], snapshots["after the kill"]),
            "the replay left (against one uninterrupted call)": _diff(
                snapshots["after one uninterrupted call"], snapshots["after the replay"]),
        }
    else:
        data["check"] = "one call, then the same call again"
        data["diffs"] = {
            "one call changed (against before)": _diff(snapshots["before"], snapshots["after one call"]),
            "the replay changed (against one call)": _diff(snapshots["after one call"], snapshots["after the replay"]),
        }
    data["snapshots"] = snapshots
    return data


def killpoint_version() -> str:
    try:
        return metadata.version("killpoint")
    except metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class Certificate:
    """One tool's certificate; ``data`` is exactly what its JSON file holds."""

    data: dict[str, Any]

    @property
    def tool(self) -> str:
        return str(self.data["tool"])

    @property
    def verdict(self) -> str:
        return str(self.data["verdict"])


def make_certificate(*, tool: str, claim: str, interactive: bool, result: SearchResult, judgement: Judgement,
                     seed: int, trials: int, adapter: dict[str, Any], identity: dict[str, str],
                     why: str = "", reproduce: str) -> Certificate:
    observations = result.observations
    replays = [observation for observation in observations if observation.kind != KILL]
    kills = [observation for observation in observations if observation.kind == KILL]
    hints = hints_in(why)
    data: dict[str, Any] = {
        "format": FORMAT, "tool": tool, "claim": claim, "interactive": interactive,
        "verdict": judgement.verdict, "strongest_supported": judgement.strongest, "reason": judgement.reason,
        "trials": {"requested": trials, "replay": len(replays), "kill": len(kills),
                   "refused": sum(not observation.ok for observation in replays),
                   "changed_world": sum(observation.changed for observation in replays),
                   "replay_differed": sum(observation.differs for observation in replays),
                   "kill_diverged": sum(observation.differs for observation in kills),
                   "out_of_budget": result.out_of_budget},
        "kill_left": kills_left(tuple(kills)),
        "debris": debris_found(tuple(kills)),
        "seed": seed, "evidence_digest": evidence_digest(observations, result.found),
        "identity": identity, "adapter": adapter, "killpoint_version": killpoint_version(),
        "reproduce": reproduce, "seconds": round(result.seconds, 3),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    if why:
        data["hint"] = {"why": why, "hints": hints, "contradiction": hint_contradiction(claim, judgement, why)}
    if result.setup is not None:
        data["setup"] = result.setup
    if result.found is not None:
        role = "counterexample" if judgement.verdict == REFUTED else "witness"
        data[role] = evidence_json(result.found)
    data["observations"] = [observation.to_json() for observation in observations]
    return Certificate(data)


def kills_left(kills: tuple[Observation, ...]) -> dict[str, Any]:
    """What the kills part-way left, before the replay: how many as never called, as called once, and each torn state."""
    lefts = [observation.left for observation in kills if observation.left]
    torn = sorted({left.removeprefix("torn: ") for left in lefts if left.startswith("torn")})
    return {"never": lefts.count("never"), "once": lefts.count("once"), "torn": torn,
            "not_killed": sum(not observation.killed for observation in kills)}


def debris_found(kills: tuple[Observation, ...]) -> list[dict[str, Any]]:
    """Each kill that left debris (``trials.debris``): the files, the call, where it was killed, and the replay's end.

    A crash-safety finding, not a repeated effect: with ``replay_ok`` true it did
    not count against the class; with it false the replay failed on it, and it did.
    """
    return [{"files": list(observation.debris), "args": observation.args, "kill_at": observation.kill_at,
             "kill_label": observation.kill_label, "kill_after_ms": observation.kill_after_ms,
             "replay_ok": observation.ok, **({"replay_error": observation.error} if observation.error else {})}
            for observation in kills if observation.debris]


def debris_text(found: list[dict[str, Any]]) -> str:
    """The debris that did not count against the class, in a few words: ``debris: a.txt.<hex>.tmp``; "" if none."""
    files = dict.fromkeys(name for entry in found if entry.get("replay_ok") for name in entry["files"])
    return f"debris: {' '.join(files)}" if files else ""


def kills_left_text(summary: dict[str, Any]) -> str:
    """``kills_left`` in a few words: ``3 never, 2 once, torn: +a.txt.<hex>.tmp``; "-" when nothing was killed."""
    parts = [f"{summary[key]} {key}" for key in ("never", "once") if summary.get(key)]
    if summary.get("torn"):
        parts.append("torn: " + " | ".join(summary["torn"]))
    return ", ".join(parts) or "-"


def certificate_path(folder: Path, tool: str) -> Path:
    return folder / (re.sub(r"[^A-Za-z0-9_.-]", "_", tool) + ".json")


def certificate_name_problems(tools: list[str]) -> list[str]:
    """Why some of ``tools`` cannot each have a certificate file of their own: a name too long, two names on one file."""
    too_long = [f"{shown_name(tool)}: too long to name its certificate (at most {MAX_TOOL_NAME} characters)"
                for tool in tools if len(tool) > MAX_TOOL_NAME]
    sharing: dict[str, list[str]] = {}
    for tool in dict.fromkeys(tools):
        sharing.setdefault(certificate_path(Path(), tool).name, []).append(tool)
    return too_long + [f"{', '.join(map(repr, names))}: would share the certificate {file} (each character but "
                       f"A-Z a-z 0-9 _ - . is written _), the last overwriting the others"
                       for file, names in sharing.items() if len(names) > 1]


def certificate_file_problems(folder: Path, tools: list[str]) -> list[str]:
    """Where a certificate of ``tools`` would go in ``folder`` and cannot: a folder, a FIFO (whose write waits for
    a reader forever), a device or a socket is there, or a symlink that loops."""
    problems = []
    for path in dict.fromkeys(certificate_path(folder, tool) for tool in tools):
        try:
            kind = kind_of(os.stat(path).st_mode)
        except FileNotFoundError:  # the usual case: it is written anew
            continue
        except OSError as error:
            kind = f"a path that cannot be followed ({error.strerror})"
        if kind is not None:
            problems.append(f"{path}: is {kind}, not a regular file, so the certificate cannot be written there; "
                            f"remove it, or give --out another folder")
    return problems


def write_certificate(folder: Path, certificate: Certificate) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = certificate_path(folder, certificate.tool)
    path.write_text(json.dumps(certificate.data, indent=1, ensure_ascii=False, default=str) + "\n")
    return path


def shown_name(name: Any) -> str:
    """A tool name as a message shows it: quoted, control characters escaped, a long one cut."""
    text = repr(name)
    return text if len(text) <= 60 else f"{text[:50]}... ({len(str(name))} characters)"


def read_certificate(path: Path) -> Certificate | None:
    """The certificate in ``path``, or None when it is missing or not one.

    Read bounded (``read_input``): a folder of certificates may hold a FIFO (an ``open`` that never returns), a
    link to ``/dev/zero`` (a read that never ends), a huge file; each is not one, reported as the rest are.
    """
    try:
        data = json.loads(read_input(path, "a certificate", limit=DOCUMENT_LIMIT_BYTES, fix="certify the tool again"))
    except (ValueError, RecursionError):  # ConfigError (not read) is a ValueError, as are not UTF-8 and not JSON
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or "identity" not in data:
        return None
    return Certificate(data)


def staleness(certificate: Certificate, identity: dict[str, str]) -> str | None:
    """Why ``certificate`` no longer describes the tool whose identity is now ``identity``; None if it still does."""
    then = certificate.data.get("identity", {})
    if then.get("digest") == identity.get("digest"):
        return None
    return (f"stale: the tool changed since it was certified ({then.get('kind', '?')} "
            f"{str(then.get('digest'))[:19]} then, {str(identity.get('digest'))[:19]} now); certify it again")
