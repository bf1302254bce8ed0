"""Whether a repro run reproduced its token's: the exit code and the words, as Hypothesis's ``DidNotReproduce``.

A token records the properties its run broke (``ReproToken.expect``, empty for
a run that passed). ``killpoint repro`` reruns exactly that run; this module
compares what the token recorded with what the rerun found. The same
properties broken (or a pass again) reproduced it, and the exit code is the
run's own: 0 or 1. Anything else did not reproduce, and says so with its own
exit code, never 0: a fix, a flaky workload or a changed runtime all look like
this, and a person must be told which run they are looking at. A rerun that
could not be judged (unknown) tells nothing either way and exits as an
unknown run does.
"""

from __future__ import annotations

from killpoint.harness.model import Verdict

# The codes ``reproduction`` returns; cli.EXIT_CODES documents them with the rest.
EXIT_REPRODUCED_PASS, EXIT_REPRODUCED_FAILURE, EXIT_UNKNOWN, EXIT_DID_NOT_REPRODUCE = 0, 1, 3, 5


def reproduction(expected: tuple[str, ...], verdict: Verdict, unreached: tuple[str, ...] = ()) -> tuple[int, str]:
    """(exit code, what to print) for a rerun judged ``verdict`` of a token that recorded ``expected``.

    ``unreached`` are the scheduled kills whose moment never came in the rerun
    (the usual reason a failure is gone); the caller has printed them already.
    """
    recorded = f"the token recorded {_broken(expected)}"
    if verdict.valid is None:
        return EXIT_UNKNOWN, (f"unknown: this run could not be judged ({verdict.error or 'no reason given'}), so "
                              f"whether it reproduces is not known; {recorded}")
    found = verdict.properties if verdict.valid is False else ()
    if set(found) == set(expected):
        code = EXIT_REPRODUCED_FAILURE if found else EXIT_REPRODUCED_PASS
        return code, f"reproduced: this run {_broken(found, past=True)}, as the token recorded"
    if not found:
        why = ("The plan and catalogue are unchanged, so the workload itself now behaves differently at this kill"
               + (" (its moment never came)" if unreached else ""))
        return EXIT_DID_NOT_REPRODUCE, f"did not reproduce: {recorded}, and this run passed. {why}."
    gone, new = [name for name in expected if name not in found], [name for name in found if name not in expected]
    change = "; ".join(part for part in (f"no longer broken: {', '.join(gone)}" if gone else "",
                                         f"newly broken: {', '.join(new)}" if new else "") if part)
    return EXIT_DID_NOT_REPRODUCE, (f"did not reproduce: {recorded}, and this run {_broken(found, past=True)} "
                                    f"({change}). The failure above is real; it is another one.")


def _broken(properties: tuple[str, ...], *, past: bool = False) -> str:
    if not properties:
        return "passed" if past else "a passing run"
    return f"{'broke ' if past else ''}{', '.join(properties)}"
