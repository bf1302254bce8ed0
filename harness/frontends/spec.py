"""What session to run: one frozen ``SessionSpec``, built by one function from the CLI's flags or the plugin's options.

``killpoint run`` and ``repro``, the pytest plugin, the bench scripts and the soak
all describe a session as a ``SessionSpec`` and run it with ``run_spec``.
``build_spec`` is the one place that turns choices into a spec: its keywords are
the destinations of ``killpoint run``'s flags (``CHOICES``), so the CLI passes its
namespace and the plugin maps its options and keywords onto the same names. It
applies every default (``defaults``), and a choice that would not act in the mode
chosen is a usage error naming its flag, never silently ignored.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from random import SystemRandom
from typing import Any

from killpoint import protocol
from killpoint.errors import ConfigError
from killpoint.harness.backends import default_backend
from killpoint.harness.config import defaults
from killpoint.harness.config.limits import LIMITS, check_numbers
from killpoint.harness.config.scenario_fields import EXHAUSTIVE, GIVEN, RANDOM, file_schedule_mode
from killpoint.harness.execute.point_snapshots import copy_for_every_kill
from killpoint.harness.execute.scratch import chosen_root, default_root
from killpoint.harness.execute.session import default_runs_dir, run_session
from killpoint.harness.faults import lazyfs
from killpoint.harness.frontends._ci import CI_SEED, ci_profile
from killpoint.harness.model import Drift, GoldenRun, JobBatches, RunOutcome, Scenario, TornTail
from killpoint.harness.repro.token import ReproToken
from killpoint.harness.schedules.explore import (ExhaustiveMode, GivenMode, RandomMode, ScheduleMode, TimedMode,
                                                 parse_shard, shard_of_first_kill, sharded, with_schedules)
from killpoint.harness.schedules.schedule import EveryKill, RandomFaults, has_power_loss, parse_kill_point


@dataclass(frozen=True)
class SessionSpec:
    """Everything that decides what a session runs and where its evidence goes; equal specs run the same session."""

    scenario: Scenario  # with the --timeout chosen applied
    mode: ScheduleMode  # GivenMode, ExhaustiveMode, RandomMode or TimedMode, with its parameters and seed
    backend: str
    runs_dir: Path
    backend_options: dict[str, str] = field(default_factory=dict)  # docker: image, restart
    drift: Drift | None = None  # the catalogue change recovery incarnations are handed
    jobs: int = defaults.JOBS
    keep_all: bool = False  # keep passing runs' whole evidence, not only their verdict.json
    stop_at_first_failure: bool = False
    shard: tuple[int, int] | None = None  # (K, N): only shard K of N
    min_coverage: float | None = None  # percent of the crash-free run's crash points to kill, or no gate
    no_pause: bool = False  # every crash-point kill is /now: the workload kills itself at the point, no pause
    power_loss: bool = False  # every kill is /power: what the runtime never made durable is lost at it
    scratch: Path | None = None  # where runs with no power loss are carried out (execute/scratch.py); None: in runs_dir

    @property
    def needs_rendezvous(self) -> bool:
        return self.mode.needs_rendezvous

    @property
    def power_losses(self) -> bool:
        """Whether any kill of the session is a power loss: its crash-free run is then carried out on the lazy
        file system too, so that its times are the storage's the runs have."""
        return self.power_loss or (isinstance(self.mode, GivenMode) and has_power_loss(self.mode.schedule))

    @property
    def holds_golden(self) -> bool:
        """Whether the crash-free run is held at each point for the runs whose first kill is there
        (``point_snapshots``): an exhaustive sweep that shares prefixes, whose kills pause at their points (not
        ``--no-pause``, no power loss) and whose runs' first incarnations are the crash-free run's (no drift
        changes a catalogue the run directory holds)."""
        return (isinstance(self.mode, ExhaustiveMode) and self.mode.share_prefixes and not self.no_pause
                and not self.power_loss and self.drift is None)

    def golden_holds_for(self) -> Callable[[str], bool] | None:
        """The first kills (as text) the crash-free run is held at the point of, if ``holds_golden``: with
        ``--shard K/N``, only this shard's, since no other shard's run takes a copy this session made."""
        if not self.holds_golden:
            return None
        if self.shard is None:
            return copy_for_every_kill
        shard, shards = self.shard
        return lambda kill: shard_of_first_kill(kill, shards) == shard

    @property
    def every_kill(self) -> EveryKill:
        return EveryKill(no_pause=self.no_pause, power_loss=self.power_loss)

    def describe(self) -> str:
        """``exhaustive to depth 1, no pause, shard 2/3``: what the session runs."""
        return (self.mode.describe() + str(self.every_kill)
                + (f", shard {self.shard[0]}/{self.shard[1]}" if self.shard else ""))

    def describe_backend(self) -> str:
        """``backend docker (image killpoint-host:1, restart same)``: what a header line says."""
        details = ", ".join(f"{key} {value}" for key, value in sorted(self.backend_options.items()))
        return f"backend {self.backend}" + (f" ({details})" if details else "")

    def empty_shard(self, golden: GoldenRun, outcomes: Sequence[RunOutcome]) -> str | None:
        """Why this session's shard established nothing, if it held no schedule at all, else None.

        Shards are drawn by a hash of each schedule's first kill, so a shard of a small
        session may hold none: its run then judged nothing, which is no pass.
        """
        if self.shard is None or outcomes:
            return None
        first = next(self.mode.batches(self.scenario.plan, self.drift)(golden), [])
        shard, shards = self.shard
        deeper = " (and the deeper ones that grow from them)" if isinstance(self.mode, ExhaustiveMode) \
            and self.mode.depth > 1 else ""
        return (f"shard {shard}/{shards} holds no schedule: all {len(first)} schedule(s) of the session{deeper} "
                f"fall in the other shards (by a hash of each one's first kill), so nothing was tested here; "
                f"split the session into fewer shards than {shards}, or run it whole")

    def batches(self) -> JobBatches:
        batches = self.mode.batches(self.scenario.plan, self.drift)
        if self.no_pause or self.power_loss:
            batches = with_schedules(batches, self.every_kill.apply)
        return sharded(batches, *self.shard) if self.shard else batches


