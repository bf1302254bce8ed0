"""A stop asked for by SIGINT or SIGTERM is raised, and raised again if something swallowed it."""

from __future__ import annotations

import signal

import pytest

from killpoint.harness.execute.stop_signals import Terminated, raise_if_stopped, stop_signals


def swallowed(signum: signal.Signals) -> None:
    """Deliver ``signum`` to this thread inside code that swallows what its handler raises, as a careless callee does."""
    try:
        signal.raise_signal(signum)
    except KeyboardInterrupt:
        pass


@pytest.mark.parametrize(("signum", "raised"), [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Terminated)])
def test_a_stop_is_raised_where_it_lands_and_again_at_the_next_safe_point(signum, raised, ctrl_c_raises):
    with stop_signals():
        with pytest.raises(raised):
            signal.raise_signal(signum)
        swallowed(signum)
        with pytest.raises(raised):
            raise_if_stopped()


def test_no_stop_no_raise_and_leaving_restores_the_handlers_and_forgets_the_stop():
    before = {stop: signal.getsignal(stop) for stop in (signal.SIGINT, signal.SIGTERM)}
    with stop_signals():
        raise_if_stopped()
        swallowed(signal.SIGTERM)
    assert {stop: signal.getsignal(stop) for stop in before} == before
    raise_if_stopped()  # the stop belonged to the command that ended
    with stop_signals():
        raise_if_stopped()


def test_a_sigint_the_parent_ignores_stays_ignored():
    """A shell starts a script's background job with SIGINT ignored; the harness leaves it so, as Python does."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with stop_signals():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            signal.raise_signal(signal.SIGINT)
            raise_if_stopped()
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    finally:
        signal.signal(signal.SIGINT, previous)
