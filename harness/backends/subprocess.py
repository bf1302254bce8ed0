"""The subprocess backend: each incarnation a child process in its own session (and its own cgroup, see ``_cgroup``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from killpoint import protocol
from killpoint.errors import HarnessError, WorkloadError
from killpoint.harness._safe_files import fresh_file
from killpoint.harness.backends._cgroup import IncarnationCgroup, preexec_joiner
from killpoint.harness.backends._host import HostIncarnation, prepare_containment


class SubprocessBackend:
    """The workload inherits the harness's environment (PATH, HOME, ...) plus the protocol's."""

    name = "subprocess"
    options: dict[str, str] = {}

    def __init__(self) -> None:
        prepare_containment()

    def launch(self, argv: tuple[str, ...], *, cwd: Path, env: dict[str, str], stdout: Path, stderr: Path) -> HostIncarnation:
        cgroup = IncarnationCgroup.create()
        with open(fresh_file(stdout), "wb") as out, open(fresh_file(stderr), "wb") as err, \
                preexec_joiner(cgroup) as join_cgroup:
            try:
                process = subprocess.Popen(argv, cwd=cwd, env={**os.environ, **env}, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                           start_new_session=True, close_fds=True, preexec_fn=join_cgroup)
            except OSError as error:
                if cgroup is not None:
                    cgroup.discard()
                raise WorkloadError(f"workload {' '.join(argv)!r} cannot start: {error.strerror}"
                                    f" (cwd {cwd}); check the workload command") from None
            except subprocess.SubprocessError:  # only the preexec_fn raises it, and there is one only with a cgroup
                assert cgroup is not None
                raise HarnessError(f"cannot start the incarnation in its cgroup {cgroup.path}") from None
        return HostIncarnation(process.pid, process.wait, env[protocol.ENV_RUN_DIR], cgroup)

    def close(self) -> None:
        pass
