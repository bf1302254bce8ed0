"""``killpoint certify``: flags, the terminal table, and exit codes.

0 every claim CONFIRMED; 1 a claim REFUTED (or a certificate stale or not
checkable); 2 bad input; 3 inconclusive: nothing was refuted but a claim could
not be established (a tool with no way to run it, calls all refused, a
NON_IDEMPOTENT claim with no witness, a server's tool that changed nothing
certify can see). INCONCLUSIVE is not a pass.

Kept light: the heavy modules (Hypothesis, the fake tools) load only when the
command runs, so ``killpoint --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any, TextIO

from killpoint.errors import ConfigError
from killpoint.harness.config import limits
from killpoint.harness.frontends._ci import CI_SEED, ci_profile
from killpoint.harness.frontends.outputs import check_outputs

DEFAULT_TRIALS = 25
DEFAULT_MCP_BUDGET_S = 600.0  # a server start costs ~1-2.5 s, so 25 draws with their kills fit; a hung tool does not
EXIT_OK, EXIT_REFUTED, EXIT_INCONCLUSIVE = 0, 1, 3
HOW_TO_RUN_THEM = ("give certify a way to run them: --python MODULE:FUNCTION (called as FUNCTION(world_dir, args, "
                   "tool=NAME)) or --command 'ARGV {tool} {args}' (the arguments as JSON; on stdin without {args}); "
                   "see docs/certify.md")


def add_certify_parser(commands: Any) -> None:
    """Register ``certify`` on the ``killpoint`` subcommands."""
    certify = commands.add_parser(
        "certify", help="check tools' idempotency classes by running them, replaying them and killing them part-way")
    certify.add_argument("tool", type=limits.text, nargs="?", help="the tool to certify (a fake tool, or one run by --python/--command)")
    certify.add_argument("--claim", type=limits.text, metavar="CLASS", help="the class to check: READ_ONLY, IDEMPOTENT_WRITE, "
                                                          "NON_IDEMPOTENT or UNKNOWN (default: the reference catalogue's)")
    certify.add_argument("--catalogue", type=limits.text, metavar="FILE", help="certify every tool of this catalogue (TOML, e.g. from "
                                                             "`catalogue from-mcp`), or just TOOL with its class there")
    certify.add_argument("--check", metavar="DIR", type=limits.path, help="check the certificates in DIR against the tools "
                                                                   "as they are now (stale or fresh)")
    certify.add_argument("--trials", type=int, default=DEFAULT_TRIALS, metavar="N",
                         help=f"argument draws per tool (default {DEFAULT_TRIALS}); kill trials come on top")
    certify.add_argument("--seed", type=int, help="seed of the draws (default: drawn and printed; 0 when CI is set)")
    certify.add_argument("--out", type=limits.path, default=Path("certificates"), metavar="DIR",
                         help="where the certificates go, one JSON file per tool (default ./certificates)")
    certify.add_argument("--no-kill", action="store_true", help="replays only: no call killed part-way")
    tools = certify.add_argument_group("tools outside the project")
    tools.add_argument("--python", type=limits.text, metavar="MODULE:FUNCTION",
                       help="a Python tool called as FUNCTION(world_dir, args[, tool=NAME])")
    tools.add_argument("--python-snapshot", type=limits.text, metavar="MODULE:FUNCTION",
                       help="FUNCTION(world_dir) -> the world's canonical state (default: every file under it)")
    tools.add_argument("--command", type=limits.text, dest="command_line", metavar="'ARGV'", help="a command run in the world directory; {args} is the "
                                                          "arguments as JSON (else on stdin), {world} and {tool} too")
    tools.add_argument("--snapshot-command", type=limits.text, metavar="'ARGV'",
                       help="prints the world's canonical state on stdout (default: every file under it)")
    tools.add_argument("--world", type=limits.text, metavar="DIR", help="each trial's world starts as a copy of DIR (default: empty)")
    tools.add_argument("--schema", type=limits.text, metavar="FILE.json", help="the arguments' JSON Schema (or TOOL -> schema)")
    mcp = certify.add_argument_group("a live MCP server (stdio, or streamable HTTP with --mcp-url)")
    mcp.add_argument("--mcp", type=limits.text, metavar="'CMD {world}'", help="the server's command; {world} is each trial's world "
                                                             "folder; certifies every tool it lists, or --tool NAME")
    mcp.add_argument("--mcp-url", type=limits.text, metavar="URL",
                     help="the server's streamable-HTTP endpoint: with --mcp, {port} in both is a free port for each "
                          "server killpoint starts; alone, a server you run, acting on the folder --world DIR names")
    mcp.add_argument("--mcp-protocol", choices=("auto", "handshake", "stateless"),
                     help="over HTTP: the stateless 2026-07-28 protocol, the initialize handshake, or auto "
                          "(default: server/discover first, as the MCP SDK does)")
    mcp.add_argument("--tool", type=limits.text, dest="tool_name", metavar="NAME", help="only this tool of the --mcp server")
    mcp.add_argument("--mcp-env", action="append", default=[], metavar="NAME=VALUE",
                     help="an environment variable for the server ({world} filled); repeat it")
    mcp.add_argument("--world-preset", choices=("files", "git"),
                     help="the world each trial makes: a few files (default) or a small git repository")
    mcp.add_argument("--allow-network", action="store_true",
                     help="run the tools that may reach the network (openWorldHint true, a URL argument)")
    mcp.add_argument("--call-timeout", type=float, metavar="S", help="seconds a call (or initialize) may take "
                                                                      "(default 30); past it the server is killed")
    certify.add_argument("--budget", type=float, metavar="S", help="seconds per tool; past them no new draw runs "
                                                                   "(default: 600 for --mcp, else none)")
    certify.add_argument("--write-catalogue", type=limits.path, metavar="FILE",
                         help="write a catalogue (TOML) of the classes the evidence supports")


def command_certify(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``killpoint certify`` as parsed; ConfigError for bad input (the caller prints it and exits 2)."""
    if args.tool_name:
        if args.tool and args.tool != args.tool_name:
            raise ConfigError(f"TOOL {args.tool!r} and --tool {args.tool_name!r}: name the tool once")
        args.tool = args.tool_name
    served = args.mcp or args.mcp_url  # a live server, over stdio or HTTP
    modes = [flag for flag, used in (("TOOL", args.tool and not args.catalogue and not served),
                                     ("--catalogue", args.catalogue), ("--check", args.check),
                                     ("--mcp" if args.mcp else "--mcp-url", served and not args.catalogue)) if used]
    if len(modes) != 1:
        raise ConfigError("certify what? give TOOL --claim CLASS, --catalogue FILE, or --check DIR (one of them)"
                          if not modes else f"{' and '.join(modes)} are exclusive")
    if args.check:
        return _check(args.check, out)
    from killpoint.harness.certify.adapters import ExternalSpec
    from killpoint.harness.certify.run import (catalogue_of, certify, claims_from_catalogue, claims_from_mcp,
                                               single_claim)

    _check_flags(args)
    _check_outputs(args)
    external = ExternalSpec(args.python, args.python_snapshot, args.command_line, args.snapshot_command, args.world,
                            args.schema, args.mcp, mcp_url=args.mcp_url, mcp_protocol=args.mcp_protocol,
                            mcp_env=tuple(args.mcp_env), world_preset=args.world_preset,
                            allow_network=args.allow_network, call_timeout=args.call_timeout)
    if args.catalogue:
        claims = claims_from_catalogue(args.catalogue, args.tool)
    elif served:
        claims = claims_from_mcp(external, args.tool, args.claim)
    else:
        claims = [single_claim(args.tool, args.claim)]
    _check_certificate_files(args.out, [claim.tool for claim in claims])
    budget = args.budget if args.budget is not None else DEFAULT_MCP_BUDGET_S if served else None
    seed = args.seed if args.seed is not None else CI_SEED if ci_profile() else random.SystemRandom().randrange(2**32)
    started = time.monotonic()

    def header() -> None:
        out.write(f"killpoint certify: {len(claims)} tool(s), {args.trials} draws each, seed {seed}"
                  f"{', no kills' if args.no_kill else ''}; certificates in {args.out}\n")
        if served:
            out.write(f"{'TOOL':<26} {'HINTS':<21} {'CLAIM':<17} {'VERDICT':<13} {'SUPPORTED':<17} {'TRIALS':>6} "
                      f"{'SECS':>5}  KILL LEFT / NOTE\n")
        else:
            out.write(f"{'TOOL':<24} {'CLAIM':<17} {'VERDICT':<13} {'SUPPORTED':<17} {'TRIALS':>6}  NOTE\n")

    def row(certified: Any) -> None:
        data = certified.certificate.data
        trials = f"{data['trials']['replay']}+{data['trials']['kill']}"
        if served:
            from killpoint.harness.certify.certificate import kills_left_text
            from killpoint.harness.certify.mcp import hints_text

            left = kills_left_text(data["kill_left"])
            note = _note(data)
            out.write(f"{data['tool']:<26} {hints_text(data['adapter'].get('annotations')):<21} {data['claim']:<17} "
                      f"{data['verdict']:<13} {data['strongest_supported'] or '-':<17} {trials:>6} "
                      f"{data['seconds']:>5.1f}  {left if left != '-' or not note else ''}"
                      f"{'; ' if left != '-' and note else ''}{note}\n")
        else:
            out.write(f"{data['tool']:<24} {data['claim']:<17} {data['verdict']:<13} "
                      f"{data['strongest_supported'] or '-':<17} {trials:>6}  {_note(data)}\n")
        out.flush()

    done = certify(claims, external, trials=args.trials, seed=seed, out=args.out, kill=not args.no_kill,
                   strict=not args.catalogue, budget_s=budget, on_start=header, on_done=row)
    for certified in done:
        _details(certified, out)
    counts = {verdict: sum(c.certificate.verdict == verdict for c in done)
              for verdict in ("CONFIRMED", "REFUTED", "INCONCLUSIVE")}
    conservative = sum(c.certificate.verdict == "CONSERVATIVE" for c in done)
    out.write(f"certify: {len(done)} tool(s): " + ", ".join(f"{n} {verdict}" for verdict, n in counts.items())
              + (f", {conservative} CONSERVATIVE" if conservative else "")
              + f" in {time.monotonic() - started:.1f}s; seed {seed}; certificates in {args.out}\n")
    if args.write_catalogue:
        args.write_catalogue.parent.mkdir(parents=True, exist_ok=True)
        args.write_catalogue.write_text(catalogue_of(done, served or args.catalogue or "the tools"))
        out.write(f"certify: wrote the evidenced classes of {len(done)} tool(s) to {args.write_catalogue}\n")
    unrunnable = sum(c.certificate.data["adapter"].get("adapter") == "none" for c in done)
    if unrunnable:
        out.write(f"certify: {unrunnable} tool(s) could not be run (none of the fake tools, no adapter given); "
                  f"{HOW_TO_RUN_THEM}\n")
    return exit_code(refuted=counts["REFUTED"] > 0, inconclusive=counts["INCONCLUSIVE"] > 0)