def run_spec(spec: SessionSpec, *, on_outcome: Callable[[RunOutcome], None] = lambda outcome: None,
             track: Callable[[JobBatches], JobBatches] = lambda batches: batches) -> tuple[GoldenRun, list[RunOutcome]]:
    """Run the session ``spec`` describes; ``track`` wraps its batches (a progress bar, a bench's limit)."""
    return run_session(spec.scenario, track(spec.batches()), spec.runs_dir, backend_name=spec.backend,
                       backend_options=dict(spec.backend_options), jobs=spec.jobs,
                       needs_rendezvous=spec.needs_rendezvous, stop_at_first_failure=spec.stop_at_first_failure,
                       keep_all=spec.keep_all, scratch_root=spec.scratch, golden_on_lazy_fs=spec.power_losses,
                       hold_golden=spec.golden_holds_for(), on_outcome=on_outcome)


TIMED = "timed"  # only a flag chooses it; the file's modes are scenario_fields' GIVEN, EXHAUSTIVE and RANDOM


def build_spec(
    scenario: Scenario,
    *,
    kill_at: Sequence[str] = (),
    kill_on: Sequence[str] = (),
    exhaustive: bool = False,
    depth: int | None = None,
    random: int | None = None,
    timed: bool = False,
    runs: int | None = None,
    timed_window: float | None = None,
    torn_tail: bool = False,
    no_pause: bool = False,
    power_loss: bool = False,
    no_share_prefixes: bool = False,
    drift: str | None = None,
    seed: int | None = None,
    timeout: float | None = None,
    backend: str | None = None,
    image: str | None = None,
    restart: str | None = None,
    jobs: int | None = None,
    runs_dir: Path | None = None,
    keep_all: bool = False,
    scratch: Path | None = None,
    no_scratch: bool = False,
    exitfirst: bool = False,
    shard: str | None = None,
    min_coverage: float | None = None,
    session_seed: int | None = None,
) -> SessionSpec:
    """The session these choices ask for; ConfigError naming the flag for one that is bad or would not act.

    The keywords are ``killpoint run``'s flags (``--kill-at`` is ``kill_at``, ``-x``
    is ``exitfirst``, ``--random N`` is ``random``); None or empty means not chosen.
    The mode is the one chosen, else the scenario file's ``[schedule]``, else
    exhaustive. The seed of a mode that draws is ``seed``, else the file's, else
    ``session_seed`` (the plugin draws one per pytest session, so xdist workers
    agree), else 0 under CI, else drawn here. Runs are carried out in the
    ``scratch`` folder given, else in /dev/shm when it is a tmpfs with room
    (``scratch_root``), and never with ``no_scratch``.
    """
    _check_numbers(random=random, depth=depth, runs=runs, jobs=jobs, seed=seed, timeout=timeout,
                   timed_window=timed_window, min_coverage=min_coverage)
    if timeout is not None:
        scenario = replace(scenario, timeout_s=timeout)
    mode, chosen_by, default = _mode_chosen(scenario, kill_at or kill_on, exhaustive, random, timed)
    _check_choices_act(mode, chosen_by, depth=depth, random=random, timed=timed, runs=runs,
                       timed_window=timed_window, torn_tail=torn_tail, no_pause=no_pause, seed=seed,
                       min_coverage=min_coverage, shard=shard, no_share_prefixes=no_share_prefixes)
    parsed_drift = parse_drift(drift, scenario)
    if seed is None:
        seed = default.get("seed", session_seed)
    if seed is None:
        seed = CI_SEED if ci_profile() else SystemRandom().randrange(2**32)
    backend_name, backend_options = resolve_backend(scenario, backend, image=image, restart=restart)
    schedule_mode: ScheduleMode
    if mode == GIVEN:
        schedule_mode = GivenMode(tuple(parse_kill_point(text, scenario.plan)
                                        for text in [*kill_at, *kill_on] or default["kill_at"]))
        if no_pause and not schedule_mode.needs_rendezvous:
            raise ConfigError(f"--no-pause makes crash-point kills /now, but the kills of {chosen_by} "
                              f"({schedule_mode.describe()}) are timed or event kills, which never pause; drop it")
    elif mode == RANDOM:
        faults = RandomFaults(torn_rate=defaults.MIXED_FAULT_RATE if torn_tail else 0.0, tear_anywhere=power_loss,
                              timed_rate=defaults.MIXED_FAULT_RATE if timed else 0.0,
                              timed_window_s=(0.0, timed_window) if timed_window is not None else None)
        schedule_mode = RandomMode(random if random is not None else int(default["runs"]), seed, faults)
    elif mode == TIMED:
        schedule_mode = TimedMode(runs or defaults.TIMED_RUNS, seed, timed_window)
    else:
        # A container started again after its kill keeps what its own file system holds, and an agent's services
        # keep what its model received (and the responses a durable agent names by id), and a [database] keeps the
        # workload's state in a server, none of which a copy of the run directory carries: their runs share no prefix.
        schedule_mode = ExhaustiveMode(depth or int(default.get("depth", defaults.DEPTH)), torn=torn_tail,
                                       power_loss=power_loss, share_prefixes=not no_share_prefixes
                                       and backend_options.get("restart") != "same" and scenario.agent is None
                                       and scenario.database is None)
    if not power_loss:  # under --power-loss, a tear is a torn power loss: it tears any store, not killpoint's journal
        _check_tears_apply(scenario, torn_tail, schedule_mode)
    return probed(SessionSpec(
        scenario, schedule_mode, backend_name, runs_dir or default_runs_dir(scenario), backend_options,
        drift=parsed_drift, jobs=jobs or defaults.JOBS, keep_all=keep_all, stop_at_first_failure=exitfirst,
        shard=parse_shard(shard) if shard is not None else None, min_coverage=min_coverage, no_pause=no_pause,
        power_loss=power_loss, scratch=scratch_root(scratch, no_scratch=no_scratch, power_loss=power_loss,
                                                    backend=backend_name)))


