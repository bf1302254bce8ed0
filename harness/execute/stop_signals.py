"""Ctrl-C and SIGTERM end a command, and a stop asked for is never lost.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be when
the signal's handler runs. Most places let it through; a few swallow it (C code
that clears any error, such as a lookup calling a Python ``__eq__``; a
library's ``except BaseException``), and a session would then run on to its
end as if no one had asked it to stop. So the handlers installed here also
record the signal, and a long loop calls ``raise_if_stopped`` at its safe
points (the session after every run it reports): a stop that was swallowed is
raised again there, milliseconds later.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C's KeyboardInterrupt is, so that both end a command alike."""


_requested: signal.Signals | None = None  # the stop signal received since ``stop_signals`` was entered


def _stop(signum: int, frame: FrameType | None) -> None:
    global _requested
    _requested = signal.Signals(signum)
    raise_if_stopped()


def raise_if_stopped() -> None:
    """Raise the stop received (KeyboardInterrupt for SIGINT, Terminated for SIGTERM), if one was."""
    if _requested is signal.SIGTERM:
        raise Terminated()
    if _requested is signal.SIGINT:
        raise KeyboardInterrupt()


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """Within: SIGINT and SIGTERM raise in the main thread and are recorded; on leaving, the old handlers return.

    A SIGINT its parent ignores stays ignored, as Python and every shell do (a
    background job of a script is started so): nothing else can deliver it.
    """
    global _requested
    _requested = None
    stops = [signal.SIGTERM] + ([signal.SIGINT] if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN else [])
    previous = {stop: signal.signal(stop, _stop) for stop in stops}
    try:
        yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)
        _requested = None