def exit_code(*, refuted: bool, inconclusive: bool) -> int:
    """1 if anything was refuted, else 3 if anything was left inconclusive, else 0."""
    return EXIT_REFUTED if refuted else EXIT_INCONCLUSIVE if inconclusive else EXIT_OK


def _check_flags(args: argparse.Namespace) -> None:
    problems = []
    if args.catalogue and args.claim:
        problems.append("--claim goes with TOOL alone; with --catalogue the catalogue gives each tool's class")
    problems += limits.number_problems((("--trials", "trials", args.trials), ("--seed", "seed", args.seed),
                                        ("--call-timeout", "call_timeout", args.call_timeout),
                                        ("--budget", "budget", args.budget)))
    if args.python_snapshot and not args.python:
        problems.append("--python-snapshot goes with --python")
    if args.snapshot_command and not args.command_line:
        problems.append("--snapshot-command goes with --command")
    served = args.mcp or args.mcp_url
    if args.world and not (args.python or args.command_line or served):
        problems.append("--world describes a tool run by --python, --command, --mcp or --mcp-url")
    if args.schema and not (args.python or args.command_line):
        problems.append("--schema describes a tool run by --python or --command (an MCP tool has its inputSchema)")
    mcp_only = [flag for flag, used in (("--mcp-env", args.mcp_env), ("--world-preset", args.world_preset),
                                        ("--allow-network", args.allow_network), ("--call-timeout", args.call_timeout))
                if used]
    if mcp_only and not served:
        problems.append(f"{', '.join(mcp_only)} go(es) with --mcp or --mcp-url")
    if args.mcp_protocol and not args.mcp_url:
        problems.append("--mcp-protocol goes with --mcp-url (a stdio server speaks the handshake)")
    if served and args.claim and not args.tool:
        problems.append(f"--claim with {'--mcp' if args.mcp else '--mcp-url'} needs the tool (--tool NAME); without "
                        f"it each tool's hints give its claim")
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        raise ConfigError(f"certify: {len(problems)} problems with the flags", tuple(problems))


