"""Certify claims: build each tool's target, search, judge, write its certificate; check old certificates.

A claim is data (tool, class, interactive, the catalogue's ``why``); the
caller gets certificates back as values and decides what to print.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from killpoint import protocol
from killpoint.catalogue import (
    REFERENCE_CATALOGUE,
    Catalogue,
    load_catalogue,
)
from killpoint.errors import ConfigError
from killpoint.harness._command import killpoint_command
from killpoint.harness.certify._fork_server import close_fork_server
from killpoint.harness.certify.adapters import (
    ExternalSpec,
    Target,
    external_target,
    fake_target,
    target_from_spec,
)
from killpoint.harness.certify.certificate import (
    Certificate,
    certificate_path,
    judge,
    make_certificate,
    read_certificate,
    staleness,
    write_certificate,
)
from killpoint.harness.certify.trials import SearchResult, search

DEFAULT_TRIALS = 25


@dataclass(frozen=True)
class Claim:
    tool: str
    tool_class: str
    interactive: bool = False
    why: str = ""


@dataclass(frozen=True)
class Certified:
    certificate: Certificate
    path: Path
    replaced_stale: str | None  # why the certificate this one replaced was stale


def check_class(text: str, where: str) -> str:
    if text not in protocol.CLASSES:
        raise ConfigError(f"{where} {text!r}: unknown class; use one of {', '.join(protocol.CLASSES)}")
    return text


def claims_from_catalogue(path: str, only: str | None = None) -> list[Claim]:
    """Every tool of the catalogue (or just ``only``) with its class, interactive flag and ``why``."""
    catalogue = load_catalogue(path)
    tools = sorted(catalogue.tools)
    if only is not None:
        if only not in catalogue.tools:
            raise ConfigError(f"{path}: the catalogue lists no tool {only!r}")
        tools = [only]
    if not tools:
        raise ConfigError(f"{path}: the catalogue lists no tools to certify")
    return [Claim(tool, catalogue.class_of(tool), catalogue.is_interactive(tool), catalogue.reasons.get(tool, ""))
            for tool in tools]


def single_claim(tool: str, claim: str | None) -> Claim:
    """``certify TOOL --claim CLASS``; without --claim a fake tool is held to the reference catalogue's class."""
    reference: Catalogue = load_catalogue(REFERENCE_CATALOGUE)
    if claim is None:
        if tool not in reference.tools:
            raise ConfigError(f"certify {tool}: give the class to check with --claim CLASS "
                              f"({', '.join(protocol.CLASSES)})")
        claim = reference.class_of(tool)
    return Claim(tool, check_class(claim, "--claim"), reference.is_interactive(tool), reference.reasons.get(tool, ""))


def target_for(tool: str, external: ExternalSpec) -> Target:
    return external_target(tool, external) if external.given else fake_target(tool)


def reproduce_line(claim: Claim, external: ExternalSpec, *, seed: int, trials: int) -> str:
    """The one command that certifies this tool again exactly, from the directory it was run in.

    The adapter flags are written as they were given, so a path stays relative
    (a line from a CI log still works in another checkout).
    """
    words = [*shlex.split(killpoint_command()), "certify", claim.tool, "--claim", claim.tool_class, "--seed", str(seed),
             "--trials", str(trials)]
    for value, flag in ((external.python, "--python"), (external.python_snapshot, "--python-snapshot"),
                        (external.command, "--command"), (external.snapshot_command, "--snapshot-command"),
                        (external.world, "--world"), (external.schema, "--schema")):
        if value:
            words += [flag, value]
    return shlex.join(words)


def certify(claims: list[Claim], external: ExternalSpec, *, trials: int, seed: int, out: Path,
            kill: bool = True, strict: bool = True, on_start: Callable[[], None] = lambda: None,
            on_done: Callable[[Certified], None] = lambda _: None) -> list[Certified]:
    """Certify every claim in order, writing one certificate each into ``out``.

    Every tool's target is built before ``on_start`` and the first trial, so bad
    input is one ConfigError before anything runs. ``strict``: a tool that
    cannot be run is such an error; else (a whole catalogue) it gets an
    INCONCLUSIVE certificate saying why.
    """
    done = []
    try:
        targets = [_target_or_why(claim, external, strict=strict) for claim in claims]
        on_start()
        for claim, (target, why) in zip(claims, targets):
            certified = _certify_one(claim, target, why, external, trials=trials, seed=seed, out=out, kill=kill)
            on_done(certified)
            done.append(certified)
    finally:
        close_fork_server()
    return done


def _target_or_why(claim: Claim, external: ExternalSpec, *, strict: bool) -> tuple[Target | None, str]:
    """The tool's target, or None and why it cannot be run (only when not ``strict`` and no adapter was given)."""
    try:
        return target_for(claim.tool, external), ""
    except ConfigError:
        if strict or external.given:
            raise
        return None, (f"{claim.tool!r} is none of the fake tools; run the catalogue's other tools with "
                      f"--command 'ARGV {{tool}} {{args}}' or --python MODULE:FUNCTION (given tool=NAME)")


def _certify_one(claim: Claim, target: Target | None, cannot: str, external: ExternalSpec, *, trials: int, seed: int,
                 out: Path, kill: bool) -> Certified:
    if target is not None:
        result = search(target, claim.tool_class, interactive=claim.interactive, trials=trials, seed=seed, kill=kill)
        adapter, identity = target.spec, target.identity
    else:
        result = SearchResult((), None, f"no way to run it: {cannot}", 0.0)
        adapter, identity = {"adapter": "none", "tool": claim.tool}, {"kind": "none", "digest": ""}
    judgement = judge(claim.tool_class, interactive=claim.interactive, result=result)
    certificate = make_certificate(
        tool=claim.tool, claim=claim.tool_class, interactive=claim.interactive, result=result, judgement=judgement,
        seed=seed, trials=trials, adapter=adapter, identity=identity, why=claim.why,
        reproduce=reproduce_line(claim, external, seed=seed, trials=trials))
    previous = read_certificate(certificate_path(out, claim.tool))
    replaced = staleness(previous, identity) if previous is not None else None
    return Certified(certificate, write_certificate(out, certificate), replaced)


@dataclass(frozen=True)
class CheckRow:
    path: Path
    tool: str
    verdict: str
    status: str  # "fresh", or why it is stale or cannot be checked
    ok: bool


def check_folder(folder: Path) -> list[CheckRow]:
    """Each certificate in ``folder`` against the tool as it is now: fresh, stale, or not checkable."""
    if not folder.is_dir():
        raise ConfigError(f"--check {folder}: no such folder of certificates")
    rows = list(_check_rows(sorted(folder.glob("*.json"))))
    if not rows:
        raise ConfigError(f"--check {folder}: it holds no certificates (*.json written by killpoint certify)")
    return rows


def _check_rows(paths: list[Path]) -> Iterator[CheckRow]:
    try:
        for path in paths:
            certificate = read_certificate(path)
            if certificate is None:
                yield CheckRow(path, path.stem, "?", "not a killpoint certificate", False)
                continue
            try:
                identity = target_from_spec(certificate.data["adapter"]).identity
            except (ConfigError, KeyError) as error:
                yield CheckRow(path, certificate.tool, certificate.verdict, f"cannot check: {error}", False)
                continue
            stale = staleness(certificate, identity)
            yield CheckRow(path, certificate.tool, certificate.verdict, stale or "fresh",
                           stale is None and certificate.verdict != "REFUTED")
    finally:
        close_fork_server()
