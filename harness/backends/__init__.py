"""Backends start one incarnation of a workload and expose what the nemesis needs to strike it.

The runner is the same for every backend: it serves the rendezvous, decides
when to kill, and collects evidence; the nemesis (``killpoint.harness.faults.nemesis``)
strikes. A backend only knows how to start the workload (a subprocess, a
container, a fork of a warm interpreter), how to tell when it has exited (a host
pid the runner watches through a pidfd), and its own primitives for a kill:
SIGKILL all of it at once (its cgroup, its container, else its group and tree),
prove it dead, and sweep what it left elsewhere.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from killpoint.errors import ConfigError
from killpoint.harness.model import BACKENDS


class Launched(Protocol):
    """One running incarnation."""

    pid: int  # a host pid whose exit ends the incarnation

    def kill(self) -> None:
        """SIGKILL every process of the incarnation at once, without waiting (``confirm_dead`` waits)."""

    def confirm_dead(self) -> None:
        """Reap the incarnation and return once every process ``kill`` reached is gone; KillFailed past the deadline."""

    def wait(self) -> int:
        """The exit code, once the incarnation has exited on its own; kill what it left (its cgroup, else its group)."""

    def sweep(self) -> list[str]:
        """Kill anything the incarnation left running elsewhere; describe each one killed (and every leftover found)."""

    def held(self) -> AbstractContextManager[bool]:
        """Hold every process of the running incarnation still for the body; True once all are, False if it cannot.

        A run held at a crash point leaves what a kill there would (``harness/execute/prefixes.py``).
        """


class Backend(Protocol):
    name: str
    options: dict[str, str]  # what make_backend needs besides the name to start the same way (a repro token keeps it)

    def launch(self, argv: tuple[str, ...], *, cwd: Path, env: dict[str, str], stdout: Path, stderr: Path) -> Launched:
        """Start the workload; raise WorkloadError if it cannot start at all."""

    def close(self) -> None:
        """Release what the backend holds (servers, containers) for good."""


def default_backend(workload: tuple[str, ...]) -> str:
    """The backend when none is chosen: the fork server for a Python workload on this interpreter
    (``{python} -m MODULE`` or ``{python} SCRIPT``), which starts it several times faster; else subprocess."""
    from killpoint.harness.backends.forkserver import python_target

    try:
        python_target(workload)
    except ConfigError:
        return "subprocess"
    return "forkserver"


def make_backend(name: str, *, image: str | None = None, restart: str | None = None) -> Backend:
    """The backend ``name``; ``image`` and ``restart`` (``new`` or ``same``) are options of the docker one."""
    if name != "docker" and (image is not None or restart is not None):
        raise ConfigError("--image and --restart choose how containers run; they go with --backend docker")
    if name == "subprocess":
        from killpoint.harness.backends.subprocess import SubprocessBackend

        return SubprocessBackend()
    if name == "forkserver":
        from killpoint.harness.backends.forkserver import ForkServerBackend

        return ForkServerBackend()
    if name == "docker":
        from killpoint.harness.backends.docker import DockerBackend

        return DockerBackend(image=image, restart=restart or "new")
    raise ConfigError(f"--backend {name!r}: unknown backend; choose one of {', '.join(BACKENDS)}")