def probed(spec: SessionSpec) -> SessionSpec:
    """``spec``, once a lazy file system is known to mount here if any of its kills is a power loss
    (LazyFsUnavailable, a usage error naming the cause and the fix, before anything runs)."""
    if spec.power_losses:
        lazyfs.probe()
    return spec


def scratch_root(chosen: Path | None, *, no_scratch: bool, power_loss: bool, backend: str) -> Path | None:
    """Where a session's runs are carried out (``harness/execute/scratch.py``): ``--scratch DIR``, else /dev/shm if it
    is a tmpfs with room; None (in the runs directory) with ``--no-scratch``, or when every kill is a power loss,
    which needs the disk's own file system under its lazy one.

    The docker backend uses scratch only when ``--scratch`` names it: its containers
    bind-mount the run directory, and an engine in a VM (Docker Desktop) or on
    another host shares the runs directory the user chose, rarely /dev/shm; its
    containers are labelled with the run directory, so that ``killpoint clean``
    names evidence that still exists; and a container's start, not a journal
    fsync, is what a Docker run waits for."""
    if chosen is not None and no_scratch:
        raise ConfigError(f"--scratch {chosen} and --no-scratch are exclusive; pick where runs are carried out")
    if chosen is not None and power_loss:
        raise ConfigError(f"--scratch {chosen}: a power-loss run is carried out on its runs directory's own file "
                          f"system (a lazy file system over it), never in scratch; drop --scratch")
    if no_scratch or power_loss:
        return None
    if chosen is not None:
        return chosen_root(chosen)
    return None if backend == "docker" else default_root()