def _check_outputs(args: argparse.Namespace) -> None:
    """--out and --write-catalogue can be written, checked as ``run`` checks its outputs: before any work, not
    after the certification, with a traceback."""
    check_outputs(folders=[("--out", args.out)],
                  files=[("--write-catalogue", args.write_catalogue, "catalogue.toml")], makes_folders=True)


def _check_certificate_files(out: Path, tools: list[str]) -> None:
    """Each tool's certificate can be written into ``out`` (``certificate_file_problems``), before the first trial."""
    from killpoint.harness.certify.certificate import certificate_file_problems

    problems = certificate_file_problems(out, tools)
    if problems:
        raise ConfigError(f"--out {out}: {len(problems)} certificate(s) cannot be written there; nothing was run",
                          tuple(problems))


def _note(data: dict[str, Any]) -> str:
    """The verdict's note (``_verdict_note``), then the debris a kill left that the replay survived, if any."""
    from killpoint.harness.certify.certificate import debris_text  # loaded by now: the certificates were made

    return "; ".join(part for part in (_verdict_note(data), debris_text(data.get("debris") or [])) if part)


def _verdict_note(data: dict[str, Any]) -> str:
    from killpoint.harness.certify.certificate import NOTHING_SEEN  # loaded by now: the certificates were made

    hint = data.get("hint") or {}
    if hint.get("contradiction"):
        verb = "safer than MCP hint " if data["verdict"] == "CONSERVATIVE" else "contradicts MCP hint "
        return verb + ", ".join(hint.get("hints", []))
    if data["reason"].startswith("skipped: "):
        return data["reason"]
    if data["verdict"] == "CONFIRMED" and data["interactive"]:
        return "interactive: RETRY"
    if data["reason"].startswith("looks over-cautious"):
        return "over-cautious? VERIFY could be RETRY"
    if data["verdict"] == "INCONCLUSIVE" and data["reason"].startswith(NOTHING_SEEN):
        return "no change seen, and no evidence of READ_ONLY"
    if data["verdict"] == "CONFIRMED":
        return ""
    reason = data["reason"]
    return reason if len(reason) <= 60 else reason[:60].rsplit(" ", 1)[0] + " ..."


