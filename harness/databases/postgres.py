"""A PostgreSQL server of the harness's own: a fresh cluster per session, on a Unix socket, as an unprivileged user.

Frameworks' production configurations keep their state in PostgreSQL (DBOS's
system database, LangGraph's ``PostgresSaver``). What a crash does there is not
what it does to SQLite: the database is another process, which outlives the
killed agent, and a commit is acknowledged over a socket. So a session that
asks for one gets a server of its own, from Debian's ``postgresql`` package
(its binaries found on PATH or under ``/usr/lib/postgresql/VERSION/bin``):

- a new cluster (``initdb``, trust authentication, one role ``killpoint``) in a
  folder named after its owner (``leftovers.owner_prefix``) in the temporary
  directory, which the server's user can reach (a test's ``tmp_path`` is root's
  alone);
- run as the ``postgres`` user (else ``nobody``): PostgreSQL refuses root;
- listening on a Unix socket in that folder only (no TCP port to collide on);
- stopped (``pg_ctl stop -m immediate``, then its postmaster SIGKILLed if it is
  still there) and its folder removed when the session ends. A harness that was
  SIGKILLed leaves them; ``sweep`` stops and removes what a gone harness left, as
  scratch folders are swept.

A missing package, a cluster that cannot be made, a server that will not start:
a ``ConfigError`` naming the fix (the CLI exits 2), never a traceback.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from killpoint.errors import ConfigError
from killpoint.harness._safe_files import remove_tree
from killpoint.harness.execute.leftovers import abandoned_folders, owner_prefix

PREFIX = "killpoint-postgres-"
ROLE = "killpoint"
DATABASE = "postgres"
START_DEADLINE_S = 60
STOP_DEADLINE_S = 30
INSTALL_HINT = "install Debian's postgresql package (apt-get install postgresql)"
LOG_TAIL_CHARS = 2000


def binaries() -> Path:
    """The folder of ``initdb``, ``pg_ctl`` and ``postgres``: PATH first, then Debian's versioned folders (newest
    first); ConfigError naming the package when there is none."""
    on_path = shutil.which("pg_ctl")
    if on_path is not None and shutil.which("initdb"):
        return Path(os.path.realpath(on_path)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda path: int(
        Path(path).parent.parent.name) if Path(path).parent.parent.name.isdigit() else 0, reverse=True)
    if not versions:
        raise ConfigError(f"a scenario asks for PostgreSQL, and it is not installed here: {INSTALL_HINT}")
    return Path(versions[0]).parent


def server_user() -> pwd.struct_passwd:
    """The unprivileged user the server runs as: ``postgres`` (the package makes it), else ``nobody``."""
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise ConfigError(f"no unprivileged user to run PostgreSQL as (neither postgres nor nobody): {INSTALL_HINT}")


@dataclass
class LocalPostgres:
    """One running cluster: its folder (``data``, ``socket``, ``server.log`` inside) and how to reach it."""

    folder: Path
    bin: Path
    user: pwd.struct_passwd

    @property
    def socket_dir(self) -> Path:
        return self.folder / "socket"

    @property
    def url(self) -> str:
        """A libpq URL to the cluster's ``postgres`` database over its socket (SQLAlchemy takes it too)."""
        return f"postgresql://{ROLE}@/{DATABASE}?host={self.socket_dir}"

    @classmethod
    def start(cls, parent: Path | None = None) -> LocalPostgres:
        """A new cluster, started and answering; ConfigError naming the fix when it cannot be."""
        bin_dir, user = binaries(), server_user()
        folder = Path(tempfile.mkdtemp(prefix=owner_prefix(PREFIX), dir=parent))
        folder.chmod(0o755)  # the server's user reaches its own folders inside; the top one stays the harness's
        server = cls(folder, bin_dir, user)
        try:
            for inside in (folder / "data", server.socket_dir):
                inside.mkdir(mode=0o700)
                os.chown(inside, user.pw_uid, user.pw_gid)
            server._as_server_user([str(bin_dir / "initdb"), "-D", str(folder / "data"), "-U", ROLE,
                                    "--auth=trust", "--no-sync", "--no-instructions"], "make a cluster")
            (folder / "server.log").touch()
            os.chown(folder / "server.log", user.pw_uid, user.pw_gid)
            server._as_server_user([str(bin_dir / "pg_ctl"), "-D", str(folder / "data"), "-l",
                                    str(folder / "server.log"), "-w", "-t", str(START_DEADLINE_S), "-o",
                                    f"-c listen_addresses='' -k {server.socket_dir}", "start"], "start")
        except BaseException:
            server.stop()
            raise
        return server

    def stop(self) -> None:
        """Stop the server at once (what it had not written is lost, as in a crash) and remove its folder."""
        if (self.folder / "data" / "postmaster.pid").exists():
            with contextlib.suppress(ConfigError):
                self._as_server_user([str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate",
                                      "-w", "-t", str(STOP_DEADLINE_S), "stop"], "stop")
        kill_postmaster(self.folder)
        remove_tree(self.folder)

    def log_tail(self) -> str:
        try:
            return (self.folder / "server.log").read_text(errors="replace")[-LOG_TAIL_CHARS:]
        except OSError as error:
            return f"(its log cannot be read: {error.strerror})"

    def _as_server_user(self, argv: list[str], what: str) -> None:
        try:
            done = subprocess.run(argv, user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[],
                                  cwd=self.folder, env={"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"},
                                  capture_output=True, text=True, timeout=START_DEADLINE_S + 30)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ConfigError(f"PostgreSQL could not {what}: {error}; {INSTALL_HINT}") from None
        if done.returncode != 0:
            raise ConfigError(f"PostgreSQL could not {what} (exit {done.returncode}): "
                              f"{(done.stderr or done.stdout).strip()[-LOG_TAIL_CHARS:]}\n{self.log_tail()}")


def kill_postmaster(folder: Path) -> None:
    """SIGKILL the postmaster ``folder``'s cluster names in its pid file, if that process is still there, and wait
    for it to go (its backends follow it); nothing when there is no such file."""
    try:
        pid = int((folder / "data" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        if not Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"postgres"):
            return  # a pid reused by something else since
        os.kill(pid, signal.SIGKILL)
    except (OSError, IndexError):
        return
    deadline = time.monotonic() + STOP_DEADLINE_S
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def sweep(parent: Path | None = None) -> list[Path]:
    """Stop and remove every cluster a harness that is gone left in ``parent`` (the temporary directory)."""
    swept = abandoned_folders(Path(parent or tempfile.gettempdir()), PREFIX)
    for folder in swept:
        kill_postmaster(folder)
        remove_tree(folder)
    return swept
