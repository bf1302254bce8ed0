"""Clean-up no trial waits for, done on one background thread: closing a call's inotify watch, removing a world.

Why: closing an inotify instance that watched folders waits in the kernel for
an SRCU grace period (the marks are freed only once no event can still reach
them), about 10 ms each on a shared 2-core machine. Every call of a certified
MCP tool was watched and closed on the trial's path: 1,757 closes, 20.8 s of a
117 s certification of server-memory's 9 tools. Once a call has ended, nothing
reads its instance again and no decision waits for it to be gone, so it is
closed here. The same holds for removing a world a trial is done with (its
server is dead and reaped first, on the trial's path: only the files remain).

What must happen at once stays on the caller's thread: a fanotify group
holding a server (closing it lets the held opener go on), a server's kill.
``drain`` waits until every job handed over is done: a certification ends
with nothing of its own left open or on disk.
"""

from __future__ import annotations

import os
import queue
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

_jobs: queue.Queue[Callable[[], object]] = queue.Queue()
_started: list[threading.Thread] = []
_failed: list[Exception] = []  # what a job raised that was no OSError: ``drain`` raises it
_lock = threading.Lock()
# Jobs waiting past which a watch is closed on the caller's path: an inotify instance waiting here still counts
# against the user's limit (fs.inotify.max_user_instances, 128 by default, every certifying process's together),
# and one the janitor fell behind on must not make the next watch fail to open.
MAX_WAITING = 32


def later(job: Callable[[], object]) -> None:
    """Run ``job`` on the janitor's thread (started on first use), after every job handed over before it."""
    with _lock:
        if not _started:
            thread = threading.Thread(target=_work, name="killpoint-certify-janitor", daemon=True)
            thread.start()
            _started.append(thread)
    _jobs.put(job)


def close_later(fd: int) -> None:
    """Close ``fd`` off the caller's path (at once if ``MAX_WAITING`` jobs wait); nobody may use it again (a closed
    or reused number is not ours)."""
    if _jobs.qsize() >= MAX_WAITING:
        os.close(fd)
    else:
        later(lambda: os.close(fd))


def remove_later(folder: Path) -> None:
    """Remove ``folder`` and what it holds off the caller's path (nothing may still write there)."""
    later(lambda: shutil.rmtree(folder, ignore_errors=True))


def drain() -> None:
    """Return once every job handed over so far is done; raise what a job raised that was no OSError (a bug)."""
    if _started:
        _jobs.join()
    if _failed:
        raise _failed.pop()


def _work() -> None:
    while True:
        job = _jobs.get()
        try:
            job()
        except OSError:  # a clean-up that fails leaves what it would have removed; nothing waits on it
            pass
        except Exception as error:  # not swallowed: the next ``drain`` raises it
            _failed.append(error)
        finally:
            _jobs.task_done()
