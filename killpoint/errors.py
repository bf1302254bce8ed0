"""The harness's errors: one root, each also a builtin where one fits, all picklable.

Every exception killpoint raises is a ``HarnessError``, but for the stops no
``except Exception`` may swallow: SIGINT and SIGTERM (``KeyboardInterrupt``s)
and the signals that stop a worker or a search (``BaseException``s). A
``ConfigError`` is bad input (scenario, plan, catalogue, flags): the CLI
prints its message and exits 2. A ``WorkloadError`` means the workload could not
run its task even without a crash (it does not start, exits at once, hangs):
that is no recovery verdict, and also exits 2. An ``InfrastructureError`` is
the harness's own machinery failing (a process that survives SIGKILL, a fork
server that died): no verdict either, and its own exit code, 4. An
``InternalError`` never leaves killpoint: one that does is a bug (exit 4).
"""

from __future__ import annotations


class HarnessError(Exception):
    """Root of every error killpoint raises on purpose."""


class InternalError(HarnessError):
    """Raised and caught inside killpoint: a killed agent's request, a tool's refusal, evidence that cannot be
    read, a rule that cannot decide. Each is handled where it is raised; one that escapes is a bug in killpoint,
    reported with its traceback and no verdict (exit 4), never as bad input."""


class ConfigError(HarnessError, ValueError):
    """Bad input; the message names the file, line or field and the fix.

    ``problems`` holds every problem found, so a user fixes them in one pass.
    """

    def __init__(self, message: str, problems: tuple[str, ...] = ()) -> None:
        super().__init__(message, problems)
        self.message = message
        self.problems = problems

    def __str__(self) -> str:
        return "\n".join((self.message, *(f"  - {problem}" for problem in self.problems)))


class WorkloadError(HarnessError, RuntimeError):
    """The workload cannot carry out its task even when nothing kills it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InfrastructureError(HarnessError, RuntimeError):
    """The harness could not do its own part (kill, confirm, launch through its fork server); no verdict."""
