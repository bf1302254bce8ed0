"""The docker backend: each incarnation runs in a locked-down container of a local image.

Isolation by default: no network, a read-only root filesystem, every
capability dropped, no-new-privileges, pids and memory limits, and a non-root
user (the image's USER, else nobody). The only writable mounts are what the
protocol writes: the workload's directory, the world and the ledger. The run
directory (plan, catalogues) and the control socket's directory are mounted
read-only. Every mount keeps its host path, so the protocol's environment
(absolute paths) needs no rewriting.

The kill is SIGKILL to the container; ``confirm_dead`` returns once the
engine says it exited and the host pid of its init is gone, and so before the
nemesis writes the kill marker. ``--restart new`` (the default)
starts each incarnation in a fresh container, removed once it is over;
``--restart same`` starts the killed container again, so whatever the
container itself keeps (its id and hostname, the anonymous volumes of the
image's VOLUMEs) survives the crash. A container's command and environment are fixed
when it is created, so in ``same`` mode each start reads the incarnation's
environment from a file in the run directory through /bin/sh (the image needs one).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors
import docker.types
import psutil
import requests

from killpoint import protocol
from killpoint.errors import ConfigError, WorkloadError
from killpoint.harness._safe_files import write_fresh
from killpoint.harness.backends import _engine
from killpoint.harness.execute._process_tree import CONFIRM_TIMEOUT_S, KillFailed, confirm_dead
from killpoint.harness.model import RESTART_MODES

PIDS_LIMIT = 128
MEMORY_LIMIT = "512m"
SAME_MODE_ENV_FILE = "container.env"
_SAME_MODE_LAUNCHER = 'set -a; . "$0"; exec "$@"'


@dataclass
class ContainerIncarnation:
    """One incarnation in container ``container_id``; ``pid`` is its init's host pid."""

    api: docker.APIClient
    container_id: str
    pid: int
    stdout: Path
    stderr: Path
    remove_on_sweep: bool
    host_process: psutil.Process | None  # None: the container exited before its pid was read
    stand_in: subprocess.Popen[bytes] | None = None
    log_offsets: tuple[int, int] = (0, 0)
    exit_code: int | None = field(default=None, init=False)
    killed: bool = field(default=False, init=False)

    def __repr__(self) -> str:
        state = "killed by SIGKILL" if self.killed else "running" if self.exit_code is None else f"exited {self.exit_code}"
        return f"<container {self.container_id[:12]}, host pid {self.pid}, {state}>"

    def kill(self) -> None:
        """SIGKILL the container (its init, and with it every process of its PID namespace)."""
        try:
            self.api.kill(self.container_id, "SIGKILL")
        except docker.errors.APIError as error:
            if error.status_code not in (404, 409):  # gone, or not running any more
                raise
        self.killed = True

    def confirm_dead(self) -> None:
        """Return once the engine reports the container exited and its init is gone from the host."""
        self._finish()
        if self.host_process is not None:
            confirm_dead([self.host_process])

    def wait(self) -> int:
        self._finish()
        assert self.exit_code is not None
        return self.exit_code

    def sweep(self) -> list[str]:
        """Remove the container (``--restart new``); a container leaves nothing running once its init is dead."""
        if self.remove_on_sweep:
            _engine.remove_container(self.api, self.container_id)
        return []

    def held(self) -> AbstractContextManager[bool]:
        """Never held: a container's run is carried out on disk, whose state no snapshot shares (docs/cli.md)."""
        return contextlib.nullcontext(False)

    def _finish(self) -> None:
        """Wait for the exit, confirm it with the engine, reap any stand-in, and save the logs."""
        if self.exit_code is not None:
            return
        try:
            self.api.wait(self.container_id, timeout=CONFIRM_TIMEOUT_S)
            state = self.api.inspect_container(self.container_id)["State"]
        except docker.errors.NotFound:
            raise KillFailed(f"container {self.container_id[:12]} vanished before its exit was confirmed") from None
        except requests.RequestException as error:
            raise KillFailed(f"container {self.container_id[:12]} still running {CONFIRM_TIMEOUT_S}s after "
                             f"the kill ({error})") from None
        if state["Status"] != "exited":
            raise KillFailed(f"container {self.container_id[:12]} is {state['Status']} after the kill, not exited")
        self.exit_code = state["ExitCode"]
        if self.stand_in is not None:
            self.stand_in.wait()
        self._save_logs()

    def _save_logs(self) -> None:
        """Write this start's output: in ``same`` mode a container's logs hold every earlier start's too."""
        for path, data, offset in zip((self.stdout, self.stderr), _logs(self.api, self.container_id), self.log_offsets):
            write_fresh(path, data[offset:])


