"""Certify claims: build each tool's target, search, judge, write its certificate; check old certificates.

A claim is data (tool, class, interactive, the catalogue's ``why``); the
caller gets certificates back as values and decides what to print.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from killpoint import protocol
from killpoint.catalogue import REFERENCE_CATALOGUE, Catalogue, load_catalogue
from killpoint.errors import ConfigError
from killpoint.harness.certify._fork_server import close_fork_server
from killpoint.harness.certify.adapters import ExternalSpec, Target, external_target, fake_target, target_from_spec
from killpoint.harness.certify.certificate import (INCONCLUSIVE, Certificate, certificate_name_problems,
                                                   certificate_path, hints_in, judge, make_certificate,
                                                   read_certificate, staleness, write_certificate)
from killpoint.harness.certify.mcp import McpTarget, close_spares, external_from_json, listed_tools, mcp_target
from killpoint.harness.certify.trials import SearchResult, search
from killpoint.harness.frontends._command import killpoint_command
from killpoint.harness.frontends.catalogue_cli import catalogue_toml

DEFAULT_TRIALS = 25


@dataclass(frozen=True)
class Claim:
    tool: str
    tool_class: str
    interactive: bool = False
    why: str = ""
    skip: str = ""  # why it is not run at all (an MCP tool that may reach the network); INCONCLUSIVE, saying so


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


def claims_from_mcp(external: ExternalSpec, only: str | None, claim: str | None) -> list[Claim]:
    """Every tool the ``--mcp`` server lists (or just ``only``), with the class its hints map to (or ``claim``)."""
    _, tools = listed_tools(external, only)
    return [Claim(tool.name, check_class(claim, "--claim") if claim else tool.tool_class, False,
                  "" if claim else tool.why, tool.skip) for tool in tools]


def target_for(tool: str, external: ExternalSpec) -> Target:
    if external.mcp is not None or external.mcp_url is not None:
        return mcp_target(tool, external)
    return external_target(tool, external) if external.given else fake_target(tool)


def rebuilt_target(spec: dict[str, Any]) -> Target:
    """The target a certificate's ``adapter`` describes, as the tool is now."""
    if spec.get("adapter") == "mcp":
        return mcp_target(spec["tool"], external_from_json(spec))
    return target_from_spec(spec)


def reproduce_line(claim: Claim, external: ExternalSpec, *, seed: int, trials: int) -> str:
    """The one command that certifies this tool again exactly, from the directory it was run in.

    The adapter flags are written as they were given, so a path stays relative
    (a line from a CI log still works in another checkout).
    """
    words = [*shlex.split(killpoint_command()), "certify"]
    if (external.mcp is not None or external.mcp_url is not None) and hints_in(claim.why):  # the claim comes from the server's hints again
        words += ["--tool", claim.tool]
    else:
        words += [claim.tool, "--claim", claim.tool_class]
    words += ["--seed", str(seed), "--trials", str(trials)]
    for value, flag in ((external.python, "--python"), (external.python_snapshot, "--python-snapshot"),
                        (external.command, "--command"), (external.snapshot_command, "--snapshot-command"),
                        (external.mcp, "--mcp"), (external.mcp_url, "--mcp-url"),
                        (external.mcp_protocol, "--mcp-protocol"), (external.world, "--world"), (external.schema, "--schema"),
                        (external.world_preset, "--world-preset"),
                        (None if external.call_timeout is None else f"{external.call_timeout:g}", "--call-timeout")):
        if value:
            words += [flag, value]
    for item in external.mcp_env:
        words += ["--mcp-env", item]
    if external.allow_network:
        words.append("--allow-network")
    return shlex.join(words)


def certify(claims: list[Claim], external: ExternalSpec, *, trials: int, seed: int, out: Path,
            kill: bool = True, strict: bool = True, budget_s: float | None = None,
            on_start: Callable[[], None] = lambda: None,
            on_done: Callable[[Certified], None] = lambda _: None) -> list[Certified]:
    """Certify every claim in order, writing one certificate each into ``out``.

    Every tool's target is built before ``on_start`` and the first trial, so bad
    input is one ConfigError before anything runs. ``strict``: a tool that
    cannot be run is such an error; else (a whole catalogue) it gets an
    INCONCLUSIVE certificate saying why.
    """
    problems = certificate_name_problems([claim.tool for claim in claims])
    if problems:
        raise ConfigError(f"certify: {len(problems)} tool name(s) cannot name a certificate in {out}", tuple(problems))
    done = []
    try:
        targets = [_target_or_why(claim, external, strict=strict) for claim in claims]
        on_start()
        for claim, (target, why) in zip(claims, targets):
            certified = _certify_one(claim, target, why, external, trials=trials, seed=seed, out=out, kill=kill,
                                     budget_s=budget_s)
            on_done(certified)
            done.append(certified)
    finally:
        close_spares()
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
                 out: Path, kill: bool, budget_s: float | None) -> Certified:
    if target is not None and claim.skip:
        result = SearchResult((), None, claim.skip, 0.0, skipped=True)
        adapter, identity = target.spec, target.identity
    elif target is not None:
        result = search(target, claim.tool_class, interactive=claim.interactive, trials=trials, seed=seed, kill=kill,
                        budget_s=budget_s, builder=target if isinstance(target, McpTarget) else None)
        adapter, identity = target.spec, target.identity
    else:
        result = SearchResult((), None, f"no way to run it: {cannot}", 0.0)
        adapter, identity = {"adapter": "none", "tool": claim.tool}, {"kind": "none", "digest": ""}
    judgement = judge(claim.tool_class, interactive=claim.interactive, result=result, why=claim.why)
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
                identity = rebuilt_target(certificate.data["adapter"]).identity
            except (ConfigError, KeyError) as error:
                yield CheckRow(path, certificate.tool, certificate.verdict, f"cannot check: {error}", False)
                continue
            stale = staleness(certificate, identity)
            yield CheckRow(path, certificate.tool, certificate.verdict, stale or "fresh",
                           stale is None and certificate.verdict != "REFUTED")
    finally:
        close_fork_server()


def catalogue_of(done: list[Certified], source: str) -> str:
    """A catalogue (TOML, ``catalogue_toml``'s format) of what the evidence supports, each ``why`` citing its certificate.

    A tool with nothing established (INCONCLUSIVE, or no supported class) is
    UNKNOWN, the class whose recovery trusts nothing (VERIFY). So is a tool
    whose calls changed nothing in the world unless it was claimed READ_ONLY:
    its server's memory is not seen (``certificate.unseen_effects``), so silence
    supports no class.
    """
    classified = {}
    for certified in done:
        data = certified.certificate.data
        supported = data["strongest_supported"] if data["verdict"] != INCONCLUSIVE else None
        classified[data["tool"]] = (supported or protocol.UNKNOWN,
                                    f"certified by running it: {data['verdict']} (claim {data['claim']}), seed "
                                    f"{data['seed']}, {data['evidence_digest'][:19]}, {certified.path.name}")
    body = catalogue_toml(classified, source=Path(source)).splitlines(keepends=True)
    while body and body[0].startswith("#"):  # its header speaks of hints; this one is of evidence
        body.pop(0)
    return ("# Generated by `killpoint certify --mcp` by running the tools of " + source + ".\n"
            "# Each class is the strongest the evidence supports (UNKNOWN where none was established), not a hint.\n"
            "# Check it with `killpoint catalogue check FILE`.\n" + "".join(body))
