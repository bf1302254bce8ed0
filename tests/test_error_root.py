"""Every exception killpoint defines is under the one root, and crosses a process boundary intact.

A worker process hands its errors to the session pickled; a caller catching
``HarnessError`` catches everything killpoint raises on purpose. The only
classes outside the root are stops that must never be caught by ``except
Exception`` (a SIGINT or SIGTERM, a worker told to stop, a search told to end):
they are named here, so a new one is a decision, not an accident.
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil

import pytest

import killpoint
from killpoint.errors import HarnessError

STOPS = {"killpoint.harness.execute.session.SessionInterrupted", "killpoint.harness.execute.pool._WorkerStopped",
         "killpoint.harness.execute.stop_signals.Terminated", "killpoint.harness.certify.trials._Abort"}


def defined_exceptions() -> list[type[BaseException]]:
    """Every exception class defined in killpoint's modules (the shipped workloads are the user's side)."""
    found = []
    for module in pkgutil.walk_packages(killpoint.__path__, "killpoint."):
        if module.name.startswith("killpoint.scenarios") or module.name.endswith("__main__"):
            continue
        loaded = importlib.import_module(module.name)
        found += [value for value in vars(loaded).values() if inspect.isclass(value)
                  and issubclass(value, BaseException) and value.__module__ == loaded.__name__]
    return found


EXCEPTIONS = defined_exceptions()


def qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_every_exception_is_a_harness_error_but_the_named_stops():
    outside = {qualified(cls) for cls in EXCEPTIONS if not issubclass(cls, HarnessError)}
    assert outside == STOPS
    assert not any(issubclass(cls, Exception) for cls in EXCEPTIONS if qualified(cls) in STOPS)


def sample(cls: type[BaseException]) -> BaseException:
    """An instance made from its constructor's required parameters: a number where one is asked, else a word."""
    arguments = []
    for parameter in inspect.signature(cls.__init__).parameters.values():
        if parameter.name == "self" or parameter.default is not inspect.Parameter.empty or parameter.kind in (
                inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            continue
        annotation = str(parameter.annotation)
        arguments.append(3 if "int" in annotation else [] if "list" in annotation else ()
                         if "tuple" in annotation else "a word")
    return cls(*arguments)


@pytest.mark.parametrize("cls", [cls for cls in EXCEPTIONS if issubclass(cls, HarnessError)], ids=qualified)
def test_each_error_survives_pickling(cls):
    error = sample(cls)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls and str(copy) == str(error) and copy.args == error.args
    assert vars(copy) == vars(error)
