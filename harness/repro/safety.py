"""What ``killpoint repro`` may run for a token, and where the token's files are.

A token is pasted from a CI log or a chat and anyone can re-encode one, so a
command inside it is never authority to run it. The rule:

- A token that names a scenario FILE runs the workload of that file. If it also
  carries a command (the run was made with ``--workload`` over the file's), that
  command runs without asking only when it is the file's own or a workload
  shipped with killpoint (``SHIPPED_MODULES``: the reference and standalone
  runtimes and the mutants, alone or behind ``killpoint.scenarios.silent``).
- Any other command a token carries (``--workload`` over a file, or a run made
  from ``--workload/--plan``) is shown and runs only with ``RUN_EMBEDDED_FLAG``;
  the reproduce line printed for such a run includes the flag.

Paths: a token records the scenario file (or, for ``--workload/--plan``, the
directory the run was made in) relative to its project root (the nearest folder
above it holding ``.git``) and absolute. ``repro`` tries the project root of the
current directory, then the current directory (what old tokens recorded), then
the absolute path, and says what it needs when none has the file.

``decide`` is pure; ``scenario_for_token`` is the one function that reads files.
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from killpoint.errors import ConfigError
from killpoint.harness.config.scenario import expand_workload, load_scenario, scenario_from_flags, with_workload
from killpoint.harness.frontends._command import killpoint_command
from killpoint.harness.model import Scenario
from killpoint.harness.repro.token import ReproToken

RUN_EMBEDDED_FLAG = "--run-embedded-command"
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"  # the package shipped beside harness
SHIPPED_MODULES = frozenset({"killpoint.scenarios.reference_runtime", "killpoint.scenarios.standalone.runtime",
                             *(f"killpoint.scenarios.mutants.{path.stem}" for path in (SCENARIOS / "mutants").glob("*.py")
                               if path.stem != "__init__")})
SILENT = "killpoint.scenarios.silent"  # hides the rendezvous from the module it runs


def shipped_workload(command: str) -> bool:
    """``{python} -m M`` or ``{python} -m killpoint.scenarios.silent M`` with ``M`` a runtime shipped with killpoint."""
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if words[:2] != ["{python}", "-m"]:
        return False
    modules = words[2:]
    if len(modules) == 2 and modules[0] == SILENT:
        modules = modules[1:]
    return len(modules) == 1 and modules[0] in SHIPPED_MODULES


def needs_run_flag(origin: dict[str, str]) -> bool:
    """The token carries a command that only ``RUN_EMBEDDED_FLAG`` may run (judged without reading files).

    A run made with ``--workload`` equal to its file's own command is counted
    here too, so a printed line may carry the flag where ``repro`` would not
    need it, never the other way round.
    """
    command = origin.get("workload")
    if command is None:
        return False
    return "scenario" not in origin or not shipped_workload(command)


def repro_line(token: str) -> str:
    """The command that reproduces the run ``token`` names, as printed under a failure."""
    try:
        flag = needs_run_flag(ReproToken.decode(token).origin)
    except ConfigError:  # not a token killpoint made: print it as it is, ``repro`` will say why
        flag = False
    return f"{killpoint_command()} repro {RUN_EMBEDDED_FLAG + ' ' if flag else ''}{token}"


@dataclass(frozen=True)
class Decision:
    """What a repro runs: ``command`` in place of the scenario file's workload (None: the file's own), and why."""

    command: str | None
    notice: str | None = None  # a line to print before running (the token's own command, shown)


def decide(token: ReproToken, file_workload: tuple[str, ...] | None, *, run_embedded_command: bool) -> Decision:
    """The workload a repro of ``token`` may run, or a ConfigError that shows the command and asks for the flag.

    ``file_workload`` is the scenario file's own (expanded) workload when the
    token names a file, None when it was made from ``--workload/--plan``.
    """
    command = token.origin.get("workload")
    if command is None:
        return Decision(None)
    if file_workload is not None:
        if shipped_workload(command):
            return Decision(command)
        if _expanded(command) == file_workload:
            return Decision(None)
    if run_embedded_command:
        return Decision(command, f"running the workload command this token carries, as {RUN_EMBEDDED_FLAG} asks: "
                                 f"{command}")
    made_with = (f"--workload over the scenario file {token.origin['scenario']}, whose own workload differs"
                 if file_workload is not None else f"--workload and --plan {token.origin['plan']}")
    raise ConfigError(
        f"this token carries its own workload command, and anyone can write a token, so killpoint runs it only "
        f"when you ask: {command}\n(the run was made with {made_with}). Read the command; if you trust it, run:\n"
        f"{killpoint_command()} repro {RUN_EMBEDDED_FLAG} {token.encode()}")


def _expanded(command: str) -> tuple[str, ...] | None:
    try:
        return expand_workload(shlex.split(command))
    except ValueError:
        return None


def project_root(path: Path) -> Path | None:
    """The nearest folder at or above ``path`` holding ``.git`` (a checkout's top), or None."""
    return next((folder for folder in (path, *path.parents) if (folder / ".git").exists()), None)


def recorded_origin(origin: dict[str, str], cwd: Path) -> dict[str, str]:
    """The origin a token stores: the scenario file (or the run's directory) relative to its project root, and absolute.

    Outside any checkout the relative path stays as given (relative to ``cwd``).
    """
    return dict(_recorded_origin(tuple(sorted(origin.items())), cwd))


@functools.lru_cache(maxsize=16)
def _recorded_origin(origin_items: tuple[tuple[str, str], ...], cwd: Path) -> tuple[tuple[str, str], ...]:
    """``recorded_origin``, worked out once per origin: every run's token and record asks for it, and it walks
    the folders up to the project root."""
    origin = dict(origin_items)
    recorded = dict(origin)
    if "scenario" in origin:
        recorded["scenario"], recorded["scenario_absolute"] = _relative_and_absolute(Path(origin["scenario"]), cwd)
    else:
        directory = Path(origin.get("directory_absolute", cwd))
        recorded["directory"], recorded["directory_absolute"] = _relative_and_absolute(directory, cwd)
    return tuple(recorded.items())


def _relative_and_absolute(path: Path, cwd: Path) -> tuple[str, str]:
    absolute = (cwd / path).resolve()
    root = project_root(absolute if absolute.is_dir() else absolute.parent)
    return (str(absolute.relative_to(root)) if root else str(path)), str(absolute)


def candidates(relative: str | None, absolute: str | None, cwd: Path) -> list[Path]:
    """Where a recorded path may be now, in the order tried: from the project root of ``cwd``, from ``cwd``, absolute."""
    root = project_root(cwd.resolve())
    found = []
    if relative is not None:
        found += [*([root / relative] if root else []), cwd / relative]
    if absolute is not None:
        found.append(Path(absolute))
    unique: list[Path] = []
    for path in found:
        if all(path.resolve() != seen.resolve() for seen in unique):
            unique.append(path)
    return unique


def locate(relative: str | None, absolute: str | None, cwd: Path, what: str,
           present: Callable[[Path], bool]) -> Path:
    """The first of ``candidates`` where ``present`` holds, or a ConfigError listing every place tried."""
    tried = candidates(relative, absolute, cwd)
    for path in tried:
        if present(path):
            return path
    raise ConfigError(f"the token's {what} is not here; tried {', '.join(map(str, tried))}. Run repro from a checkout "
                      f"of the project the token was made in (its root or any folder below it), or on the machine "
                      f"that made it")


def scenario_for_token(token: ReproToken, *, run_embedded_command: bool, cwd: Path | None = None
                       ) -> tuple[Scenario, str | None]:
    """The scenario a repro of ``token`` runs and a notice to print first; ConfigError when it may not run or is gone."""
    cwd = cwd or Path.cwd()
    origin = token.origin
    if "scenario" in origin:
        path = locate(origin["scenario"], origin.get("scenario_absolute"), cwd, f"scenario file {origin['scenario']}",
                      Path.is_file)
        scenario = load_scenario(path)
        decision = decide(token, scenario.workload, run_embedded_command=run_embedded_command)
        return (with_workload(scenario, decision.command) if decision.command else scenario), decision.notice
    decision = decide(token, None, run_embedded_command=run_embedded_command)
    assert decision.command is not None  # a token from --workload/--plan always carries its command
    directory = locate(origin.get("directory", "."), origin.get("directory_absolute"), cwd,  # old tokens: cwd
                       f"plan {origin['plan']} (and the folder the run was made in)",
                       lambda folder: (folder / origin["plan"]).is_file())
    catalogue = origin.get("catalogue")
    scenario = scenario_from_flags(decision.command, str(directory / origin["plan"]),
                                   catalogue and str(directory / catalogue))
    return replace(scenario, cwd=directory, origin={**origin, "directory_absolute": str(directory.resolve())}), \
        decision.notice
