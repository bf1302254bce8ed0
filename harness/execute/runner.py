"""The runner: launches incarnations through a backend, waits for each kill's moment, restarts.

``carry_out_schedule`` carries out one schedule in one run directory and leaves all
its evidence there; it judges nothing. Each incarnation (``_one_incarnation``)
is launched by the backend; the rendezvous server decides the moment; the
nemesis strikes (kills through the backend, confirms, and writes down what it
did: kill markers, journal copies, torn tails, copies of a runtime's own
store). How an incarnation is watched besides its kill is a strategy
(``_Watch``): armed at its kill alone, measured for its working period (the
crash-free run), or held at every point for the snapshots of shared prefixes.
``incarnations.json`` is rewritten as each incarnation ends, so a harness
killed mid-run leaves a readable list of those it finished.

A ``[journal]`` scenario's runtime writes no killpoint journal: an incarnation
of it that exits 0 has completed the task, and its store is copied once more
when the run ends (``store-final``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from killpoint import protocol
from killpoint.client import ArmedPoints
from killpoint.errors import WorkloadError
from killpoint.fake_tools.world import World, seed_world
from killpoint.harness._safe_files import read_bounded, write_fresh
from killpoint.harness.agents.scenario_table import script_plan
from killpoint.harness.agents.services import TOOLS_URL_ENV, AgentServices, ToolServices
from killpoint.harness.backends import Backend, Launched
from killpoint.harness.databases.run_database import LocalServerDatabase, RunDatabase, open_run_database
from killpoint.harness.execute._escapees import RunFiles
from killpoint.harness.execute.leftovers import abandoned_folders
from killpoint.harness.execute.rendezvous import RendezvousServer, Served, work_began
from killpoint.harness.execute.run_record import write_json_atomically
from killpoint.harness.execute.watch import EventWatcher
from killpoint.harness.faults import nemesis
from killpoint.harness.faults.nemesis import StoreDump
from killpoint.harness.faults.lazyfs import LazyMount
from killpoint.harness.faults.power_loss import MAX_STORAGE_TIMEOUTS, Disks, StorageWait
from killpoint.harness.judge.evidence import read_lines
from killpoint.harness.judge.stores import AgentSeams, AgentStore
from killpoint.harness.layout import RunPaths
from killpoint.harness.model import (AfterDelay, AtPoint, DatabaseStoreReader, Drift, GoldenRun, Incarnation, Kill,
                                     OnEvent, PowerLoss, Scenario)
from killpoint.harness.schedules.schedule import Schedule, has_power_loss

STDERR_TAIL_BYTES = 600
_PYTHON_WORD = re.compile(r"^python[\d.]*$")  # python, python3, python3.12: {python} expands to such a path


def prepare_run_dir(scenario: Scenario, run_dir: Path, drift: Drift | None) -> RunPaths:
    """Lay out a fresh run directory: plan, catalogue(s), seeded world, empty ledger, no incarnation yet.

    ``run_dir`` may already exist holding the session's ``run.json`` (what the
    run is, written before its first launch); a ``workload`` folder already
    there (a run directory used before) is refused with FileExistsError.
    """
    paths = RunPaths(run_dir)
    paths.workload.mkdir(parents=True)
    paths.plan.write_text(scenario.plan_file_text)
    paths.catalogue.write_text(scenario.catalogue_file_text)
    if drift is not None:
        drifted = scenario.catalogue.with_class(drift.tool, drift.new_class)
        paths.drifted_catalogue.write_text(json.dumps(drifted.to_protocol(), indent=1))
    seed_world(paths.world, scenario.world_files, scenario.world_state)
    paths.ledger.touch()
    save_incarnations(paths.incarnations, [])
    return paths


def save_incarnations(path: Path, incarnations: list[Incarnation]) -> None:
    """Replace ``path`` with the list of ``incarnations`` at once: a reader finds the old list or the new, whole."""
    write_json_atomically(path, [incarnation.to_json() for incarnation in incarnations], indent=None)


def task_completed(journal_path: Path) -> bool:
    """The journal holds a task COMPLETED record (asked after every incarnation that ended on its own)."""
    try:
        data = read_bounded(journal_path)
    except OSError:  # absent, or refused (a symlink, a FIFO): no completion can be read from it
        return False
    if protocol.COMPLETED.encode() not in data:  # the common case, decided without parsing a line
        return False
    return any(
        line.get("kind") == protocol.TASK and line.get("status") == protocol.COMPLETED
        for line in read_lines(journal_path).lines
    )


def completed_task(scenario: Scenario, incarnation: Incarnation, journal_path: Path) -> bool:
    """``incarnation``, which ended on its own, completed the task: it exited 0, if the runtime keeps its own
    store (``[journal]``, whose word on completion is the checker's to weigh), else it journaled task COMPLETED."""
    if scenario.journal is not None:
        return incarnation.exit_code == 0 and not incarnation.timed_out
    return task_completed(journal_path)


def store_dump(scenario: Scenario, database: RunDatabase | None) -> StoreDump | None:
    """How the runtime's store is dumped at each kill when it lives in the run's database; None when not."""
    reader = scenario.journal.reader if scenario.journal is not None else None
    if database is None or not isinstance(reader, DatabaseStoreReader):
        return None
    return functools.partial(database.dump, reader.dump_queries(scenario.plan))


def store_files(scenario: Scenario) -> tuple[str, ...] | None:
    """The files of the runtime's own store to copy at each kill and at the end; None without ``[journal]``."""
    return scenario.journal.reader.files(scenario.plan) if scenario.journal is not None else None


def agent_store(scenario: Scenario) -> AgentStore | None:
    """The store an agent scenario's ``[agent] store`` names; None: none, or no agent."""
    reader = scenario.journal.reader if scenario.journal is not None else None
    return reader.own if isinstance(reader, AgentSeams) else None


def stderr_tail(path: Path) -> str:
    with path.open("rb") as stream:
        stream.seek(max(0, path.stat().st_size - STDERR_TAIL_BYTES))
        return stream.read().decode(errors="replace").strip()


def armed_points(kill: Kill | None) -> str | None:
    """``$KILLPOINT_ARMED`` for an incarnation that ``kill`` ends (None: one that runs to its end); None: unset.

    Only a kill at a crash point is armed there (a ``/now`` one with ``"now": true``: the workload kills
    itself there, no reply awaited); an incarnation with no kill waits nowhere. A timed or event kill, and a kill after a point (whose next
    point may come from another process, which cannot know the first passed),
    keep v1's wait at every point, so they land where they always did.
    """
    if kill is None:
        return json.dumps({"at": []})
    if isinstance(kill, AtPoint):
        return json.dumps({"at": [[kill.point, kill.call]], **({protocol.ARMED_NOW: True} if kill.now else {})})
    return None


def _environment(paths: RunPaths, control: Path, number: int, drift: Drift | None, *,
                 world_durable: bool = False, armed: str | None = None) -> dict[str, str]:
    """The protocol environment of incarnation ``number``; ``paths`` are the run's, under its resolved directory."""
    catalogue = paths.drifted_catalogue if drift is not None and number > 0 else paths.catalogue
    return {
        **({protocol.ENV_WORLD_DURABLE: "1"} if world_durable else {}),
        **({protocol.ENV_ARMED: armed} if armed is not None else {}),
        protocol.ENV_RUN_DIR: str(paths.workload),
        protocol.ENV_PLAN: str(paths.plan),
        protocol.ENV_CATALOGUE: str(catalogue),
        protocol.ENV_WORLD: str(paths.world),
        protocol.ENV_LEDGER: str(paths.ledger),
        protocol.ENV_CONTROL: str(control),
        protocol.ENV_INCARNATION: str(number),
        "PYTHONHASHSEED": "0",
    }


# A run's rendezvous socket lives in a directory of the temporary folder, short enough for a socket path;
# named kp-<pid of the process running the run>-..., so that one left by a killed harness can be told from a live one.
CONTROL_DIR_PREFIX = "kp-"
SOCKET_PATH_MAX = 107  # bytes of a Unix socket's path (sun_path), less its NUL


def control_root() -> Path:
    """The temporary folder if a socket path in it fits (a test or CI may set a deep TMPDIR), else /tmp."""
    root = Path(tempfile.gettempdir())
    room = len(f"/{CONTROL_DIR_PREFIX}{2**22}-xxxxxxxx/control.sock")
    return root if len(str(root).encode()) + room <= SOCKET_PATH_MAX or not os.access("/tmp", os.W_OK) else Path("/tmp")


def sweep_abandoned_control_dirs() -> list[Path]:
    """Remove the control directories whose owner process is gone (a SIGKILLed harness cannot); return them."""
    removed = []
    for path in abandoned_folders(control_root(), CONTROL_DIR_PREFIX):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
    return removed


class PointWatch(Protocol):
    """Watches the incarnation after a run's last kill at each point it waits at (``point_snapshots.py``)."""

    def on_point(self, point: str, call: str | None, served: Served) -> object: ...

    def finish(self, incarnation: Incarnation) -> object: ...


class Sharing(Protocol):
    """What a run whose children start from its state saves for them (``harness/execute/prefixes.py``)."""

    @property
    def holds_points(self) -> bool:
        """Whether the incarnation after the last kill is watched (``snapshots``)."""

    def after_last_kill(self, run_dir: Path, incarnations: list[Incarnation], control_dir: Path) -> bool:
        """Save the state the last kill left; whether it could stand in for a run's own."""

    def snapshots(self, run_dir: Path, incarnations: list[Incarnation], control_dir: Path, launched: Launched,
                  started: float, store: tuple[str, ...] | None,
                  paused: Callable[[], contextlib.AbstractContextManager[bool]]) -> PointWatch:
        """The watch of the incarnation just launched after the last kill, from a state that stands in; ``paused``
        holds off the tool service's calls while a state is copied."""


def carry_out_schedule(scenario: Scenario, schedule: Schedule, run_dir: Path, backend: Backend, *,
                       drift: Drift | None = None, max_incarnations: int | None = None,
                       resumed: Sequence[Incarnation] = (), sharing: Sharing | None = None) -> list[Incarnation]:
    """Carry out ``schedule`` against the workload in ``run_dir``; return what each incarnation did.

    With ``resumed``, ``run_dir`` already holds the state those incarnations (the
    first of ``schedule``'s kills, or all of them) left, restored from a shared
    prefix (``harness/execute/prefixes.py``), and the run goes on from the next. With
    ``sharing``, the run saves the state its last kill left, and then the
    incarnation after it waits at every point, where ``sharing``'s watch sees it.
    """
    return _run_incarnations(scenario, schedule, run_dir, backend, drift=drift, max_incarnations=max_incarnations,
                             resumed=resumed, sharing=sharing)


def _run_incarnations(scenario: Scenario, schedule: Schedule, run_dir: Path, backend: Backend, *,
                      drift: Drift | None = None, max_incarnations: int | None = None, work: _WorkWatch | None = None,
                      resumed: Sequence[Incarnation] = (), sharing: Sharing | None = None, on_lazy_fs: bool = False,
                      ) -> list[Incarnation]:
    """``carry_out_schedule``, with ``work`` watching the first incarnation's working period; on a lazy file
    system if ``schedule`` has a power loss, or ``on_lazy_fs``."""
    bound = max_incarnations or len(schedule) + scenario.max_extra_incarnations
    with _opened(scenario, run_dir, backend, drift, resumed=bool(resumed),
                 on_lazy_fs=on_lazy_fs or has_power_loss(schedule)) as run:
        run.incarnations += resumed
        # Whether the state the incarnation after the last kill starts from stands in for the run's own: restored
        # whole from a snapshot, saved by ``sharing`` after the last kill, or (no kill) the fresh run directory.
        stands_in = len(run.incarnations) == len(schedule)
        for number in range(len(run.incarnations), bound):
            kill: Kill | None = schedule[number] if number < len(schedule) else None
            holds = sharing is not None and sharing.holds_points and stands_in and number == len(schedule)
            snapshots = _SnapshotWatch(sharing, run) if sharing is not None and holds else None
            watch = (work.holding(snapshots) if work is not None and number == 0
                     else snapshots or ARMED_AT_KILL)
            incarnation = _one_incarnation(run, number, kill, watch)
            run.incarnations.append(incarnation)
            save_incarnations(run.paths.incarnations, run.incarnations)
            watch.recorded(incarnation)
            if sharing is not None and incarnation.killed_at is not None and number == len(schedule) - 1:
                stands_in = sharing.after_last_kill(run.run_dir, run.incarnations, run.control_dir)
            if incarnation.killed_at is None and completed_task(scenario, incarnation, run.paths.journal):
                break
        return run.incarnations


@dataclass
class _Run:
    """What the incarnations of one run share: its directory (resolved, so the paths handed to each incarnation
    are absolute and free of links the harness put there), its rendezvous, the services the workload calls, the
    lazy file system its power losses drop from, and the incarnations so far."""

    scenario: Scenario
    backend: Backend
    drift: Drift | None
    paths: RunPaths
    control_dir: Path
    server: RendezvousServer
    escapes: RunFiles  # what ties a process that escaped an incarnation to the run
    services: AgentServices | ToolServices
    files: tuple[str, ...] | None  # the runtime's own store's, copied at each kill; None: it keeps none
    disks: Disks | None  # None: no power loss
    database: RunDatabase | None = None  # the scenario's [database], for the whole run
    dump: StoreDump | None = None  # a store in that database: its rows dumped into each copy
    incarnations: list[Incarnation] = field(default_factory=list)

    @property
    def run_dir(self) -> Path:
        return self.paths.run_dir

    @property
    def kills(self) -> int:
        """How many of the incarnations so far were killed: the number of the next kill."""
        return sum(1 for incarnation in self.incarnations if incarnation.killed_at is not None)


@contextlib.contextmanager
def _opened(scenario: Scenario, run_dir: Path, backend: Backend, drift: Drift | None, *, resumed: bool,
            on_lazy_fs: bool) -> Iterator[_Run]:
    """A run in ``run_dir`` (laid out afresh unless ``resumed``), its store copied once more when it ends, and
    everything it opened closed whatever happens."""
    run_dir = run_dir.resolve()
    paths = RunPaths(run_dir) if resumed else prepare_run_dir(scenario, run_dir, drift)
    control_dir = Path(tempfile.mkdtemp(prefix=f"{CONTROL_DIR_PREFIX}{os.getpid()}-", dir=control_root()))
    server = RendezvousServer(control_dir / "control.sock")
    # The fake tools over HTTP, and an agent's scripted model: its services write what the model received, saved
    # beside the copies of the agent's own store.
    classes = {call.tool: scenario.catalogue.class_of(call.tool) for call in scenario.plan.calls}
    services = (AgentServices.start(script_plan(scenario.plan, scenario.agent), paths.world, paths.ledger,
                                    server.path, classes=classes) if scenario.agent is not None else
                ToolServices.start(scenario.plan.to_json(), paths.world, paths.ledger, server.path, classes=classes))
    if isinstance(services, AgentServices) and (own := agent_store(scenario)) is not None:
        services.keep_store(own, scenario.plan, paths.workload)
    disks: Disks | None = None
    database: RunDatabase | None = None
    try:
        if on_lazy_fs:
            disks = mount_disks(run_dir, world=scenario.world_on_device)
        if scenario.database is not None:
            database = open_run_database(scenario.database, mount=(
                (lambda data: LazyMount.start(data, run_dir / LAZYFS_STATE / "database")) if on_lazy_fs else None))
            if disks is not None and isinstance(database, LocalServerDatabase):
                disks = replace(disks, database=database.server)
        run = _Run(scenario, backend, drift, paths, control_dir, server, RunFiles.of(run_dir, paths.workload),
                   services, store_files(scenario), disks, database, store_dump(scenario, database))
        yield run
        if run.files is not None:
            _copy_final_store(paths, run.files, run_dir, run.incarnations, run.dump)
        services.save(paths.store_final)
    finally:
        services.close()
        server.close()
        shutil.rmtree(control_dir, ignore_errors=True)
        try:
            if database is not None:
                database.close()  # the server first: its data folder's lazy file system goes with it
        finally:
            if disks is not None:
                disks.close()
            with contextlib.suppress(OSError):  # each mount removed its own state; their folder goes when empty
                (run_dir / LAZYFS_STATE).rmdir()


OnPoint = Callable[[str, "str | None", Served], object]


class _Watch:
    """How an incarnation is watched besides its kill: the runner's strategy for it. This one is every run's:
    the incarnation is armed at its kill's point alone (``armed_points``), and nothing else sees its points."""

    watches_work = False  # whether the evidence files are watched for its first write, whatever its kill

    def armed(self, kill: Kill | None) -> str | None:
        return armed_points(kill)

    def launched(self, launched: Launched, started: float) -> OnPoint | None:
        """What sees each point the incarnation just launched waits at; None: nothing."""
        return None

    def served(self, served: Served, watcher: EventWatcher | None) -> None:
        """The incarnation's rendezvous is over (and its event watcher closed)."""

    def recorded(self, incarnation: Incarnation) -> None:
        """What the incarnation did is in incarnations.json."""


ARMED_AT_KILL = _Watch()


class _WorkWatch(_Watch):
    """The crash-free run's: it waits at every point, as a timed kill's incarnation does, and its working period
    is measured (``work_period``), where timed kills are drawn. Held at each point besides (``holding``), the
    time it is held is the harness's, taken off its working period as the CPU readings' is."""

    watches_work = True

    def __init__(self) -> None:
        self.cpu_waits: CpuWaits | None = None
        self.period: WorkPeriod | None = None
        self.snapshots: _SnapshotWatch | None = None

    def holding(self, snapshots: _SnapshotWatch | None) -> _WorkWatch:
        """This watch, which also holds the incarnation at each point for ``snapshots`` (None: it holds nowhere)."""
        self.snapshots = snapshots
        return self

    def armed(self, kill: Kill | None) -> str | None:
        return None

    def launched(self, launched: Launched, started: float) -> OnPoint | None:
        cpu_waits = self.cpu_waits = CpuWaits(launched.pid)
        held = self.snapshots.launched(launched, started) if self.snapshots is not None else None
        if held is None:
            return cpu_waits.on_point

        def on_point(point: str, call: str | None, served: Served) -> None:
            reading = time.monotonic()
            cpu_waits.on_point(point, call, served)
            held(point, call, served)
            cpu_waits.reading_s[len(served.points) - 1] = time.monotonic() - reading

        return on_point

    def served(self, served: Served, watcher: EventWatcher | None) -> None:
        period = work_period(served, watcher, self.cpu_waits)
        if period is None or self.snapshots is None or self.cpu_waits is None:
            self.period = period
            return
        last = len(served.point_times) - 1  # held there after its last sign of work: not in the window
        held = sum(seconds for index, seconds in self.cpu_waits.reading_s.items() if index < last)
        self.period = replace(period, window_s=(0.0, round(max(0.0, period.window_s[1] - held), 4)))

    def recorded(self, incarnation: Incarnation) -> None:
        if self.snapshots is not None:
            self.snapshots.recorded(incarnation)


class _SnapshotWatch(_Watch):
    """The incarnation after a run's last kill, started from a state that stands in for the run's own: held at
    each point, where ``sharing``'s watch saves the state for the runs that kill there (``point_snapshots.py``)."""

    def __init__(self, sharing: Sharing, run: _Run) -> None:
        self.sharing, self.run = sharing, run
        self.watch: PointWatch | None = None

    def armed(self, kill: Kill | None) -> str | None:
        return None

    def launched(self, launched: Launched, started: float) -> OnPoint | None:
        run = self.run
        self.watch = self.sharing.snapshots(run.run_dir, run.incarnations, run.control_dir, launched, started,
                                            run.files, run.services.paused)
        return self.watch.on_point

    def recorded(self, incarnation: Incarnation) -> None:
        if self.watch is not None:
            self.watch.finish(incarnation)


def _one_incarnation(run: _Run, number: int, kill: Kill | None, watch: _Watch) -> Incarnation:
    """Launch incarnation ``number``, serve its rendezvous until ``kill``'s moment (or its end, or its timeout),
    strike it if that moment came, and say what it did."""
    scenario, paths, services = run.scenario, run.paths, run.services
    waited = StorageWait(run.disks, scenario.timeout_s) if run.disks is not None else None
    world_durable = run.disks is not None and run.disks.world is not None
    armed = watch.armed(kill)
    services.begin(number, ArmedPoints.parse(armed), world_durable=world_durable)
    started = time.monotonic()
    launched = run.backend.launch(
        scenario.workload, cwd=scenario.cwd,
        env=_environment(paths, run.server.path, number, run.drift, world_durable=world_durable, armed=armed)
        | services.environment()
        | ({protocol.ENV_DATABASE_URL: run.database.workload_url} if run.database is not None else {}),
        stdout=run.run_dir / f"incarnation-{number}.stdout", stderr=run.run_dir / f"incarnation-{number}.stderr")
    on_point = watch.launched(launched, started)
    event = kill if isinstance(kill, OnEvent) else None
    # A timed kill counts from a crash point it names, or from the moment work began, and the crash-free run's
    # working period is measured from it (``work_began``): only a watcher sees it in a workload that announces
    # no crash point.
    watcher = (EventWatcher(event, paths.journal, paths.ledger)
               if event or (isinstance(kill, AfterDelay) and kill.after is None) or watch.watches_work else None)
    try:
        services.started(launched)  # served in a container's own network too; an agent's store watched
        served = run.server.serve(launched.pid, kill, started=started, deadline=started + scenario.timeout_s,
                                  watcher=watcher, on_point=on_point, storage=waited, incarnation=number)
        # Timed out at the most its wait may move its deadline by: still waiting for the storage, maybe.
        storage_bound = served.timed_out and waited is not None and waited.exhausted
        storage_s = waited() if waited is not None else None  # asked before a strike copies the storage
        killed_at: str | None = None
        exit_code: int | None = None
        kill_problems: tuple[str, ...] = ()
        if served.hit is None and not served.timed_out:
            services.ended()
            exit_code = launched.wait()
            leftovers, escaped = tuple(launched.sweep()), tuple(run.escapes.hunt())
        else:
            struck = _struck(run, launched, served, number, kill)
            killed_at, leftovers, escaped = struck.point, struck.leftovers, struck.escaped
            kill_problems = struck.problems
            run.server.read_after_kill(served)
        latency = watcher.latency_s() if watcher is not None and event and served.hit is not None else None
    except BaseException:
        nemesis.kill_confirmed(launched)
        run.escapes.hunt()
        raise
    finally:
        if watcher is not None:
            watcher.close()
    watch.served(served, watcher)
    run.server.drop_connections()
    return Incarnation(
        number=number, pid=launched.pid, exit_code=exit_code, killed_at=killed_at,
        timed_out=served.timed_out, points=tuple(served.points),
        seconds=round(time.monotonic() - started, 4),
        stderr_tail=stderr_tail(run.run_dir / f"incarnation-{number}.stderr"),
        leftovers=leftovers,
        protocol_problems=(*served.protocol_problems, *kill_problems),
        catalogue_drift=str(run.drift) if run.drift is not None and number > 0 else None,
        kill_latency_s=latency,
        escaped=escaped,
        storage_s=None if storage_s is None else round(storage_s, 4), storage_bound=storage_bound,
    )


def _struck(run: _Run, launched: Launched, served: Served, number: int, kill: Kill | None) -> nemesis.Strike:
    """The strike at the moment ``served`` ended on, with what the services keep saved beside its copies."""
    kills = run.kills
    run.services.strike()  # nothing held goes on, every effect is in the ledger before the marker
    struck = _strike(launched, served, run.run_dir, number, run.files, run.disks, run.escapes, kills=kills,
                     dump=run.dump)
    opened = run.services.opened()  # before ``save`` ends the incarnation's holds
    run.services.save(run.paths.store_at_kill(kills))
    if run.scenario.agent is not None:  # only an agent's tools can be real servers, whose kills leave debris
        save_world_at_kill(run.paths, kills, opened)
    if kill is not None and isinstance(kill.fault, PowerLoss):
        # What the model received is the services', off the disk that lost power: the next incarnation finds it
        # as it was.
        run.services.save(run.paths.store_found(kills))
    return struck


def save_world_at_kill(paths: RunPaths, kills: int, opened: str | None) -> None:
    """What kill number ``kills`` left in the world, and the file a real server was held opening when it landed
    (``tool_opened``): debris is told from an effect by them (``judge/properties.world_differs``). Taken once the
    incarnation has ended, so nothing holds the world's files any more."""
    write_fresh(paths.world_at_kill(kills), json.dumps({"world": World(paths.world).snapshot(),
                                                        "opened": opened}).encode())


LAZYFS_STATE = ".lazyfs"  # in a power-loss run's directory: each lazy file system's backing store and undo log


def mount_disks(run_dir: Path, *, world: bool) -> Disks:
    """Put the runtime's storage (``KILLPOINT_RUN_DIR``) on a lazy file system, for power losses to drop from,
    and with ``world`` the fake world on one too (a scenario's ``world_on_device``).

    The mounts live for the whole run, so a container bound to them at its
    creation sees every drop; closing them leaves plain folders again.
    """
    paths = RunPaths(run_dir)
    storage = LazyMount.start(paths.workload, run_dir / LAZYFS_STATE / "workload")
    try:
        return Disks(storage, LazyMount.start(paths.world, run_dir / LAZYFS_STATE / "world") if world else None)
    except BaseException:
        storage.close()
        raise


def _strike(launched: Launched, served: Served, run_dir: Path, number: int, files: tuple[str, ...] | None,
            disks: Disks | None, escapes: RunFiles, *, kills: int, dump: StoreDump | None = None) -> nemesis.Strike:
    """The nemesis's strike at the moment ``served`` ended on (a kill point, or the timeout), with its evidence paths.

    ``files`` are the runtime's own store's (None: it keeps none), copied at the kill too; ``disks`` the lazy
    file system a power loss drops from (None: the run has no power loss); ``escapes`` the run's files, which
    a process that escaped the kill may hold; ``dump`` dumps a store kept in the run's database.
    """
    return nemesis.strike(launched, served.hit, incarnation=number, sites=strike_sites(run_dir, files, kills, dump),
                          drop=None if disks is None else nemesis.DropSite(disks, run_dir, kills), escapes=escapes)


def strike_sites(run_dir: Path, files: tuple[str, ...] | None, kills: int,
                 dump: StoreDump | None = None) -> nemesis.StrikeSites:
    """Where the strike of kill number ``kills`` (from 0) of the run in ``run_dir`` reads and writes; ``files``,
    the runtime's own store's (None: none)."""
    paths = RunPaths(run_dir)
    store = None if files is None else nemesis.StoreCopies(paths.workload, files, paths.store_at_kill(kills),
                                                           paths.store_found(kills), dump)
    return nemesis.StrikeSites(paths.ledger, paths.journal, paths.journal_at_kill(kills), paths.torn_journal(kills),
                               store)


def _copy_final_store(paths: RunPaths, files: tuple[str, ...], run_dir: Path, incarnations: list[Incarnation],
                      dump: StoreDump | None) -> None:
    """Copy the store as the run left it into ``store-final``; a refusal is a problem of the last incarnation."""
    problems = nemesis.copy_store(paths.workload, files, paths.store_final, dump)
    if problems and incarnations:
        last = incarnations[-1]
        incarnations[-1] = replace(last, protocol_problems=(
            *last.protocol_problems, *(f"at the end of the run, {problem}" for problem in problems)))
        save_incarnations(paths.incarnations, incarnations)


@dataclass(frozen=True)
class WorkPeriod:
    """An incarnation's working period, in seconds from the moment its work began (``work_began``, so it starts
    at 0) to its last sign of work (the last crash point, else, for a workload that announces none, the last
    journal/ledger write), and when it reached each of its crash points on its own clock (``work_period``),
    rendered to 0.1 ms."""

    window_s: tuple[float, float]
    point_times_s: tuple[float, ...]


@dataclass
class CpuWaits:
    """How long the workload's process ``pid`` had waited for a CPU when it reached each crash point it waited at
    (its run-queue wait, the second figure of ``/proc/PID/schedstat``): {index of the point: seconds}.

    Read while the workload waits at the point for its reply, so asleep: the figure is the one it reached
    the point with. Missing where it cannot be read (not Linux, a process already gone, a backend whose
    ``pid`` is a client of the workload's, such as docker's).
    """

    pid: int
    at_points: dict[int, float] = field(default_factory=dict)
    reading_s: dict[int, float] = field(default_factory=dict)  # how long the workload waited for the harness there

    def on_point(self, point: str, call: str | None, served: Served) -> None:
        reading = time.monotonic()
        try:
            waited_ns = int(Path(f"/proc/{self.pid}/schedstat").read_text().split()[1])
        except (OSError, ValueError, IndexError):
            return
        index = len(served.points) - 1
        self.at_points[index] = waited_ns / 1e9
        # Before the reply, so inside the stretch to the next point: a timed kill's incarnation has no such wait.
        self.reading_s[index] = time.monotonic() - reading


def work_period(served: Served, watcher: EventWatcher | None, cpu_waits: CpuWaits | None = None) -> WorkPeriod | None:
    """The working period of the incarnation ``served`` ended (see ``WorkPeriod``); None when it showed no work.

    Timed kills are drawn in the crash-free run's (``explore.timed_delay``):
    before it the workload is only starting its interpreter, after it exiting,
    and a kill there tests no recovery; between two of its crash points is
    where a kill counted from the first of them lands in any incarnation.

    The point times are on the workload's own clock: each stretch between two
    points is the wall time between them less what the workload's process
    spent waiting for a CPU in it, and for the harness to read that figure
    (``cpu_waits``; nothing is taken off where it was not read). On a loaded
    machine a stretch of well under a millisecond of work can take several of
    wall time, the time slices of other processes (4 to 8 ms measured beside
    CPU hogs); a later incarnation that is not held up there does the stretch
    in its own short time, and a kill drawn in the long one would overshoot
    it. The time taken off is time the workload did nothing, so a kill drawn
    in what is left lands where work was being done.
    """
    began = work_began(served, watcher)
    last = served.point_times[-1] if served.point_times else watcher.last_write_at if watcher is not None else None
    if began is None or last is None:
        return None
    waits, reading = (cpu_waits.at_points, cpu_waits.reading_s) if cpu_waits is not None else ({}, {})
    own = [served.point_times[0] - began] if served.point_times else []
    for index in range(1, len(served.point_times)):
        wall = served.point_times[index] - served.point_times[index - 1]
        waited = waits[index] - waits[index - 1] if index in waits and index - 1 in waits else 0.0
        own.append(own[-1] + max(0.0, wall - waited - reading.get(index - 1, 0.0)))
    return WorkPeriod((0.0, round(last - began, 4)), tuple(round(at, 4) for at in own))


def run_golden(scenario: Scenario, run_dir: Path, backend: Backend, *, on_lazy_fs: bool = False,
               sharing: Sharing | None = None) -> GoldenRun:
    """Run the plan once with no kill (with ``on_lazy_fs``, on the lazy file system a power-loss run has, never
    dropped); a workload that cannot do that is a workload error. With ``sharing``, it is held at each point
    for the runs whose first kill is there (``point_snapshots``)."""
    work = _WorkWatch()
    incarnations = _run_incarnations(scenario, (), run_dir, backend, max_incarnations=1, work=work,
                                     on_lazy_fs=on_lazy_fs, sharing=sharing)
    window = work.period
    paths = RunPaths(run_dir)
    only = incarnations[0]
    if only.timed_out or only.exit_code != 0 or only.escaped or not completed_task(scenario, only, paths.journal):
        why = (f"outran its timeout of {scenario.timeout_s:g}s even moved by {only.storage_s or 0:.1f}s of waiting "
               f"for the lazy file system of the power losses, the most it may move ({MAX_STORAGE_TIMEOUTS:g} "
               f"timeouts; that storage is far slower than a plain folder): a larger --timeout lets it finish"
               if only.timed_out and only.storage_bound
               else f"hung past the timeout of {scenario.timeout_s:g}s" if only.timed_out
               else f"exited with code {only.exit_code}" if only.exit_code != 0
               else f"left processes that escaped its cgroup and held the run's files, now killed: "
                    f"{'; '.join(only.escaped)}" if only.escaped
               else "exited 0 without journaling task COMPLETED")
        tail = only.stderr_tail or "(stderr empty)"
        raise WorkloadError(
            f"workload error: {' '.join(scenario.workload)!r} could not run the plan even without a crash: "
            f"it {why}. Its stderr ends with:\n{tail}\n{_python_hint(scenario.workload)}Evidence: {run_dir}"
        )
    ledger = read_lines(paths.ledger)
    effects = Counter(line.get("call") for line in ledger.lines if protocol.LEDGER_EFFECT in line.record)
    # No kill cut a record short here, so every line that does not parse may hide an effect record.
    unread = ledger.refused or next((bad.quote() for bad in ledger.bad_lines), None)
    uncounted = None if unread is None else f"the crash-free run's effects cannot be counted: {unread}"
    return GoldenRun(run_dir, World(paths.world).snapshot(), dict(effects), only.points, only.seconds,
                     window.window_s if window is not None else None, uncounted,
                     window.point_times_s if window is not None else ())


def _python_hint(workload: tuple[str, ...]) -> str:
    """For a command with no Python interpreter in it: how a runtime in another language reaches the fake tools."""
    words = re.split(r"[\s'\";&|()]+", " ".join(workload))
    if any(_PYTHON_WORD.match(Path(word).name) for word in words if word):
        return ""
    return (f"The command runs no Python interpreter: a runtime in another language calls the fake tools at "
            f"${TOOLS_URL_ENV} (POST /calls/TOOL, one request per call), or through `{{python}} -m "
            f"killpoint.fake_tools` — pass `{{python}}` in its command, e.g. --workload 'node my-agent.js --python "
            f"{{python}}' (docs/protocol.md, \"Calling the fake tools from another language\").\n")


def require_rendezvous(scenario: Scenario, golden: GoldenRun) -> None:
    """Crash-point schedules need a workload that speaks the control socket; say so if it never did."""
    if not golden.points:
        raise WorkloadError(
            f"workload error: {' '.join(scenario.workload)!r} completed the plan but never connected to the "
            f"control socket (${protocol.ENV_CONTROL}), so it cannot be killed at crash points. "
            f"Make it send a crash point at each protocol point (docs/protocol.md), or kill it by time "
            f"(--timed) or by event (--kill-on). Evidence: {golden.run_dir}"
        )
