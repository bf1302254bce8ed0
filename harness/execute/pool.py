"""The session's worker processes: the runs of a batch carried out in parallel, and stopped mid-run when asked.

A worker dies with the harness (a SIGKILLed harness leaves its workers nothing
to report to; the kernel kills them), ignores Ctrl-C (it reaches the whole
process group, but only the harness acts on it), and on the harness's SIGTERM
unwinds the run under way, which kills its incarnation, or exits at once when
idle. Each worker keeps one backend, made on its first run.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from killpoint.harness.backends import Backend, make_backend
from killpoint.harness.backends._forkserver_main import die_with_parent
from killpoint.harness.model import Job, RunOutcome

WORKER_STOP_TIMEOUT_S = 10.0  # a stopped worker kills its incarnation and exits; past this it is SIGKILLed

_worker_backend: Backend | None = None
_worker_busy = False


class WorkerPool:
    """``workers`` processes carrying out jobs with a backend made by ``make_backend(backend_name, **options)``."""

    def __init__(self, workers: int, backend_name: str, backend_options: dict[str, str]) -> None:
        self._backend = (backend_name, backend_options)
        self._executor = ProcessPoolExecutor(workers, initializer=_init_worker, initargs=(os.getpid(),))
        self._workers: set[multiprocessing.process.BaseProcess] = set()

    def outcomes(self, run: Callable[..., RunOutcome], arguments: tuple[Any, ...],
                 jobs: list[Job]) -> Iterator[RunOutcome]:
        """Each job's outcome as it completes: ``run(*arguments, job, backend)`` in a worker."""
        # The executor has no public list of its workers, and stopping them mid-job needs one: they are the
        # multiprocessing children that its first submission starts (all at once, forked).
        before = set(multiprocessing.active_children())
        # The list is as_completed's alone, which lets go of each future once it is yielded: a finished future
        # holds its outcome, and a list of them kept every outcome twice.
        futures = [self._executor.submit(_run_in_worker, run, arguments, job, *self._backend) for job in jobs]
        self._workers |= set(multiprocessing.active_children()) - before
        return (future.result() for future in as_completed(futures))

    def stop(self) -> None:
        """SIGTERM the workers, wait until they are gone, SIGKILL any that outstay ``WORKER_STOP_TIMEOUT_S``."""
        workers = list(self._workers)
        for worker in workers:
            worker.terminate()
        deadline = time.monotonic() + WORKER_STOP_TIMEOUT_S
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.exitcode is None:
                worker.kill()
                worker.join()

    def close(self) -> None:
        """No job starts any more; the workers exit once idle."""
        self._executor.shutdown(cancel_futures=True)


class _WorkerStopped(BaseException):
    """The session asked this worker to stop (SIGTERM): its run's incarnation is killed on the way out."""


def _init_worker(harness_pid: int) -> None:
    """Pool initializer: the worker dies with the harness, and stops when the harness says so."""
    die_with_parent(harness_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _stop_worker)


def _stop_worker(signum: int, frame: object) -> None:
    """SIGTERM in a worker: unwind a run under way (which kills its incarnation), or exit at once when idle."""
    if _worker_busy:
        raise _WorkerStopped()
    os._exit(128 + signum)


def _run_in_worker(run: Callable[..., RunOutcome], arguments: tuple[Any, ...], job: Job, backend_name: str,
                   backend_options: dict[str, str]) -> RunOutcome:
    """Entry point of a worker: one backend per worker process, made on first use."""
    global _worker_backend, _worker_busy
    _worker_busy = True
    try:
        if _worker_backend is None:
            _worker_backend = make_backend(backend_name, **backend_options)
        return run(*arguments, job, _worker_backend)
    except _WorkerStopped:
        if _worker_backend is not None:
            _worker_backend.close()
        os._exit(128 + signal.SIGTERM)  # not back to the pool, which would start its next queued job
    finally:
        _worker_busy = False