def _check_tears_apply(scenario: Scenario, torn_tail: bool, mode: ScheduleMode) -> None:
    """A torn tail cuts killpoint's journal.jsonl; a runtime judged from a store of its own is not torn by it."""
    if scenario.journal is None or (scenario.journal.format == "killpoint"  # the [journal] format of it
                                    and scenario.journal.path in (None, protocol.JOURNAL_NAME)):
        return
    given = mode.schedule if isinstance(mode, GivenMode) else ()
    torn = ("--torn-tail" if torn_tail else
            next((f"--kill-at {kill}" for kill in given if isinstance(kill.fault, TornTail)), None))
    if torn is not None:
        raise ConfigError(f"{torn}: a torn tail cuts the last record of killpoint's {protocol.JOURNAL_NAME}, but "
                          f"{scenario.name} is judged from its runtime's own store (journal.format = "
                          f"{scenario.journal.format!r}), which killpoint does not tear; drop the tear")


def spec_for_token(token: ReproToken, scenario: Scenario, *, backend: str | None = None, image: str | None = None,
                   restart: str | None = None, runs_dir: Path | None = None) -> SessionSpec:
    """The one run a repro token names, on its backend unless ``backend`` is chosen; its whole evidence is kept
    (the timeline is read from it, and it is what was asked for)."""
    schedule = tuple(parse_kill_point(text, scenario.plan) for text in token.schedule)
    backend_name, backend_options = resolve_backend(scenario, backend, image=image, restart=restart,
                                                    fallback=token.backend, fallback_options=token.backend_options)
    return probed(SessionSpec(scenario, GivenMode(schedule, token.seed, token.run or 0), backend_name,
                              runs_dir or default_runs_dir(scenario), backend_options,
                              drift=parse_drift(token.drift, scenario), keep_all=True))


# The choices a flag of ``killpoint run`` sets: build_spec's keywords, named as the flags' destinations.
CHOICES = tuple(name for name, parameter in inspect.signature(build_spec).parameters.items()
                if parameter.kind is parameter.KEYWORD_ONLY and name != "session_seed")


def spec_from_args(args: argparse.Namespace, scenario: Scenario) -> SessionSpec:
    """The session ``killpoint run``'s parsed flags ask for."""
    return build_spec(scenario, **{name: getattr(args, name) for name in CHOICES})


def _mode_chosen(scenario: Scenario, kills: Sequence[str], exhaustive: bool, random: int | None,
                 timed: bool) -> tuple[str, str, dict[str, Any]]:
    """(how schedules are chosen, what chose it, the scenario's [schedule] when that chose).

    The one mode flag given chooses, else the scenario file's [schedule], else exhaustive.
    """
    chosen = [(flag, mode) for flag, mode, used in (
        ("--kill-at/--kill-on", GIVEN, bool(kills)), ("--exhaustive", EXHAUSTIVE, exhaustive),
        ("--random", RANDOM, random is not None), ("--timed", TIMED, timed and random is None)) if used]
    if len(chosen) > 1:
        raise ConfigError(f"{' and '.join(flag for flag, _ in chosen)} are exclusive; pick one way to choose schedules")
    if chosen:
        return chosen[0][1], chosen[0][0], {}
    default = scenario.default_schedule
    if not default:
        return EXHAUSTIVE, f"the default, --{EXHAUSTIVE}", default  # as file_schedule_mode defaults
    mode = file_schedule_mode(default)
    return mode, f"{scenario.name}'s [schedule] " + ("kill_at" if mode == GIVEN else f"({mode})"), default


