"""A scenario's ``[database]`` table: the database server its workload keeps its state in, and every problem of one.

``postgres = true`` gives each run a PostgreSQL server of the harness's own
(``harness/databases/postgres.py``), with ``settings`` written into its
configuration; ``url = "postgresql://..."`` names the user's own server, where
each run gets a database of its own (its role needs CREATEDB). A store read
from the database (``[journal] format = "dbos-postgres"``, ...) needs one.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from killpoint.harness.judge.stores import DATABASE_FORMATS
from killpoint.harness.model import DatabaseSpec

KEYS = ("postgres", "url", "settings")
SETTING_NAME = re.compile(r"[a-z_][a-z0-9_.]{0,62}")
# What a scenario's settings may not set: where the server listens and who may log in, the files it reads, what it
# loads or runs. harness/databases/postgres.py writes its own after the scenario's.
HARNESS_SETTINGS = frozenset({
    "listen_addresses", "port", "unix_socket_directories", "unix_socket_group", "unix_socket_permissions",
    "data_directory", "config_file", "hba_file", "ident_file", "external_pid_file", "include", "include_dir",
    "include_if_exists", "shared_preload_libraries", "local_preload_libraries", "session_preload_libraries",
    "archive_command", "archive_library", "restore_command", "archive_cleanup_command", "recovery_end_command",
    "ssl", "dynamic_library_path", "log_directory", "log_filename", "logging_collector"})
SCHEMES = ("postgresql", "postgres")


def database_problems(table: dict[str, Any] | None, journal: object, where: str) -> list[str]:
    """Every problem of a ``[database]`` table (None: the scenario has none) and of a ``[journal]`` that reads a
    database without one, each naming ``where: database.KEY``, what is wrong and the fix."""
    form = journal.get("format") if isinstance(journal, dict) else None
    if table is None:
        return [f"{where}: journal.format: {form!r} reads the store from a database server, and the scenario has "
                "no [database]; add [database] postgres = true (a server of killpoint's own for each run) or "
                "url = \"postgresql://...\" (yours)"] if form in DATABASE_FORMATS else []
    problems = [f"{where}: database.{key}: unknown key; [database] takes {', '.join(KEYS)}"
                for key in table if key not in KEYS]
    postgres, url = table.get("postgres", False), table.get("url")
    if not isinstance(postgres, bool):
        problems.append(f"{where}: database.postgres: {postgres!r:.60} is not true or false")
    if url is not None:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in SCHEMES or not parts.path.strip("/"):
            problems.append(f"{where}: database.url: {url!r:.80} is not a PostgreSQL URL naming a database "
                            "(postgresql://USER@HOST/DATABASE)")
    if (postgres is True) == (url is not None):
        problems.append(f"{where}: database: give one of postgres = true (a server of killpoint's own for each "
                        "run) and url = \"postgresql://...\" (yours)")
    if "settings" in table:
        if url is not None:
            problems.append(f"{where}: database.settings: only a server of killpoint's own (postgres = true) takes "
                            "settings; set them on your own server yourself")
        problems += [f"{where}: database.settings: {problem}" for problem in settings_problems(table["settings"])]
    return problems


def database_spec(table: dict[str, Any]) -> DatabaseSpec:
    """The ``[database]`` table ``database_problems`` passed, read."""
    return DatabaseSpec(postgres=table.get("postgres", False), url=table.get("url"),
                        settings=dict(table.get("settings", {})))


def settings_problems(settings: object) -> list[str]:
    """Why ``settings`` (``[database] settings``) is not a table of server settings, one problem each."""
    if not isinstance(settings, dict):
        return [f"{settings!r:.60} is not a table (settings = {{ synchronous_commit = \"off\" }})"]
    problems = []
    for name, value in settings.items():
        if not SETTING_NAME.fullmatch(name):
            problems.append(f"{name!r:.80} is not a PostgreSQL setting's name (lower-case letters, digits, _ and .)")
        elif name in HARNESS_SETTINGS or name.startswith("ssl"):
            problems.append(f"{name}: the harness sets it (where the server listens, who may log in, the files it "
                            "reads, what it loads or runs); drop it")
        elif not isinstance(value, str | int | float | bool) or (isinstance(value, str) and not value.isprintable()):
            problems.append(f"{name}: {value!r:.60} is not a setting's value (a string on one line, a number, "
                            "true or false)")
    return problems
