"""A PostgreSQL server of the harness's own: a fresh cluster per run, on a Unix socket, as an unprivileged user.

Frameworks' production configurations keep their state in PostgreSQL (DBOS's
system database, LangGraph's ``PostgresSaver``). What a crash does there is not
what it does to SQLite: the database is another process, which outlives the
killed agent, and a commit is acknowledged over a socket. So each run of a
scenario that asks for one gets a server of its own, from Debian's
``postgresql`` package (its binaries found on PATH or under
``/usr/lib/postgresql/VERSION/bin``):

- a new cluster (``initdb``) in a folder named after its owner
  (``leftovers.owner_prefix``) in the temporary directory, which the server's
  user can reach (a test's ``tmp_path`` is root's alone);
- three roles: the harness's superuser ``killpoint`` and its reader ``reader``
  (no superuser: it reads every table, ``pg_read_all_data``, past any row
  policy, ``BYPASSRLS``), each behind a password only the harness knows, and
  ``workload``, no superuser, which may connect to and create in the database
  ``workload`` that it is handed (``workload_url``) but does not own it (an
  owner could lock the harness out of it). A workload that could log in as a
  superuser could run programs as the server's user (``COPY ... TO
  PROGRAM``); and whatever it defines that a read of its store could run (a
  cast, say) runs as the reader, which can do nothing but read;
- the scenario's settings (``[database] settings``: ``synchronous_commit``,
  ``fsync``, ...) written into ``postgresql.conf``, never onto a command line,
  and never over the harness's own (where it listens, who may log in, what it
  loads or runs: ``config/database_table.HARNESS_SETTINGS``);
- run as the ``postgres`` user (else ``nobody``): PostgreSQL refuses root;
- listening on a Unix socket in that folder only (no TCP port to collide on);
- killed (every process of it) and its folder removed when the run ends. A
  harness that was SIGKILLed leaves them; ``sweep`` stops and removes what a gone
  harness left, as scratch folders are swept. The postmaster's pid and start
  time are kept in the folder (``server.pid``), outside the data folder, which a
  power loss's lazy file system may have taken away with it.

A missing package, a cluster that cannot be made, a server that will not start:
a ``ConfigError`` naming the fix (the CLI exits 2), never a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import multiprocessing.util
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from killpoint.errors import ConfigError, InfrastructureError
from killpoint.harness._safe_files import remove_tree
from killpoint.harness.execute._process_tree import process_gone
from killpoint.harness.execute.leftovers import abandoned_folders, owner_prefix

if TYPE_CHECKING:
    from killpoint.harness.faults.lazyfs import LazyMount

PREFIX = "killpoint-postgres-"
ROLE = "killpoint"
DATABASE = "postgres"
WORKLOAD_ROLE = "workload"
WORKLOAD_DATABASE = "workload"
READER_ROLE = "reader"
PORT = 5432  # the socket's name (.s.PGSQL.5432), named in every URL so that no PGPORT in an environment moves it
# Who may log in, and how: the harness's superuser and reader with their password only, the workload's role freely.
HBA = (f"local all {ROLE},{READER_ROLE} scram-sha-256\n"
       f"local all {WORKLOAD_ROLE} trust\n")
SERVER_PID = "server.pid"
Setting = str | int | float | bool
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


def _conf_line(name: str, value: Setting) -> str:
    """``name = 'value'`` as postgresql.conf reads it back: a quote and a backslash (an escape there) doubled."""
    shown = ("on" if value else "off") if isinstance(value, bool) else str(value)
    return "%s = '%s'\n" % (name, shown.replace("\\", "\\\\").replace("'", "''"))


@dataclass
class LocalPostgres:
    """One running cluster: its folder (``data``, ``socket``, ``server.log`` inside) and how to reach it; with
    ``disk``, its data folder on a lazy file system, which a power loss drops from (``power_off``, ``power_on``)."""

    folder: Path
    bin: Path
    user: pwd.struct_passwd
    password: str = field(default_factory=lambda: secrets.token_hex(16), repr=False)
    disk: LazyMount | None = None

    @property
    def socket_dir(self) -> Path:
        return self.folder / "socket"

    @property
    def data_dir(self) -> Path:
        return self.folder / "data"

    @property
    def url(self) -> str:
        """The harness's libpq URL: its superuser, to the ``postgres`` database, over the socket."""
        return self._url(ROLE, DATABASE, self.password)

    @property
    def admin_url(self) -> str:
        """The harness's superuser's URL to the workload's database: it ends the workload's sessions there."""
        return self._url(ROLE, WORKLOAD_DATABASE, self.password)

    @property
    def reader_url(self) -> str:
        """The harness's reader's URL to the workload's database, where it dumps the store from."""
        return self._url(READER_ROLE, WORKLOAD_DATABASE, self.password)

    @property
    def workload_url(self) -> str:
        """The URL the workload is handed: its own role and database (SQLAlchemy and psycopg take it)."""
        return self._url(WORKLOAD_ROLE, WORKLOAD_DATABASE)

    def _url(self, role: str, database: str, password: str | None = None) -> str:
        login = f"{role}:{password}" if password else role
        return f"postgresql://{login}@/{database}?host={self.socket_dir}&port={PORT}"

    @classmethod
    def start(cls, parent: Path | None = None, *, settings: Mapping[str, Setting] | None = None,
              mount: Callable[[Path], LazyMount] | None = None) -> LocalPostgres:
        """A new cluster with ``settings``, started and answering, the workload's role and database made; with
        ``mount``, its data folder put on the lazy file system ``mount`` makes of it before the server starts.
        ConfigError naming the fix when it cannot be.

        The cluster is a copy of this process's template (``_template``: made once, stopped cleanly), so a run
        pays a copy and a start, not initdb and the roles (0.85 s to about 0.4 s). Under a power loss the copy
        is also the device's durable state when the workload starts, as a database made long before would be:
        the lazy file system takes what is there as durable. Made on it instead, the workload's database folder
        would be a directory entry no fsync ever covered (PostgreSQL recreates it from its WAL after a crash
        and never fsyncs ``base/`` for it), and a second power loss would take it away."""
        template = _template(parent)
        server = cls._made_folder(parent, password=template.password)
        try:
            server.data_dir.mkdir(mode=0o700)
            os.chown(server.data_dir, server.user.pw_uid, server.user.pw_gid)
            server._as_server_user(["cp", "-a", f"{template.data_dir}/.", str(server.data_dir)], "copy its cluster")
            with (server.data_dir / "postgresql.conf").open("a") as conf:  # the last of a name is the one read
                conf.writelines(_conf_line(name, value) for name, value in (settings or {}).items())
                conf.writelines(_conf_line(name, value) for name, value in server._own_settings().items())
            if mount is not None:
                server.disk = mount(server.data_dir)
            try:
                server.power_on()
            except ConfigError as refused:
                if not settings:
                    raise
                raise ConfigError(f"{refused.message}\nthe scenario's [database] settings ({', '.join(settings)}) are "
                                  "in that configuration file: fix the one its log names") from None
        except BaseException:
            server.stop()
            raise
        return server

    def _own_settings(self) -> dict[str, Setting]:
        return {"listen_addresses": "", "port": PORT, "unix_socket_directories": str(self.socket_dir)}

    @classmethod
    def _made_folder(cls, parent: Path | None, *, password: str | None = None) -> LocalPostgres:
        """A cluster's folder, named after its owner, with its socket folder and log the server's user owns."""
        bin_dir, user = binaries(), server_user()
        folder = Path(tempfile.mkdtemp(prefix=owner_prefix(PREFIX), dir=parent))
        folder.chmod(0o755)  # the server's user reaches its own folders inside; the top one stays the harness's
        server = cls(folder, bin_dir, user) if password is None else cls(folder, bin_dir, user, password)
        server.socket_dir.mkdir(mode=0o700)
        os.chown(server.socket_dir, user.pw_uid, user.pw_gid)
        (folder / "server.log").touch()
        os.chown(folder / "server.log", user.pw_uid, user.pw_gid)
        return server

    @classmethod
    def _initialized(cls, parent: Path | None) -> LocalPostgres:
        """A new cluster (initdb), its roles and the workload's database made, stopped cleanly: a template."""
        server = cls._made_folder(parent)
        try:
            server.data_dir.mkdir(mode=0o700)
            os.chown(server.data_dir, server.user.pw_uid, server.user.pw_gid)
            password_file = server.folder / "password"
            password_file.write_text(server.password + "\n")
            os.chown(password_file, server.user.pw_uid, server.user.pw_gid)
            password_file.chmod(0o600)
            try:
                server._as_server_user([str(server.bin / "initdb"), "-D", str(server.data_dir), "-U", ROLE,
                                        f"--pwfile={password_file}", "--auth=scram-sha-256", "--no-sync",
                                        "--no-instructions"], "make a cluster")
            finally:
                password_file.unlink()
            (server.data_dir / "pg_hba.conf").write_text(HBA)
            with (server.data_dir / "postgresql.conf").open("a") as conf:
                conf.writelines(_conf_line(name, value) for name, value in server._own_settings().items())
            server.power_on()
            server._psql("make the roles and the workload's database",
                         f"CREATE ROLE {WORKLOAD_ROLE} LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB",
                         f"CREATE ROLE {READER_ROLE} LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB BYPASSRLS "
                         f"IN ROLE pg_read_all_data PASSWORD '{server.password}'",
                         # The harness's, not the workload's: an owner could revoke the reader's CONNECT, set a
                         # connection limit of 0 or a role and timeouts for every later login (ALTER DATABASE ... SET).
                         f"CREATE DATABASE {WORKLOAD_DATABASE}",
                         f"GRANT CONNECT, CREATE, TEMPORARY ON DATABASE {WORKLOAD_DATABASE} TO {WORKLOAD_ROLE}")
            server._psql("let the workload create in its database",
                         f"GRANT USAGE, CREATE ON SCHEMA public TO {WORKLOAD_ROLE}", database=WORKLOAD_DATABASE)
            server._as_server_user([str(server.bin / "pg_ctl"), "-D", str(server.data_dir), "-m", "fast", "-w",
                                    "-t", str(STOP_DEADLINE_S), "stop"], "stop")
        except BaseException:
            server.stop()
            raise
        return server

    def power_on(self) -> None:
        """Start the server on its data folder (after a power loss, its own crash recovery runs first) and wait
        until it answers; ConfigError with its log when it will not.

        A killed server leaves its lock files (``postmaster.pid``, the socket's
        ``.lock``) naming its pid, and PostgreSQL refuses to start while that pid
        is a process, which a killed one is until init reaps it: they are removed
        first when the process they name is gone (as a reboot would clear them)."""
        for lock in (self.data_dir / "postmaster.pid", *self.socket_dir.glob(".s.PGSQL.*")):
            if lock.name.endswith(".lock") or lock.name == "postmaster.pid":
                try:
                    pid = int(lock.read_text().split()[0])
                except (OSError, ValueError, IndexError):
                    continue
                if process_gone(pid):
                    lock.unlink(missing_ok=True)
        self._as_server_user([str(self.bin / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.folder /
                              "server.log"), "-w", "-t", str(START_DEADLINE_S), "start"], "start")
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
            (self.folder / SERVER_PID).write_text(f"{pid} {psutil.Process(pid).create_time()}\n")
        except (OSError, ValueError, IndexError, psutil.Error) as error:
            raise InfrastructureError(f"the PostgreSQL server in {self.folder} started, and its pid cannot be "
                                      f"read: {error}") from None

    def power_off(self) -> None:
        """SIGKILL the server and every process of it, and return once all are gone: the server's share of a power
        loss, after which nothing of it writes while the lazy file system drops what it never made durable."""
        if not kill_postmaster(self.folder):
            raise InfrastructureError(f"the PostgreSQL server in {self.folder} outlived SIGKILL for "
                                      f"{STOP_DEADLINE_S} s; its storage was not dropped under it")

    def stop(self) -> None:
        """Stop the server at once (what it had not written is lost, as in a crash), take its data folder off the
        lazy file system, and remove its folder; a server that outlives its SIGKILL keeps its folder, for
        ``killpoint clean``."""
        try:
            gone = kill_postmaster(self.folder)
        finally:
            if self.disk is not None:
                self.disk.close()
        if not gone:
            raise InfrastructureError(f"the PostgreSQL server in {self.folder} outlived SIGKILL for "
                                      f"{STOP_DEADLINE_S} s; its folder is left for `killpoint clean`")
        remove_tree(self.folder)

    def _psql(self, what: str, *statements: str, database: str = DATABASE) -> None:
        """Run ``statements`` as the harness's superuser, fed on standard input and the password in the environment:
        never on a command line, which any process of the host may read."""
        try:
            done = subprocess.run([str(self.bin / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", "-", "-d",
                                   self._url(ROLE, database)], input="".join(f"{sql};\n" for sql in statements),
                                  capture_output=True, text=True, timeout=START_DEADLINE_S,
                                  env={"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8",
                                       "PGPASSWORD": self.password})
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ConfigError(f"PostgreSQL could not {what}: {error}") from None
        if done.returncode != 0:
            raise ConfigError(f"PostgreSQL could not {what}: {done.stderr.strip()}")

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


# This process's template cluster by the folder it was made in (None: the temporary directory): made at its
# first run, removed when the process exits (``multiprocessing.util.Finalize`` runs in a pool's workers too),
# swept by ``killpoint clean`` when it was killed.
_TEMPLATES: dict[Path | None, LocalPostgres] = {}


def _template(parent: Path | None) -> LocalPostgres:
    template = _TEMPLATES.get(parent)
    if template is None or not template.data_dir.is_dir():
        template = _TEMPLATES[parent] = LocalPostgres._initialized(parent)
        multiprocessing.util.Finalize(None, functools.partial(_remove_template, template, os.getpid()),
                                      exitpriority=0)
    return template


def _remove_template(template: LocalPostgres, maker: int) -> None:
    """Remove ``template`` at the exit of the process that made it, never of a child forked from it that inherited
    the finalizer (the children use it while its maker lives)."""
    if os.getpid() == maker:
        template.stop()


def kill_postmaster(folder: Path) -> bool:
    """SIGKILL the postmaster of ``folder``'s cluster, if it is still there, and every process of it (its backends
    notice a dead postmaster only later), and wait for all to go; whether none is left.

    The postmaster is the one ``server.pid`` names with its start time, so a pid used again since is never
    touched; a cluster of a killpoint from before that file is found by its data folder's ``postmaster.pid`` and
    the process's working folder. Both are the harness's files, in a folder the workload is never handed."""
    postmaster = _postmaster(folder)
    if postmaster is None:
        return True
    processes = [postmaster]
    with contextlib.suppress(psutil.Error):
        processes += postmaster.children(recursive=True)
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.send_signal(signal.SIGKILL)
    deadline = time.monotonic() + STOP_DEADLINE_S  # dead once a zombie: init may reap it long after
    while not all(process_gone(process.pid) for process in processes) and time.monotonic() < deadline:
        time.sleep(0.005)
    return all(process_gone(process.pid) for process in processes)


def _postmaster(folder: Path) -> psutil.Process | None:
    try:
        pid, started = (folder / SERVER_PID).read_text().split()
        process = psutil.Process(int(pid))
        return process if abs(process.create_time() - float(started)) < 0.01 else None
    except FileNotFoundError:
        pass
    except (OSError, ValueError, psutil.Error):
        return None
    try:
        process = psutil.Process(int((folder / "data" / "postmaster.pid").read_text().split()[0]))
        return process if process.cwd() == os.path.realpath(folder / "data") else None
    except (OSError, ValueError, IndexError, psutil.Error):
        return None


def sweep(parent: Path | None = None) -> list[Path]:
    """Stop and remove every cluster a harness that is gone left in ``parent`` (the temporary directory)."""
    swept = [folder for folder in abandoned_folders(Path(parent or tempfile.gettempdir()), PREFIX)
             if kill_postmaster(folder)]
    for folder in swept:
        remove_tree(folder)
    return swept