def _check_choices_act(mode: str, chosen_by: str, *, depth: int | None, random: int | None, timed: bool,
                       runs: int | None, timed_window: float | None, torn_tail: bool, no_pause: bool,
                       seed: int | None, min_coverage: float | None, shard: str | None,
                       no_share_prefixes: bool) -> None:
    """A usage error for every choice made that would not act in ``mode``: none is ever silently ignored."""
    timed_kills = mode == TIMED or (mode == RANDOM and timed)
    rules = (
        ("--depth", depth is not None, mode == EXHAUSTIVE, "--exhaustive (it sets the kills per schedule)"),
        ("--runs", runs is not None, mode == TIMED, "--timed alone (with --random N, N is the number of runs)"),
        ("--timed-window", timed_window is not None, timed_kills, "--timed (alone, or mixed into --random)"),
        ("--torn-tail", torn_tail, mode in (EXHAUSTIVE, RANDOM),
         "--exhaustive or --random (a given kill tears with /torn:N, e.g. --kill-at c3:after_finished/torn:500)"),
        ("--seed", seed is not None, mode in (RANDOM, TIMED), "--random or --timed (nothing else is drawn)"),
        ("--no-share-prefixes", no_share_prefixes, mode == EXHAUSTIVE,
         "--exhaustive (its deeper schedules start from the state their shorter ones' kills left)"),
        ("--no-pause", no_pause, mode != TIMED,
         "kills at crash points (--exhaustive, --random, --kill-at); a timed kill never pauses"),
    )
    problems = [f"{flag} goes with {needs}, but this run's schedules come from {chosen_by}"
                for flag, given, acts, needs in rules if given and not acts]
    if min_coverage is not None and shard is not None:
        problems.append("--min-coverage judges the coverage of a whole session, and --shard runs only part of it; "
                        "drop one of them")
    if problems:
        raise ConfigError(f"{len(problems)} flag(s) would not act in this run; drop them, or choose the mode they "
                          f"go with", tuple(problems))


def _check_numbers(*, random: int | None, depth: int | None, runs: int | None, jobs: int | None, seed: int | None,
                   timeout: float | None, timed_window: float | None, min_coverage: float | None) -> None:
    """Every number given within its bound of ``limits.LIMITS``, the table scenario files are checked with too."""
    if depth is not None and isinstance(depth, int) and depth > LIMITS["depth"].high:
        raise ConfigError(f"--depth {depth}: each level multiplies the schedules by the crash points reached, "
                          f"about P^{depth} schedules for a plan with P points (the demo's 30 points give 533 "
                          f"schedules at depth 2, about 15,000 at depth 3); give 1..{LIMITS['depth'].high}")
    check_numbers((
        ("--random", "runs", random), ("--depth", "depth", depth), ("--runs", "runs", runs), ("--jobs", "jobs", jobs),
        ("--seed", "seed", seed), ("--timeout", "timeout", timeout), ("--timed-window", "timed_window", timed_window),
        ("--min-coverage", "min_coverage", min_coverage)))


def resolve_backend(scenario: Scenario, backend: str | None, *, image: str | None = None, restart: str | None = None,
                    fallback: str | None = None, fallback_options: dict[str, str] | None = None,
                    ) -> tuple[str, dict[str, str]]:
    """The backend and its options: the choice, else ``fallback`` (a token's), else the scenario file's, else
    ``default_backend`` (``defaults.BACKEND_HELP``); options: the choices, else ``fallback_options`` when the
    fallback is the backend chosen, else the scenario file's image."""
    name = backend or fallback or scenario.backend or default_backend(scenario.workload)
    if name == "docker" and scenario.database is not None:
        raise ConfigError(f"{scenario.origin.get('scenario', scenario.name)}: [database]: a container cannot reach the "
                          "database server killpoint runs on a Unix socket of the host; run it with --backend "
                          "forkserver or subprocess")
    if name != "docker":
        given = [flag for flag, value in (("--image", image), ("--restart", restart)) if value is not None]
        if given:
            raise ConfigError(f"{' and '.join(given)} choose how containers run, so they go with --backend docker; "
                              f"this run's backend is {name}")
    kept = fallback_options if fallback_options and name == fallback else {}
    options = {"image": image or kept.get("image") or (scenario.image if name == "docker" else None),
               "restart": restart or kept.get("restart")}
    return name, {key: value for key, value in options.items() if value is not None}


def parse_drift(text: str | None, scenario: Scenario) -> Drift | None:
    """``TOOL=CLASS`` checked against the scenario: the plan calls TOOL, and CLASS changes its class."""
    if text is None:
        return None
    tool, _, new_class = text.partition("=")
    if new_class not in protocol.CLASSES:
        raise ConfigError(f"--drift {text!r}: write TOOL=CLASS with CLASS one of {', '.join(protocol.CLASSES)}")
    if tool not in {call.tool for call in scenario.plan.calls}:
        raise ConfigError(f"--drift {text!r}: the plan calls no tool {tool!r}")
    if scenario.catalogue.class_of(tool) == new_class:
        raise ConfigError(f"--drift {text!r}: {tool} is already {new_class}; drift must change its class")
    return Drift(tool, new_class)
