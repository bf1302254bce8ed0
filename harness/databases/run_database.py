"""The database a run's workload keeps its state in (a scenario's ``[database]``), for the whole run.

With ``postgres = true`` each run gets a server of its own (``postgres.py``):
runs in parallel share nothing, and a run's power loss kills and restarts its
own server only. With the user's ``url``, each run gets a database of its own
on that server, made from the user's role (it needs CREATEDB) and dropped when
the run ends. Either way the workload is handed ``workload_url`` and nothing
else, and the harness dumps the store from it at each kill (``dump.py``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit, urlunsplit

from killpoint.errors import ConfigError
from killpoint.harness.databases.dump import CONNECT_S, INSTALL_HINT, Sessions, dump_store
from killpoint.harness.databases.postgres import WORKLOAD_ROLE, LocalPostgres
from killpoint.harness.model import DatabaseSpec, DumpQuery

if TYPE_CHECKING:
    from killpoint.harness.faults.lazyfs import LazyMount


class RunDatabase(Protocol):
    @property
    def workload_url(self) -> str:
        """What the workload is handed as ``$KILLPOINT_DATABASE_URL``."""
        ...

    def dump(self, queries: tuple[DumpQuery, ...], copy: Path) -> list[str]:
        """The store's rows into the folder ``copy`` (``dump.dump_store``); the problems met."""
        ...

    def close(self) -> None:
        """The run is over: remove what it made."""
        ...


def open_run_database(spec: DatabaseSpec, *, mount: Callable[[Path], LazyMount] | None = None) -> RunDatabase:
    """The run's database as ``spec`` asks; with ``mount``, a server of the harness's own with its data folder on
    the lazy file system ``mount`` makes (a power loss's). ConfigError naming the fix when it cannot be had."""
    if spec.url is None:
        return LocalServerDatabase(LocalPostgres.start(settings=spec.settings, mount=mount))
    if mount is not None:
        raise ConfigError("--power-loss needs a database server killpoint runs itself, on the lazy file system: "
                          "[database] postgres = true, not your url")
    return UserDatabase.create(spec.url)


@dataclass
class LocalServerDatabase:
    """The workload's database on the run's own server."""

    server: LocalPostgres

    @property
    def workload_url(self) -> str:
        return self.server.workload_url

    def dump(self, queries: tuple[DumpQuery, ...], copy: Path) -> list[str]:
        return dump_store(self.server.reader_url, queries, copy,
                          sessions=Sessions(self.server.admin_url, WORKLOAD_ROLE))

    def close(self) -> None:
        self.server.stop()


@dataclass
class UserDatabase:
    """A database of the run's own, made on the user's server from the role the user's URL names."""

    url: str
    name: str

    @property
    def workload_url(self) -> str:
        parts = urlsplit(self.url)
        return urlunsplit(parts._replace(path=f"/{self.name}"))

    @classmethod
    def create(cls, url: str) -> UserDatabase:
        database = cls(url, f"killpoint_{secrets.token_hex(6)}")
        database._execute(f'CREATE DATABASE "{database.name}"', "make a database for the run")
        return database

    def dump(self, queries: tuple[DumpQuery, ...], copy: Path) -> list[str]:
        # The user's role writes and reads the run's database: its sessions cannot be told from the harness's, so
        # the dump does not end them first, and a cast the workload defined would run with the user's rights (the
        # dump's type check refuses a table that could bring one).
        return dump_store(self.workload_url, queries, copy)

    def close(self) -> None:
        self._execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)', "drop the run's database")

    def _execute(self, statement: str, what: str) -> None:
        try:
            import psycopg
        except ImportError:
            raise ConfigError(f"[database] url needs psycopg: {INSTALL_HINT}") from None
        try:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_S) as connection:
                connection.execute(statement)  # names made here, never the workload's
        except psycopg.Error as error:
            raise ConfigError(f"[database] url: could not {what} on {urlsplit(self.url).hostname or 'the server'}: "
                              f"{str(error).strip()[:300]}; the role needs CREATEDB") from None