def _details(certified: Any, out: TextIO) -> None:
    """The counterexample (REFUTED) or the reason (INCONCLUSIVE), and the line that reproduces it."""
    data = certified.certificate.data
    if certified.replaced_stale:
        out.write(f"\n{data['tool']}: the certificate it replaced was {certified.replaced_stale}\n")
    _debris_details(data, out)
    if data["verdict"] == "CONFIRMED":
        return
    out.write(f"\n{data['verdict']} {data['tool']}: claimed {data['claim']}; "
              f"the evidence supports {data['strongest_supported'] or 'nothing yet'}\n  {data['reason']}\n")
    example = data.get("counterexample")
    if example:
        out.write(f"  check: {example['check']}\n")
        out.writelines(f"  setup: {step['tool']} {json.dumps(step['args'], ensure_ascii=False)}\n"
                       for step in example.get("setup") or ())
        out.write(f"  args: {json.dumps(example['args'], ensure_ascii=False)}\n")
        kill = example.get("kill")
        if kill:
            from killpoint.harness.certify.certificate import point_text

            where = f"point {kill['point']}, {point_text(kill['label'])}" if kill.get("point") else f"{kill['after_ms']} ms"
            out.write(f"  killed at {where}\n")
        out.writelines(f"  {title}:\n" + "".join(f"    {line}\n" for line in lines or ["(no difference)"]) for title, lines in example["diffs"].items())
    hint = data.get("hint") or {}
    if hint.get("contradiction"):
        out.write(f"  {hint['contradiction']}\n")
    out.write(f"  certificate: {certified.path}\n  reproduce: {data['reproduce']}\n")


def _debris_details(data: dict[str, Any], out: TextIO) -> None:
    """Each kill that left debris the replay survived: a crash-safety finding, whatever the verdict."""
    found = [entry for entry in data.get("debris") or [] if entry.get("replay_ok")]
    if not found:
        return
    from killpoint.harness.certify.certificate import point_text

    out.write(f"\nDEBRIS {data['tool']}: a kill left files the replay did not remove (not a repeated effect: "
              f"the verdict stands; a crash-safety finding)\n")
    kills: dict[str, list[dict[str, Any]]] = {}  # one line per (files, kill point): a timed kill is one per delay
    for entry in found:
        where = (f"point {entry['kill_at']}, {point_text(entry['kill_label'])}" if entry.get("kill_at")
                 else f"{entry.get('kill_after_ms')} ms")
        kills.setdefault(f"{' '.join(entry['files'])}: killed at {where}", []).append(entry)
    for line, entries in kills.items():
        times = f" ({len(entries)} kills)" if len(entries) > 1 else ""
        out.write(f"  {line}{times}; args: {json.dumps(entries[0]['args'], ensure_ascii=False)}\n")


def _check(folder: Path, out: TextIO) -> int:
    from killpoint.harness.certify.run import check_folder

    rows = check_folder(folder)
    out.write(f"{'TOOL':<24} {'VERDICT':<13} STATUS\n")
    out.writelines(f"{row.tool:<24} {row.verdict:<13} {row.status}\n" for row in rows)
    bad = [row for row in rows if not row.ok]
    out.write(f"certify --check: {len(rows)} certificate(s), {len(bad)} stale, refuted or uncheckable in {folder}\n")
    return exit_code(refuted=bool(bad), inconclusive=any(row.verdict == "INCONCLUSIVE" for row in rows))

