"""The ``killpoint`` command: run, repro.

Exit codes: 0 every run passed; 1 a rule was broken (or a run could not be
judged); 2 bad input or a workload that cannot run its task even without a
crash. Bad input never shows a traceback.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
import random
import sys
import time
from pathlib import Path
from typing import TextIO

from harness.errors import ConfigError, HarnessError
from harness.report import describe_failure, summary_line, write_json_report, write_timeline
from harness.scenario import Scenario, load_scenario, scenario_from_flags, scenario_from_origin, with_workload
from harness.schedule import derived_seed, exhaustive, format_schedule, parse_kill_point, random_schedule
from harness.session import Job, RunOutcome, default_runs_dir, run_session
from harness.token import ReproToken

EXIT_PASSED, EXIT_VIOLATION, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="killpoint", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="kill a workload at crash points and judge every recovery")
    run.add_argument("scenario", nargs="?", help="a scenario file (scenarios/*.toml)")
    run.add_argument("--workload", help="command that starts the runtime under test (with a scenario: replaces its workload)")
    run.add_argument("--plan", help="plan JSON, with --workload")
    run.add_argument("--catalogue", help="catalogue (TOML or protocol JSON), with --workload; default: the reference one")
    run.add_argument("--kill-at", action="append", default=[], metavar="CALL:POINT",
                     help="kill there; repeat for later incarnations (e.g. c3:after_effect)")
    run.add_argument("--exhaustive", action="store_true", help="every single-kill schedule: every call x every point")
    run.add_argument("--random", type=int, metavar="N", help="N runs with kill points drawn from --seed")
    run.add_argument("--seed", type=int, help="seed of --random (default: drawn and printed)")
    run.add_argument("--timeout", type=float, metavar="S", help="seconds one incarnation may take")
    run.add_argument("--runs-dir", type=Path, help="where run evidence goes (default ./killpoint-runs/...)")
    run.add_argument("--json", type=Path, metavar="REPORT.json", help="write the full report as JSON")

    repro = commands.add_parser("repro", help="rerun exactly the run a token names and print its timeline")
    repro.add_argument("token")
    repro.add_argument("--runs-dir", type=Path)
    return parser


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            return command_run(args, out)
        return command_repro(args, out)
    except HarnessError as error:
        print(f"killpoint: {error}", file=sys.stderr)
        return EXIT_USAGE


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
    if args.timeout is not None:
        if args.timeout <= 0:
            raise ConfigError(f"--timeout {args.timeout}: give a positive number of seconds")
        scenario = replace(scenario, timeout_s=args.timeout)
    return scenario


def jobs_of(args: argparse.Namespace, scenario: Scenario, out: TextIO) -> tuple[list[Job], str]:
    """The schedules asked for, by flags or else by the scenario's [schedule] table."""
    chosen = [flag for flag, used in (("--kill-at", args.kill_at), ("--exhaustive", args.exhaustive),
                                      ("--random", args.random is not None)) if used]
    if len(chosen) > 1:
        raise ConfigError(f"{' and '.join(chosen)} are exclusive; pick one way to choose schedules")
    default = scenario.default_schedule
    kill_at = args.kill_at or (default.get("kill_at", []) if not chosen else [])
    if kill_at:
        schedule = tuple(parse_kill_point(text, scenario.plan) for text in kill_at)
        return [Job(0, schedule)], f"schedule {format_schedule(schedule)}"
    runs = args.random if args.random is not None else (default.get("runs") if default.get("mode") == "random" and not chosen else None)
    if runs is not None:
        if runs < 1:
            raise ConfigError(f"--random {runs}: give a positive number of runs")
        seed = args.seed if args.seed is not None else default.get("seed", random.SystemRandom().randrange(2**32))
        jobs = [Job(index, random_schedule(scenario.plan, derived_seed(seed, index)), derived_seed(seed, index))
                for index in range(runs)]
        return jobs, f"{runs} random schedules, seed {seed}"
    jobs = [Job(index, schedule) for index, schedule in enumerate(exhaustive(scenario.plan))]
    return jobs, f"{len(jobs)} schedules (exhaustive)"


def command_run(args: argparse.Namespace, out: TextIO) -> int:
    scenario = scenario_of(args)
    jobs, described = jobs_of(args, scenario, out)
    runs_dir = args.runs_dir or default_runs_dir(scenario)
    out.write(f"killpoint: {scenario.name}: {described}; evidence in {runs_dir}\n")
    started = time.monotonic()

    def report(outcome: RunOutcome) -> None:
        if not outcome.verdict.valid:
            describe_failure(outcome, out)

    golden, outcomes = run_session(scenario, jobs, runs_dir, on_outcome=report)
    seconds = time.monotonic() - started
    if args.json:
        write_json_report(args.json, scenario, golden, outcomes, seconds)
    out.write(summary_line(outcomes, seconds) + "\n")
    failures = [outcome for outcome in outcomes if not outcome.verdict.valid]
    if failures:
        out.write(f"first failure reproduces with: killpoint repro {failures[0].token}\n")
        return EXIT_VIOLATION
    return EXIT_PASSED


def command_repro(args: argparse.Namespace, out: TextIO) -> int:
    token = ReproToken.decode(args.token)
    scenario = scenario_from_origin(token.origin)
    if scenario.plan.digest != token.plan_digest:
        raise ConfigError(f"the token does not reproduce: the plan changed since it was made "
                          f"(token pins plan {token.plan_digest}, {scenario.name} now hashes to {scenario.plan.digest})")
    if scenario.catalogue_digest != token.catalogue_digest:
        raise ConfigError(f"the token does not reproduce: the catalogue changed since it was made "
                          f"(token pins {token.catalogue_digest}, now {scenario.catalogue_digest})")
    schedule = tuple(parse_kill_point(text, scenario.plan) for text in token.schedule)
    runs_dir = args.runs_dir or default_runs_dir(scenario)
    out.write(f"killpoint repro: {scenario.name}, kill at {format_schedule(schedule)}"
              f"{f', seed {token.seed}' if token.seed is not None else ''}; evidence in {runs_dir}\n")
    _, (outcome,) = run_session(scenario, [Job(0, schedule, token.seed)], runs_dir)
    write_timeline(outcome, out)
    if outcome.unreached:
        out.write(f"note: kill point(s) {', '.join(outcome.unreached)} were not reached this time\n")
    if not outcome.verdict.valid:
        describe_failure(outcome, out)
        return EXIT_VIOLATION
    if token.expect:
        out.write(f"did not reproduce: the token recorded {', '.join(token.expect)}, and this run passed. "
                  f"The plan and catalogue are unchanged, so the workload itself now behaves differently "
                  f"at this kill point{' (the point was not reached)' if outcome.unreached else ''}.\n")
    return EXIT_PASSED


if __name__ == "__main__":
    sys.exit(main())