def _logs(api: docker.APIClient, container_id: str) -> tuple[bytes, bytes]:
    """The container's stdout and stderr so far (every start's, in order)."""
    return (api.logs(container_id, stdout=True, stderr=False), api.logs(container_id, stdout=False, stderr=True))


def _log_sizes(api: docker.APIClient, container_id: str) -> tuple[int, int]:
    """How many bytes of stdout and stderr earlier starts left: where this start's output begins."""
    stdout, stderr = _logs(api, container_id)
    return len(stdout), len(stderr)


class DockerBackend:
    """Incarnations as containers of ``image`` (built locally when it is the default one, never pulled)."""

    name = "docker"

    def __init__(self, *, image: str | None = None, restart: str = "new", user: str | None = None,
                 client: docker.DockerClient | None = None) -> None:
        if restart not in RESTART_MODES:
            raise ConfigError(f"--restart {restart!r}: choose one of {', '.join(RESTART_MODES)}")
        self.client = client or _engine.connect()
        self.api = self.client.api
        self.image = image or _engine.DEFAULT_IMAGE
        self.restart = restart
        self.options = {"image": self.image, "restart": restart}
        config = _engine.image_config(self.client, self.image)
        self.host_runtime = _engine.LABEL_HOST_RUNTIME in (config.get("Labels") or {})
        self.user = user or config.get("User") or _engine.NOBODY
        self.entrypoint: list[str] = config.get("Entrypoint") or []
        self.containers: set[str] = set()
        self.same_mode_containers: dict[str, str] = {}  # run's KILLPOINT_RUN_DIR -> its container
        self.removed_leftovers = _engine.remove_leftovers(self.client)
        for description in self.removed_leftovers:
            print(f"killpoint: removed leftover {description}", file=sys.stderr)

    def __repr__(self) -> str:
        return f"<docker backend, image {self.image}, restart {self.restart}, {len(self.containers)} container(s)>"

    def launch(self, argv: tuple[str, ...], *, cwd: Path, env: dict[str, str], stdout: Path,
               stderr: Path) -> ContainerIncarnation:
        write_fresh(stdout, b"")
        write_fresh(stderr, b"")
        _engine.grant_writes(_writable_paths(env), self.user)
        container_id = self._same_mode_container(argv, cwd, env) if self.restart == "same" else self._create(argv, cwd, env)
        offsets = _log_sizes(self.api, container_id) if self.restart == "same" else (0, 0)
        try:
            self.api.start(container_id)
            pid = self.api.inspect_container(container_id)["State"]["Pid"]
        except docker.errors.APIError as error:
            raise WorkloadError(f"workload {' '.join(argv)!r} cannot start in image {self.image}: "
                                f"{error.explanation or error}; check the image and the workload command") from None
        incarnation = ContainerIncarnation(self.api, container_id, pid, stdout, stderr,
                                           remove_on_sweep=self.restart == "new", host_process=_host_process(pid),
                                           log_offsets=offsets)
        if incarnation.host_process is None:
            # It exited before its pid was read: an exited host child stands in, so the runner sees an exit at once.
            incarnation.stand_in = subprocess.Popen(["true"])
            incarnation.pid = incarnation.stand_in.pid
        return incarnation

    def _create(self, argv: tuple[str, ...], cwd: Path, env: dict[str, str]) -> str:
        read_only = _protocol_read_only(env) + (_engine.host_runtime_paths(cwd) if self.host_runtime else [])
        binds = {path: {"bind": path, "mode": "ro"} for path in read_only}
        binds.update({str(path): {"bind": str(path), "mode": "rw"} for path in _writable_paths(env)})
        host_config = self.api.create_host_config(
            binds=binds, network_mode="none", ipc_mode="none", read_only=True, cap_drop=["ALL"],
            security_opt=["no-new-privileges"], pids_limit=PIDS_LIMIT, mem_limit=MEMORY_LIMIT, memswap_limit=MEMORY_LIMIT,
            log_config=docker.types.LogConfig(type="json-file"))
        command, entrypoint = list(argv), None
        if self.restart == "same":
            entrypoint = ["/bin/sh", "-c", _SAME_MODE_LAUNCHER, str(_env_file(env))]
            command = [*self.entrypoint, *argv]
        labels = {_engine.LABEL_OWNER: _engine.owner_label(), _engine.LABEL_RUN_DIR: str(_run_dir(env)),
                  _engine.LABEL_INCARNATION: env.get(protocol.ENV_INCARNATION, "0")}
        try:
            created = self.api.create_container(
                self.image, command=command, entrypoint=entrypoint, environment=env, user=self.user, labels=labels,
                working_dir=str(cwd.resolve()) if self.host_runtime else None, host_config=host_config)
        except docker.errors.APIError as error:
            raise WorkloadError(f"workload {' '.join(argv)!r}: the engine refused the container "
                                f"({error.explanation or error})") from None
        self.containers.add(created["Id"])
        return created["Id"]

    def _same_mode_container(self, argv: tuple[str, ...], cwd: Path, env: dict[str, str]) -> str:
        """The run's one container, created for its first incarnation; every start reads this one's env file."""
        _env_file(env).write_text("".join(f"{name}={shlex.quote(value)}\n" for name, value in env.items()))
        run_key = env[protocol.ENV_RUN_DIR]
        if env.get(protocol.ENV_INCARNATION) == "0" or run_key not in self.same_mode_containers:
            self._forget_same_mode_runs()
            self.same_mode_containers[run_key] = self._create(argv, cwd, env)
        return self.same_mode_containers[run_key]

    def _forget_same_mode_runs(self) -> None:
        """A new run starts: the previous run's container (``same`` mode) is done for good."""
        for container_id in self.same_mode_containers.values():
            _engine.remove_container(self.api, container_id)
            self.containers.discard(container_id)
        self.same_mode_containers.clear()

    def close(self) -> None:
        """Remove every container this backend made, and any whose harness died (e.g. parallel workers)."""
        for container_id in self.containers:
            _engine.remove_container(self.api, container_id)
        self.containers.clear()
        self.same_mode_containers.clear()
        _engine.remove_leftovers(self.client)
        self.client.close()


def _run_dir(env: dict[str, str]) -> Path:
    """The run directory: where every protocol path the runner hands out lives."""
    names = (protocol.ENV_RUN_DIR, protocol.ENV_PLAN, protocol.ENV_CATALOGUE, protocol.ENV_WORLD, protocol.ENV_LEDGER)
    return Path(os.path.commonpath([env[name] for name in names]))


def _env_file(env: dict[str, str]) -> Path:
    return _run_dir(env) / SAME_MODE_ENV_FILE


def _writable_paths(env: dict[str, str]) -> list[Path]:
    return [Path(env[name]) for name in (protocol.ENV_RUN_DIR, protocol.ENV_WORLD, protocol.ENV_LEDGER)]


def _protocol_read_only(env: dict[str, str]) -> list[str]:
    """The run directory (plan, catalogues) and the control socket's directory."""
    paths = [str(_run_dir(env))]
    if env.get(protocol.ENV_CONTROL):
        paths.append(str(Path(env[protocol.ENV_CONTROL]).parent))
        Path(env[protocol.ENV_CONTROL]).parent.chmod(0o755)  # mkdtemp made it 0700; the socket itself is 0777
    return paths


def _host_process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid) if pid else None
    except psutil.NoSuchProcess:
        return None
