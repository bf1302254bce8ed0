"""A scenario is data: the workload to launch, the plan it carries out, the
catalogue it is judged against, the world it starts from, and a default schedule.

It comes from a TOML file (``scenarios/*.toml``) or from CLI flags; either way
every problem is reported at once, naming the file and field, before anything runs.
"""

from __future__ import annotations

import difflib
import shlex
import sys
import tomllib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from killpoint import _toml
from killpoint._input_files import DOCUMENT_LIMIT_BYTES, read_input
from killpoint._json import strict_json
from killpoint.catalogue import REFERENCE_CATALOGUE, Catalogue, load_catalogue
from killpoint.errors import ConfigError
from killpoint.fake_tools.base import REGISTRY, lookup
from killpoint.harness.agents.declared_tools import declared_classes
from killpoint.harness.agents.scenario_table import agent_journal, agent_problems, verify_read_problems
from killpoint.harness.config.database_table import database_problems, database_spec
from killpoint.harness.config.scenario_fields import plan_problems, scenario_problems
from killpoint.harness.judge.stores import journal_problems, store_table
from killpoint.harness.model import DEFAULT_TIMEOUT_S, KillSyntaxError, Plan, PlannedCall, Scenario
from killpoint.harness.schedules.schedule import planned_kill

T = TypeVar("T")
# How close an unlisted tool's name must be to a known one to be taken for a misspelling of it (difflib's ratio).
_NEAR_MISS = 0.8


def expand_workload(argv: list[str]) -> tuple[str, ...]:
    """``{python}`` in a workload command means this interpreter."""
    return tuple(word.replace("{python}", sys.executable) for word in argv)


def parse_plan(data: Any, where: str) -> Plan:
    """Check a plan against its field table (every problem at once) and build it."""
    problems = plan_problems(where, data)
    if problems:
        raise ConfigError(f"{where}: the plan has {len(problems)} problem(s)", tuple(problems))
    return _built_plan(data)


def _built_plan(data: dict[str, Any]) -> Plan:
    """The plan of a document ``plan_problems`` found nothing wrong with."""
    return Plan(data["task_id"], tuple(PlannedCall(call["call_id"], call["tool"], call.get("args", {}))
                                       for call in data["calls"]))


def load_plan_file(path: Path) -> Plan:
    raw = read_input(path, "the plan", limit=DOCUMENT_LIMIT_BYTES, fix="give the plan's JSON file")
    try:
        data = strict_json(raw)
    except ValueError as error:
        raise ConfigError(f"{path}: not valid JSON: {error}; a plan is a JSON object") from None
    return parse_plan(data, str(path))


def resolve_catalogue(reference: str | None, base: Path) -> Catalogue:
    if reference in (None, "reference"):
        return load_catalogue(REFERENCE_CATALOGUE)
    return load_catalogue(base / reference)


def _collected(read: Callable[[], T]) -> tuple[T | None, list[str]]:
    """What ``read`` returns and no problem, or None and every problem of the ConfigError it raised."""
    try:
        return read(), []
    except ConfigError as error:
        return None, list(error.problems or [error.message])


def load_scenario(path: str | Path) -> Scenario:
    """Read ``scenarios/NAME.toml``; relative paths in it are relative to the file.

    Every problem of the file, its plan, its catalogue, its schedule's kill
    points and its ``[journal]`` table is reported at once, in one ConfigError,
    before anything runs.
    """
    path = Path(path)
    raw = read_input(path, "the scenario", limit=DOCUMENT_LIMIT_BYTES, fix="check the path: a scenario is a TOML file")
    try:
        data = _toml.loads(raw.decode())
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (not UTF-8); a scenario is a TOML file") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    base = path.parent
    problems = scenario_problems(str(path), data)
    plan, unreadable, calls_at = _plan_of(path, data)
    problems += unreadable
    reference = data.get("catalogue")
    catalogue, unreadable = _collected(lambda: resolve_catalogue(reference, base)) \
        if reference is None or isinstance(reference, str) else (None, [])
    problems += unreadable
    journal = data.get("journal")
    if isinstance(journal, dict):  # not a table at all is a problem of the file's own fields
        problems += journal_problems(journal, str(path))
    database = data.get("database")
    if database is None or isinstance(database, dict):  # not a table at all is a problem of the file's own fields
        problems += database_problems(database, journal, str(path))
    agent = data.get("agent")
    if isinstance(agent, dict):
        problems += agent_problems(agent, plan, str(path), journal)
        if catalogue is not None and not problems:  # the agent's own tools are classed where they are declared
            for tool, tool_class in declared_classes(agent.get("tools", {})).items():
                catalogue = catalogue.with_class(tool, tool_class)
            problems += verify_read_problems(agent.get("verify", {}), catalogue, str(path))
    if plan is not None:
        schedule = data.get("schedule")
        problems += kill_at_problems(str(path), schedule if isinstance(schedule, dict) else {}, plan)
        if catalogue is not None:
            problems += unknown_tool_problems(calls_at, plan, catalogue)
    if problems or plan is None or catalogue is None:
        raise ConfigError(f"{path}: the scenario has {len(problems)} problem(s)", tuple(problems))
    world = data.get("world", {})
    workload = data["workload"]
    return Scenario(
        name=data.get("name", path.stem),
        workload=expand_workload(shlex.split(workload) if isinstance(workload, str) else workload),
        plan=plan,
        catalogue=catalogue,
        origin={"scenario": str(path)},
        cwd=base,
        world_files=world.get("files", {}),
        world_state=world.get("state", {}),
        timeout_s=float(data.get("timeout", DEFAULT_TIMEOUT_S)),
        max_extra_incarnations=data.get("max_incarnations", 3),
        default_schedule=data.get("schedule", {}),
        backend=data.get("backend"),
        image=data.get("image"),
        journal=(store_table(agent_journal(agent)) if agent is not None
                 else store_table(journal) if journal is not None else None),
        agent=agent,
        world_on_device=data.get("world_on_device", False),
        database=database_spec(database) if database is not None else None,
    )


