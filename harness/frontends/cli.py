"""The ``killpoint`` command.

Exit codes (``EXIT_CODES``, also in ``--help``, say each): 0 passed, 1 a
rule was broken (only then: a red result is a real bug), 2 bad input, 3 not
established (a run unknown, too little coverage, no kill landed), 4 the harness
failed, 5 a repro token did not reproduce, 130/143 stopped by SIGINT/SIGTERM, 141
stopped because the output was closed.
Bad input never shows a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import TextIO

from killpoint.errors import ConfigError, HarnessError, InfrastructureError, InternalError
from killpoint.harness.certify.cli import add_certify_parser, command_certify
from killpoint.harness.config import defaults, limits
from killpoint.harness.config.scenario import load_scenario, scenario_from_flags, unlisted_tools_note, with_workload
from killpoint.harness.databases import postgres
from killpoint.harness.execute.leftovers import sweep_temp_folders, temp_roots
from killpoint.harness.execute.runner import sweep_abandoned_control_dirs
from killpoint.harness.execute.scratch import sweep_abandoned
from killpoint.harness.execute.session import SessionInterrupted
from killpoint.harness.execute.stop_signals import Terminated, stop_signals
from killpoint.harness.frontends.catalogue_cli import add_catalogue_parser, command_catalogue
from killpoint.harness.frontends.outputs import check_outputs
from killpoint.harness.frontends.retention import prune
from killpoint.harness.frontends.spec import run_spec, spec_for_token, spec_from_args
from killpoint.harness.model import (BACKENDS, RESTART_MODES, RESULTS, AfterDelay, GoldenRun, RunOutcome, Scenario,
                                     parse_kill)
from killpoint.harness.reporting import coverage
from killpoint.harness.reporting.progress import SessionPrinter
from killpoint.harness.reporting.report import describe_failure, session_fields, write_json_report, write_timeline
from killpoint.harness.reporting.show import add_show_parser, command_show
from killpoint.harness.reporting.summary import Summary, summarise
from killpoint.harness.repro.reproduced import reproduction
from killpoint.harness.repro.safety import RUN_EMBEDDED_FLAG, repro_line, scenario_for_token
from killpoint.harness.repro.token import ReproToken
from killpoint.harness.schedules.schedule import EveryKill, format_schedule

EXIT_PASSED, EXIT_VIOLATION, EXIT_USAGE, EXIT_NOT_ESTABLISHED, EXIT_INFRASTRUCTURE = 0, 1, 2, 3, 4
EXIT_CODES = """exit codes:
  0  every run passed (and the --min-coverage gate, if given, was met)
  1  a recovery rule was broken: a real bug, with the command that reproduces it
  2  bad input (the message names the file, line, field or flag), or a workload that
     cannot run its plan even without a crash
  3  nothing broken, but not established either: a run could not be judged (unknown:
     its evidence is missing or untrusted, the reason is printed), coverage below
     --min-coverage, or no scheduled kill landed
  4  the harness itself failed (a process survived SIGKILL, the fork server died): no verdict
  5  killpoint repro: the token did not reproduce (the run passed, or broke other
     properties than the token recorded); the message says which
  130, 143  stopped by Ctrl-C (SIGINT) or SIGTERM: the runs under way are killed and marked
     interrupted (interrupted.json in their directory), the finished runs' evidence is kept
  141  stopped because the output was closed (`killpoint run --machine | head`)"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="killpoint", description="Kill agent runtimes mid-tool-call and judge their recovery.",
                                     epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="kill a workload at crash points and judge every recovery",
                              epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("scenario", nargs="?", type=limits.text, help="a scenario file (scenarios/*.toml)")
    source = run.add_argument_group("workload")
    source.add_argument("--workload", type=limits.text, help="command that starts the runtime under test (with a scenario: replaces its workload)")
    source.add_argument("--plan", type=limits.text, help="plan JSON, with --workload")
    source.add_argument("--catalogue", type=limits.text, help="catalogue (TOML or protocol JSON), with --workload; default: the reference one")
    source.add_argument("--backend", choices=BACKENDS, help=f"how incarnations run (default: {defaults.BACKEND_HELP})")
    _container_flags(source)
    schedules = run.add_argument_group("schedules")
    schedules.add_argument("--kill-at", action="append", default=[], type=limits.text, metavar="KILL",
                           help="kill there; repeat for later incarnations: c3:after_effect, after_decisions, "
                                "c3:after_started+ (next point), @0.05 (seconds), ledger:effect:c3; /now kills with "
                                "no pause (c3:after_effect/now); /torn:500 tears; /power loses what was never fsynced")
    schedules.add_argument("--kill-on", action="append", default=[], type=limits.text, metavar="EVENT",
                           help="kill as soon as the journal or ledger shows EVENT (journal:started:c5, ledger:effect:c3)")
    schedules.add_argument("--exhaustive", action="store_true", help="every schedule of up to --depth kills at reached points")
    schedules.add_argument("--depth", type=int, metavar="K", help=f"kills per schedule for --exhaustive (default {defaults.DEPTH})")
    schedules.add_argument("--random", type=int, metavar="N", help="N runs with kills drawn from --seed")
    schedules.add_argument("--timed", action="store_true",
                           help="kill at seeded delays with no rendezvous (alone: --runs N runs; with --random: mixed in)")
    schedules.add_argument("--runs", type=int, metavar="N", help=f"runs of --timed alone (default {defaults.TIMED_RUNS})")
    schedules.add_argument("--timed-window", type=float, metavar="S",
                           help="with --timed: draw delays in [0, S] from the start of work (default: --timed alone "
                                "kills in a drawn stretch between two of the crash-free run's crash points, counted from "
                                "the first; mixed into --random, or with no crash points, in its working period)")
    schedules.add_argument("--torn-tail", action="store_true", help="tear the journal's last record after kills that follow a write")
    schedules.add_argument("--no-pause", action="store_true", help=defaults.NO_PAUSE_HELP)
    schedules.add_argument("--no-share-prefixes", action="store_true",
                           help="with --exhaustive: run every incarnation of every schedule, rather than start a "
                                "deeper schedule from the state its shorter one's kills left")
    schedules.add_argument("--power-loss", action="store_true", help=defaults.POWER_LOSS_HELP)
    schedules.add_argument("--drift", type=limits.text, metavar="TOOL=CLASS", help="hand recovery incarnations a catalogue where TOOL has CLASS")
    schedules.add_argument("--seed", type=int, help=f"seed of --random/--timed (default: {defaults.SEED_HELP})")
    output = run.add_argument_group("output")
    output.add_argument("--timeout", type=float, metavar="S",
                        help="seconds one incarnation may take, less what it waits for a power loss's lazy file system")
    output.add_argument("--min-coverage", type=float, metavar="PCT",
                        help="exit 3 unless runs killed at least PCT%% (0-100) of the crash-free run's crash points")
    output.add_argument("--keep-all", action="store_true",
                        help="keep every run's whole evidence (default: a passing run keeps only its verdict.json)")
    output.add_argument("-x", "--exitfirst", action="store_true", help="stop after the first failing run")
    output.add_argument("-j", "--jobs", type=int, metavar="N", help=f"run N schedules in parallel (default {defaults.JOBS_HELP})")
    output.add_argument("--shard", metavar="K/N", help="run only shard K of N (CI matrix jobs; the shards partition the set)")
    output.add_argument("--runs-dir", type=limits.path, help=f"where run evidence goes (default {defaults.RUNS_DIR_HELP})")
    output.add_argument("--scratch", type=limits.path, metavar="DIR", help=defaults.SCRATCH_HELP)
    output.add_argument("--no-scratch", action="store_true", help=defaults.NO_SCRATCH_HELP)
    output.add_argument("--json", type=limits.path, metavar="REPORT.json", help="write the full report as JSON")
    output.add_argument("--html", type=limits.path, metavar="REPORT.html", help="write a self-contained HTML report")
    modes = output.add_mutually_exclusive_group()
    modes.add_argument("-q", "--quiet", action="store_true", help="print only failing runs and the summary line")
    modes.add_argument("--machine", action="store_true", help="print one JSON line per finished run, then a summary line")

    hunt = commands.add_parser("hunt", help="search plans x schedules with Hypothesis; shrink what fails")
    hunt.add_argument("scenarios", nargs="+", type=limits.path, help="scenario files whose calls and worlds the plans draw from")
    hunt.add_argument("--workload", type=limits.text, help="the runtime to hunt in (default: the first scenario's)")
    hunt.add_argument("--examples", type=int, default=defaults.HUNT_EXAMPLES, metavar="N",
                      help=f"examples to try (default {defaults.HUNT_EXAMPLES})")
    hunt.add_argument("--max-calls", type=int, default=defaults.HUNT_MAX_CALLS, metavar="K",
                      help=f"longest plan drawn (default {defaults.HUNT_MAX_CALLS})")
    hunt.add_argument("--seed", type=int, default=defaults.HUNT_SEED, help=f"Hypothesis seed (default {defaults.HUNT_SEED})")
    hunt.add_argument("--out", type=limits.path, default=Path("."), help="where the shrunk scenario file goes (default .)")
    hunt.add_argument("--no-pause", action="store_true", help=defaults.NO_PAUSE_HELP)
    hunt.add_argument("--power-loss", action="store_true", help=defaults.POWER_LOSS_HELP)

    repro = commands.add_parser("repro", help="rerun exactly the run a token names and print its timeline")
    repro.add_argument("token")
    repro.add_argument(RUN_EMBEDDED_FLAG, action="store_true",
                       help="run the workload command the token carries (shown first); without it only a scenario "
                            "file's own workload or one shipped with killpoint runs")
    repro.add_argument("--backend", choices=BACKENDS, help="override the token's backend")
    _container_flags(repro)
    repro.add_argument("--runs-dir", type=limits.path)

    merge = commands.add_parser("merge", help="combine the JSON reports of one session's shards into one verdict, "
                                              "summary, coverage map and report",
                                epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    merge.add_argument("reports", nargs="+", type=limits.path, metavar="REPORT.json",
                       help="the report of each shard (killpoint run --shard K/N --json REPORT.json)")
    merge.add_argument("--min-coverage", type=float, metavar="PCT",
                       help="exit 3 unless the shards together killed at least PCT%% (0-100) of the crash-free "
                            "run's crash points")
    merge.add_argument("--json", type=limits.path, metavar="REPORT.json", help="write the merged report as JSON")
    merge.add_argument("--html", type=limits.path, metavar="REPORT.html", help="write the merged self-contained HTML report")
    merge_modes = merge.add_mutually_exclusive_group()
    merge_modes.add_argument("-q", "--quiet", action="store_true", help="print only failing runs and the summary line")
    merge_modes.add_argument("--machine", action="store_true",
                             help="print one JSON line per run, then a summary line")

    prune = commands.add_parser("prune", help="remove old sessions' evidence from a runs directory")
    prune.add_argument("--runs-dir", type=limits.path, default=Path("killpoint-runs"),
                       help="the folder of sessions (default ./killpoint-runs)")
    prune.add_argument("--keep", type=int, metavar="N", help="keep the N newest sessions")
    prune.add_argument("--older-than", type=float, metavar="DAYS", help="remove sessions older than DAYS days")

    clean = commands.add_parser("clean", help="remove what killpoint harnesses now gone left: their containers (by "
                                              "label), incarnation cgroups, scratch folders in /dev/shm, control "
                                              "and temporary folders (certify, MCP, store copies), and unmount lazy "
                                              "file systems (--power-loss) whose daemon is gone; a live session's "
                                              "are left alone")
    clean.add_argument("--all", action="store_true", help="also the containers of harnesses still running")
    image = commands.add_parser("image", help="the docker backend's local image (built here, never pulled)")
    image.add_argument("action", choices=["build"], help="build: (re)build it from an empty root filesystem")
    image.add_argument("--tag", type=limits.image_tag, default="killpoint-host:1",
                       help="image name (default killpoint-host:1)")
    add_catalogue_parser(commands)
    add_certify_parser(commands)
    add_show_parser(commands)
    return parser


def _container_flags(group: argparse._ActionsContainer) -> None:
    group.add_argument("--image", type=limits.image_reference,
                       help="with --backend docker: a local image (default killpoint-host:1, built here)")
    group.add_argument("--restart", choices=RESTART_MODES,
                       help="with --backend docker: a new container per incarnation (default) or the killed one again")


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    _escape_what_cannot_be_encoded(out, sys.stdout, sys.stderr)
    args = build_parser().parse_args(argv)
    try:
        with stop_signals():  # SIGTERM ends a command as Ctrl-C does
            return _command(args, out)
    except InfrastructureError as error:
        print(f"killpoint: the harness failed, so there is no verdict: {error}", file=sys.stderr)
        return EXIT_INFRASTRUCTURE
    except InternalError:  # handled where it is raised: one that reaches here is a bug, not bad input
        return _harness_bug()
    except HarnessError as error:
        print(f"killpoint: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as interrupt:  # SIGINT, or SIGTERM raised as stop_signals.Terminated
        return interrupted_exit(interrupt)
    except BrokenPipeError:  # the reader of the output stopped reading (`| head`): stop, as a pipe's writer does
        _silence_stdout()
        print("killpoint: stopped: the output was closed (broken pipe); the runs that finished keep their evidence",
              file=sys.stderr)
        return 128 + signal.SIGPIPE
    except Exception:  # a bug in killpoint itself: no verdict, and never exit 1, which means a broken rule
        return _harness_bug()


def _harness_bug() -> int:
    """Print the error being handled, a bug in killpoint, and say there is no verdict."""
    traceback.print_exc()
    print("killpoint: the harness failed (the traceback above is a bug in killpoint), so there is no verdict",
          file=sys.stderr)
    return EXIT_INFRASTRUCTURE


def _escape_what_cannot_be_encoded(*streams: TextIO) -> None:
    """Print a character the output cannot encode as a backslash escape, never fail on it: killpoint prints text
    it did not write (a token or a message read from a run directory, where a lone surrogate is valid JSON; a
    workload's stderr), and a UnicodeEncodeError would end the command halfway, with a traceback and no verdict."""
    for stream in streams:
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


def _command(args: argparse.Namespace, out: TextIO) -> int:
    commands = {"run": command_run, "hunt": command_hunt, "clean": command_clean, "image": command_image,
                "catalogue": command_catalogue, "certify": command_certify, "merge": command_merge,
                "prune": command_prune, "show": command_show}
    return commands.get(args.command, command_repro)(args, out)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of it does not fail on the closed pipe."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def interrupted_exit(interrupt: KeyboardInterrupt) -> int:
    """Say what an interrupted command finished and left; the exit code is 128 + the signal's number."""
    signum = (interrupt.signum if isinstance(interrupt, SessionInterrupted)
              else signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT)
    name = signal.Signals(signum).name
    if isinstance(interrupt, SessionInterrupted):
        counts = ", ".join(f"{sum(outcome.result == result for outcome in interrupt.outcomes)} {result}"
                           for result in RESULTS)
        marked = "".join(f"\n  {run_dir}" for run_dir in interrupt.interrupted)
        print(f"killpoint: stopped by {name}: {len(interrupt.outcomes)} run(s) finished ({counts}); "
              f"{len(interrupt.interrupted)} under way killed and marked interrupted{marked}", file=sys.stderr)
    else:
        print(f"killpoint: stopped by {name}", file=sys.stderr)
    return 128 + signum


def scenario_of(args: argparse.Namespace) -> Scenario:
    if args.scenario:
        if args.plan or args.catalogue:
            raise ConfigError("--plan and --catalogue go with --workload alone; a scenario file names its own")
        scenario = load_scenario(args.scenario)
        if args.workload:
            scenario = with_workload(scenario, args.workload)
    elif args.workload and args.plan:
        scenario = scenario_from_flags(args.workload, args.plan, args.catalogue)
    else:
        raise ConfigError("nothing to run: give a scenario file (killpoint run scenarios/demo.toml) "
                          "or --workload 'CMD' --plan PLAN.json [--catalogue FILE]")
    return scenario


def report_files(args: argparse.Namespace) -> list[tuple[str, Path | None, str]]:
    """The reports ``run`` and ``merge`` write, as ``check_outputs`` takes them."""
    return [("--json", args.json, "report.json"), ("--html", args.html, "report.html")]


def command_run(args: argparse.Namespace, out: TextIO) -> int:
    check_outputs(folders=[("--runs-dir", args.runs_dir)], files=report_files(args))
    spec = spec_from_args(args, scenario_of(args))
    printer = SessionPrinter(out, mode="machine" if args.machine else "quiet" if args.quiet else "normal")
    scenario = spec.scenario
    printer.header(f"killpoint: {scenario.name}: {spec.describe()}; {spec.describe_backend()}; "
                   f"evidence in {spec.runs_dir}")
    if (unlisted := unlisted_tools_note(scenario.plan, scenario.catalogue)) is not None:
        printer.header(unlisted)
    started = time.monotonic()
    with printer:
        golden, outcomes = run_spec(spec, on_outcome=printer.on_outcome, track=printer.track)
    summary = summarise(golden, outcomes, time.monotonic() - started)
    if args.json:
        write_json_report(args.json, scenario, golden, outcomes, summary, session_fields(spec))
    if args.html:
        from killpoint.harness.reporting.html_report import write_html_report

        write_html_report(args.html, scenario, golden, outcomes, summary)
    printer.finish(scenario, golden, outcomes, summary, show_coverage=args.exhaustive)
    if (empty := spec.empty_shard(golden, outcomes)) is not None:
        print(f"killpoint: not established: {empty}", file=sys.stderr)
        return EXIT_NOT_ESTABLISHED
    return session_exit(summary, golden, outcomes, spec.min_coverage)


def command_hunt(args: argparse.Namespace, out: TextIO) -> int:
    limits.check_numbers((("--examples", "examples", args.examples), ("--max-calls", "max_calls", args.max_calls),
                          ("--seed", "seed", args.seed)))
    check_outputs(folders=[("--out", args.out)])
    # Imported here, not at the top: it imports Hypothesis, 0.2 s of every session's start.
    from killpoint.harness.schedules.hunt import hunt

    started = time.monotonic()
    result = hunt(args.scenarios, args.workload, args.out, max_examples=args.examples,
                  max_calls=args.max_calls, seed=args.seed,
                  every_kill=EveryKill(no_pause=args.no_pause, power_loss=args.power_loss))
    seconds = time.monotonic() - started
    found = result.found
    if found is None and result.unknown:
        out.write(f"hunt: no failure in {result.examples} examples ({seconds:.1f}s), but {result.unknown} could not "
                  f"be judged (unknown), so nothing is established\n")
        return EXIT_NOT_ESTABLISHED
    if found is None:
        out.write(f"hunt: no failure in {result.examples} examples ({seconds:.1f}s)\n")
        return EXIT_PASSED
    failure = found.example
    out.write(f"hunt: found and shrank a failure in {seconds:.1f}s: {len(failure.plan.calls)} call(s), "
              f"kill at {format_schedule(failure.schedule)}{f', drift {failure.drift}' if failure.drift else ''}\n")
    out.writelines(f"  {call.call_id}: {call.tool} {json.dumps(call.args)}\n" for call in failure.plan.calls)
    out.writelines(f"  [{finding.property}] {finding.message}\n" for finding in found.verdict.findings)
    out.write(f"scenario file: {found.scenario_file}\n")
    out.write(f"evidence: {found.evidence}\n")
    out.write(f"reproduce: {repro_line(found.token)}\n")
    return EXIT_VIOLATION


def command_repro(args: argparse.Namespace, out: TextIO) -> int:
    check_outputs(folders=[("--runs-dir", args.runs_dir)])
    token = ReproToken.decode(args.token)
    scenario, notice = scenario_for_token(token, run_embedded_command=args.run_embedded_command)
    if notice:
        out.write(f"{notice}\n")
    if scenario.plan.digest != token.plan_digest:
        raise ConfigError(f"the token does not reproduce: the plan changed since it was made "
                          f"(token pins plan {token.plan_digest}, {scenario.name} now hashes to {scenario.plan.digest})")
    if scenario.catalogue_digest != token.catalogue_digest:
        raise ConfigError(f"the token does not reproduce: the catalogue changed since it was made "
                          f"(token pins {token.catalogue_digest}, now {scenario.catalogue_digest})")
    spec = spec_for_token(token, scenario, backend=args.backend, image=args.image, restart=args.restart,
                          runs_dir=args.runs_dir)
    out.write(f"killpoint repro: {scenario.name}, {spec.describe()}"
              f"{f', seed {token.seed}' if token.seed is not None else ''}{f', drift {spec.drift}' if spec.drift else ''}"
              f"; {spec.describe_backend()}; evidence in {spec.runs_dir}\n")
    if any(isinstance(kill := parse_kill(text), AfterDelay) and kill.after is None for text in token.schedule):
        out.write("note: this workload never announced crash points, so the timed kill is replayed by time "
                  "and may land elsewhere\n")
    _, (outcome,) = run_spec(spec)
    write_timeline(outcome, out)
    if outcome.unreached:
        out.write(f"note: kill(s) {', '.join(outcome.unreached)} never came this time\n")
    if not outcome.verdict.valid:
        describe_failure(outcome, out)
    code, message = reproduction(token.expect, outcome.verdict, outcome.unreached)
    out.write(f"{message}\n")
    return code


def command_merge(args: argparse.Namespace, out: TextIO) -> int:
    """``killpoint merge``: the shards' reports judged as their one session, exiting as ``killpoint run`` would."""
    from killpoint.harness.reporting.merge import merge_reports, write_merged_json

    limits.check_numbers((("--min-coverage", "min_coverage", args.min_coverage),))
    check_outputs(files=report_files(args))
    merged = merge_reports(args.reports)
    scenario, golden, outcomes, summary = merged.scenario, merged.golden, list(merged.outcomes), merged.summary
    printer = SessionPrinter(out, mode="machine" if args.machine else "quiet" if args.quiet else "normal",
                             progress_bar=False)
    printer.header(f"killpoint merge: {merged.describe()}")
    for outcome in outcomes:
        printer.on_outcome(outcome)
    printer.finish(scenario, golden, outcomes, summary, show_coverage=True)
    if args.json:
        write_merged_json(args.json, merged)
    if args.html:
        from killpoint.harness.reporting.html_report import write_html_report

        write_html_report(args.html, scenario, golden, outcomes, summary)
        if missing := merged.evidence_missing():
            print(f"killpoint: the evidence of {len(missing)} failing or unknown run(s) is not here (first: "
                  f"{missing[0]}), so the HTML report draws their timelines empty; download each shard's runs "
                  f"directory with its report (docs/ci.md)", file=sys.stderr)
    incomplete = merged.incomplete()
    for gap in incomplete:
        print(f"killpoint: the merged session is incomplete: {gap}", file=sys.stderr)
    if incomplete and not summary.failed:  # a failure among the shards given is a real bug all the same
        return EXIT_NOT_ESTABLISHED
    return session_exit(summary, golden, outcomes, args.min_coverage)


def session_exit(summary: Summary, golden: GoldenRun, outcomes: list[RunOutcome], min_coverage: float | None) -> int:
    """A judged session's exit code, saying on stderr why one is not established (``EXIT_CODES``)."""
    if summary.failed:
        return EXIT_VIOLATION
    if summary.unknown:
        reasons = "; ".join(f"{reason} ({count})" for reason, count in summary.unknown_reasons.items())
        print(f"killpoint: {summary.unknown} run(s) could not be judged, so nothing is established: {reasons}",
              file=sys.stderr)
        return EXIT_NOT_ESTABLISHED
    shortfall = coverage.untested(golden, outcomes, min_coverage)
    if shortfall is not None:
        print(f"killpoint: not enough was tested: {shortfall}", file=sys.stderr)
        return EXIT_NOT_ESTABLISHED
    return EXIT_PASSED


def command_prune(args: argparse.Namespace, out: TextIO) -> int:
    """``killpoint prune``: remove whole old sessions from a runs directory, saying which."""
    if args.keep is None and args.older_than is None:
        raise ConfigError("killpoint prune: say what goes: --keep N (the N newest sessions stay) and/or "
                          "--older-than DAYS (older sessions go)")
    limits.check_numbers((("--keep", "keep", args.keep), ("--older-than", "older_than", args.older_than)))
    removed = prune(args.runs_dir, keep=args.keep, older_than_days=args.older_than)
    out.writelines(f"removed {session}\n" for session in removed)
    out.write(f"killpoint prune: {len(removed)} session(s) removed from {args.runs_dir}\n")
    return EXIT_PASSED


def command_image(args: argparse.Namespace, out: TextIO) -> int:
    """``killpoint image build``: the docker backend's local image."""
    from killpoint.harness.backends import _engine

    image_id = _engine.build_host_image(_engine.connect(), args.tag)
    out.write(f"killpoint image build: {args.tag} ({image_id[:19]}), an empty root filesystem imported with no "
              f"registry; the docker backend mounts the host's /usr, Python and project into it read-only\n")
    return EXIT_PASSED


def command_clean(args: argparse.Namespace, out: TextIO) -> int:
    """``killpoint clean``: remove what harnesses now gone left (``harness/execute/leftovers.py``), never a live one's.

    Docker is asked last and only if an engine answers: a host with no engine has no containers to remove.
    """
    from killpoint.errors import ConfigError as NoEngine
    from killpoint.harness.backends import _cgroup, _engine
    from killpoint.harness.faults import lazyfs

    gone = "of a harness process now gone"
    out.writelines(f"removed {path}, the control directory {gone}\n" for path in sweep_abandoned_control_dirs())
    out.writelines(f"removed {path}, the scratch folder {gone}\n" for path in sweep_abandoned())
    out.writelines(f"removed {path}, a temporary folder {gone}\n" for path in sweep_temp_folders())
    out.writelines(f"stopped and removed {path}, a PostgreSQL cluster {gone}\n"
                   for root in temp_roots() for path in postgres.sweep(root))
    for cgroup, killed in _cgroup.sweep_abandoned():
        out.write(f"removed {cgroup}, an incarnation cgroup {gone}" + (f"; killed {'; '.join(killed)}" if killed
                                                                       else "") + "\n")
    out.writelines(f"unmounted {mount}\n" for mount in lazyfs.unmount_stale(Path("/")))
    try:
        client = _engine.connect()
    except NoEngine:
        out.write("killpoint clean: no Docker engine answers, so there are no containers to remove\n")
        return EXIT_PASSED
    removed = _engine.remove_leftovers(client, everything=args.all)
    out.writelines(f"removed {description}\n" for description in removed)
    out.write(f"killpoint clean: {len(removed)} container(s) removed\n")
    return EXIT_PASSED


if __name__ == "__main__":
    sys.exit(main())
