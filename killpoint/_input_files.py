"""Reading a file a person hands the harness (scenario, plan, catalogue, report, MCP tool list), bounded.

The harness runs as root, and a path on its command line may name anything: ``/dev/zero`` is a read that
never ends (memory grows until the harness is killed), a FIFO an ``open`` that never returns, a directory
or a socket no document at all. Such a path is refused with the file named and the fix (a ConfigError: exit
2), before a byte is read. A symbolic link is followed: the path is the user's own (a scenario linked from a
shared folder of their checkout is legitimate); what it reaches must be a regular file all the same. The
file is opened with ``O_NONBLOCK``, so a FIFO swapped in after the check opens at once and is refused by
``fstat`` on the opened file, and is read up to a limit for its kind, named in the message.

Kept free of harness imports: the catalogue reader, which workloads load too, reads through it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from killpoint.errors import ConfigError

MIB = 1024 * 1024
# A scenario, plan, catalogue or tool list is kilobytes, written by a person or a tool; 16 MiB is none of those.
DOCUMENT_LIMIT_BYTES = 16 * MIB
# A shard's JSON report holds every run: a 30,000-run session's is 67 MB (docs/performance.md).
REPORT_LIMIT_BYTES = 512 * MIB
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def read_input(path: Path, what: str, *, limit: int, fix: str) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit``; a ConfigError naming ``path``, ``what`` it
    should hold and ``fix`` for anything else (missing, unreadable, no regular file, too large)."""
    if "\0" in str(path):  # no file's name holds a NUL byte (a TOML "\u0000"); os.stat would raise ValueError
        raise ConfigError(f"{str(path)!r}: cannot read {what}: a path cannot hold a NUL byte; {fix}")
    try:
        _refuse_other_than_a_file(path, what, os.stat(path).st_mode, fix)  # a device is not even opened
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise ConfigError(f"{path}: cannot read {what} ({error.strerror or error}); {fix}") from None
    try:
        status = os.fstat(fd)
        _refuse_other_than_a_file(path, what, status.st_mode, fix)  # replaced between the stat and the open
        if status.st_size > limit:
            raise _too_large(path, what, f"holds {status.st_size} bytes, over", limit, fix)
        data = _read_up_to(fd, limit + 1)
    except OSError as error:
        raise ConfigError(f"{path}: cannot read {what} ({error.strerror or error}); {fix}") from None
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while being read, or a file (in /proc, say) whose size says nothing
        raise _too_large(path, what, "grew past", limit, fix)
    return data


def kind_of(mode: int) -> str | None:
    """What a file of ``mode`` (``st_mode``) is when it is no regular file ("a FIFO (named pipe)"); else None."""
    return next((name for is_kind, name in _KINDS if is_kind(mode)), None)


def _refuse_other_than_a_file(path: Path, what: str, mode: int, fix: str) -> None:
    kind = kind_of(mode)
    if kind is not None:
        raise ConfigError(f"{path}: is {kind}, not a regular file, so {what} was not read from it "
                          f"(a device can be read forever, a FIFO waited on forever); {fix}")


def _too_large(path: Path, what: str, how_large: str, limit: int, fix: str) -> ConfigError:
    return ConfigError(f"{path}: {how_large} the {limit // MIB} MiB limit for {what}, so it was not read; {fix}")


def _read_up_to(fd: int, most: int) -> bytes:
    """At most ``most`` bytes of ``fd``, up to its end."""
    chunks, left = [], most
    while left > 0:
        chunk = os.read(fd, min(left, 4 * MIB))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