def _plan_of(path: Path, data: dict[str, Any]) -> tuple[Plan | None, list[str], str]:
    """The scenario's plan (inline, or the file it names), its problems, and how a problem names its calls."""
    plan_data = data.get("plan")
    if isinstance(plan_data, str):
        plan_path = path.parent / plan_data
        plan, problems = _collected(lambda: load_plan_file(plan_path))
        return plan, problems, f"{plan_path}: calls"
    if not isinstance(plan_data, dict):
        return None, [], ""  # a missing or ill-typed plan is a problem of the scenario's own fields
    problems = plan_problems(str(path), plan_data, "plan")
    return (None if problems else _built_plan(plan_data)), problems, f"{path}: plan.calls"


def kill_at_problems(where: str, schedule: dict[str, Any], plan: Plan) -> list[str]:
    """Each kill point of ``[schedule] kill_at`` that does not parse, or names a call the plan does not make."""

    problems = []
    kills = schedule.get("kill_at")
    for index, text in enumerate(kills if isinstance(kills, list) else ()):
        if isinstance(text, str):
            try:
                planned_kill(text, plan)
            except KillSyntaxError as error:  # named by its file and field, not by the flag a kill may come from
                problems.append(f"{where}: schedule.kill_at[{index}]: {error.text!r}: {error.reason}")
    return problems


def unknown_tool_problems(calls_at: str, plan: Plan, catalogue: Catalogue) -> list[str]:
    """A planned tool that is a near miss of a known one (listed, or a fake tool) is taken for a slip of the pen.

    Any other unlisted tool is accepted: the rules make it UNKNOWN, and a runtime that carries out its own
    tools must show it VERIFIES such a call (``unlisted_tools`` says so before the session). ``calls_at``
    names the plan's calls in a problem: "FILE: plan.calls", "PLAN.json: calls".
    """
    known = sorted({*catalogue.tools, *REGISTRY})
    problems = []
    for index, call in enumerate(plan.calls):
        if call.tool in catalogue.tools or lookup(call.tool) is not None:
            continue
        near = difflib.get_close_matches(call.tool, known, n=1, cutoff=_NEAR_MISS)
        if near:
            problems.append(f"{calls_at}[{index}].tool: {call.tool!r} is neither in the catalogue nor a fake tool; "
                            f"did you mean {near[0]!r}? (to test an unlisted tool, give it a name no known tool is "
                            f"close to, or list it in the catalogue as UNKNOWN)")
    return problems


def unlisted_tools(plan: Plan, catalogue: Catalogue) -> list[str]:
    """The planned tools that neither the catalogue lists nor a fake tool implements, in plan order, each once.

    The rules class them as the catalogue's default (UNKNOWN unless it says otherwise); the workload must
    carry them out itself, and a crash-free run that cannot is a workload error, not a verdict.
    """
    return list(dict.fromkeys(call.tool for call in plan.calls
                              if call.tool not in catalogue.tools and lookup(call.tool) is None))


def unlisted_tools_note(plan: Plan, catalogue: Catalogue) -> str | None:
    """The line said before a session whose plan calls unlisted tools; None when it calls none."""
    tools = unlisted_tools(plan, catalogue)
    if not tools:
        return None
    names = ", ".join(repr(tool) for tool in tools)
    return (f"note: {names} {'is' if len(tools) == 1 else 'are'} in neither the catalogue nor the fake tools: "
            f"the rules class {'it' if len(tools) == 1 else 'them'} {catalogue.default} (the catalogue's default), "
            f"and the workload carries {'it' if len(tools) == 1 else 'them'} out itself")


def scenario_from_flags(workload: str, plan: str, catalogue: str | None) -> Scenario:
    """A scenario from ``--workload CMD --plan PLAN.json --catalogue CATALOGUE``; every problem of the three at once."""
    plan_path = Path(plan)
    argv, problems = _collected(lambda: split_workload(workload))
    loaded_plan, unreadable = _collected(lambda: load_plan_file(plan_path))
    problems += unreadable
    loaded_catalogue, unreadable = _collected(lambda: resolve_catalogue(catalogue, Path(".")))
    problems += unreadable
    if loaded_plan is not None and loaded_catalogue is not None:
        problems += unknown_tool_problems(f"{plan_path}: calls", loaded_plan, loaded_catalogue)
    if problems or argv is None or loaded_plan is None or loaded_catalogue is None:
        raise ConfigError(f"--workload, --plan and --catalogue: {len(problems)} problem(s); nothing was run",
                          tuple(problems))
    origin = {"workload": workload, "plan": plan}
    if catalogue:
        origin["catalogue"] = catalogue
    return Scenario(
        name=plan_path.stem,
        workload=expand_workload(argv),
        plan=loaded_plan,
        catalogue=loaded_catalogue,
        origin=origin,
        cwd=Path("."),
    )


def with_workload(scenario: Scenario, workload: str) -> Scenario:
    """The scenario with its workload command replaced (to run a mutant, say)."""
    return replace(scenario, workload=expand_workload(split_workload(workload)),
                   origin={**scenario.origin, "workload": workload})


def split_workload(workload: str) -> list[str]:
    """``--workload 'CMD ARGS'`` split as a shell would, or a usage error saying why it cannot be."""
    try:
        argv = shlex.split(workload)
    except ValueError as error:
        raise ConfigError(f"--workload {workload!r}: {error}; quote it as a shell would") from None
    if not argv:
        raise ConfigError("--workload: empty command; give the command that starts your runtime")
    return argv
