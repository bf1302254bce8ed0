"""The subprocess backend: each incarnation a child process in its own session."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness import nemesis, protocol
from harness.errors import WorkloadError


@dataclass
class ChildIncarnation:
    process: subprocess.Popen[bytes]
    workload_dir: str

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        nemesis.kill_tree(self.process)

    def wait(self) -> int:
        exit_code = self.process.wait()
        nemesis.kill_stragglers(self.process.pid)
        return exit_code

    def sweep(self) -> list[str]:
        return nemesis.sweep_leftovers(self.workload_dir)


class SubprocessBackend:
    """The workload inherits the harness's environment (PATH, HOME, ...) plus the protocol's."""

    name = "subprocess"
    options: dict[str, str] = {}

    def __init__(self) -> None:
        nemesis.become_subreaper()

    def launch(self, argv: tuple[str, ...], *, cwd: Path, env: dict[str, str], stdout: Path, stderr: Path) -> ChildIncarnation:
        with stdout.open("wb") as out, stderr.open("wb") as err:
            try:
                process = subprocess.Popen(argv, cwd=cwd, env={**os.environ, **env}, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                           start_new_session=True, close_fds=True)
            except OSError as error:
                raise WorkloadError(f"workload {' '.join(argv)!r} cannot start: {error.strerror}"
                                    f" (cwd {cwd}); check the workload command") from None
        return ChildIncarnation(process, env[protocol.ENV_RUN_DIR])

    def close(self) -> None:
        pass
