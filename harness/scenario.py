"""A scenario is data: the workload to launch, the plan it carries out, the
catalogue it is judged against, the world it starts from, and a default schedule.

It comes from a TOML file (``scenarios/*.toml``) or from CLI flags; either way
every problem is reported at once, naming the file and field, before anything runs.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from killpoint._json import strict_json
from killpoint.errors import ConfigError
from killpoint.fake_tools.catalogue import (
    REFERENCE_CATALOGUE,
    Catalogue,
    load_catalogue,
)
from killpoint.harness.scenario_fields import not_json, scenario_problems

DEFAULT_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class PlannedCall:
    call_id: str
    tool: str
    args: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Plan:
    task_id: str
    calls: tuple[PlannedCall, ...]

    def to_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id,
                "calls": [{"call_id": c.call_id, "tool": c.tool, "args": c.args} for c in self.calls]}

    @property
    def digest(self) -> str:
        """A short hash of the plan's canonical JSON: what a repro token pins."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:12]

    @property
    def call_ids(self) -> tuple[str, ...]:
        return tuple(call.call_id for call in self.calls)

    def call(self, call_id: str) -> PlannedCall | None:
        return next((call for call in self.calls if call.call_id == call_id), None)


@dataclass(frozen=True)
class Scenario:
    name: str
    workload: tuple[str, ...]
    plan: Plan
    catalogue: Catalogue = field(hash=False)
    # Where the scenario came from, as a repro token re-reads it.
    origin: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    cwd: Path = Path(".")
    world_files: dict[str, str] = field(default_factory=dict, hash=False)
    world_state: dict[str, Any] = field(default_factory=dict, hash=False)
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_extra_incarnations: int = 3
    default_schedule: dict[str, Any] = field(default_factory=dict, hash=False)
    backend: str | None = None  # the file's choice; --backend overrides it
    image: str | None = None  # for the docker backend; --image overrides it

    @property
    def catalogue_digest(self) -> str:
        text = json.dumps(self.catalogue.to_protocol(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def expand_workload(argv: list[str]) -> tuple[str, ...]:
    """``{python}`` in a workload command means this interpreter."""
    return tuple(word.replace("{python}", sys.executable) for word in argv)


def parse_plan(data: Any, where: str) -> Plan:
    """Check a plan's shape (every problem at once) and build it."""
    problems: list[str] = []
    if not isinstance(data, dict):
        raise ConfigError(f'{where}: a plan is {{"task_id": "t1", "calls": [{{"call_id": "c1", "tool": ..., "args": {{}}}}]}}')
    task_id = data.get("task_id")
    if not isinstance(task_id, str) or not task_id:
        problems.append(f"{where}: task_id: missing or not a string; give the task a name")
    calls = data.get("calls")
    if not isinstance(calls, list) or not calls:
        problems.append(f"{where}: calls: missing or empty; list at least one call")
        calls = []
    seen: set[str] = set()
    planned = []
    for index, call in enumerate(calls):
        here = f"{where}: calls[{index}]"
        if not isinstance(call, dict):
            problems.append(f"{here}: must be a table with call_id, tool and args")
            continue
        call_id, tool, args = call.get("call_id"), call.get("tool"), call.get("args", {})
        if not isinstance(call_id, str) or not call_id:
            problems.append(f"{here}.call_id: missing or not a string")
        elif call_id in seen:
            problems.append(f"{here}.call_id: {call_id!r} is used twice; call ids must be unique in a plan")
        elif ":" in call_id:
            problems.append(f"{here}.call_id: {call_id!r} contains ':', which separates call and point in a kill point")
        seen.add(call_id if isinstance(call_id, str) else "")
        if not isinstance(tool, str) or not tool:
            problems.append(f"{here}.tool: missing or not a string")
        if not isinstance(args, dict):
            problems.append(f"{here}.args: must be a table of arguments")
        elif (wrong := not_json(args)) is not None:
            problems.append(f"{here}.args: {wrong}")
        unknown = sorted(set(call) - {"call_id", "tool", "args"})
        if unknown:
            problems.append(f"{here}: unknown key(s) {', '.join(unknown)}; a call has call_id, tool, args")
        planned.append(PlannedCall(str(call_id), str(tool), args if isinstance(args, dict) else {}))
    if problems:
        raise ConfigError(f"{where}: the plan has {len(problems)} problem(s)", tuple(problems))
    return Plan(task_id, tuple(planned))


def load_plan_file(path: Path) -> Plan:
    try:
        data = strict_json(path.read_bytes())
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the plan ({error.strerror})") from None
    except ValueError as error:
        raise ConfigError(f"{path}: not valid JSON: {error}; a plan is a JSON object") from None
    return parse_plan(data, str(path))


def resolve_catalogue(reference: str | None, base: Path) -> Catalogue:
    if reference in (None, "reference"):
        return load_catalogue(REFERENCE_CATALOGUE)
    return load_catalogue(base / reference)


def load_scenario(path: str | Path) -> Scenario:
    """Read ``scenarios/NAME.toml``; relative paths in it are relative to the file.

    Every problem of the file, its plan and its catalogue is reported at once.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_bytes().decode())
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the scenario ({error.strerror}); check the path") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (not UTF-8); a scenario is a TOML file") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to read; a scenario is a few flat tables") from None
    base = path.parent
    problems = scenario_problems(str(path), data)
    plan, catalogue = None, None
    try:
        plan_data = data.get("plan")
        plan = load_plan_file(base / plan_data) if isinstance(plan_data, str) else parse_plan(plan_data, f"{path}: [plan]")
    except ConfigError as error:
        problems += error.problems or [error.message]
    reference = data.get("catalogue")
    if reference is None or isinstance(reference, str):
        try:
            catalogue = resolve_catalogue(reference, base)
        except ConfigError as error:
            problems += error.problems or [error.message]
    if plan is not None and catalogue is not None:
        problems += unknown_tool_problems(str(path), plan, catalogue)
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
    )


def unknown_tool_problems(where: str, plan: Plan, catalogue: Catalogue) -> list[str]:
    """A planned tool that neither the catalogue lists nor a fake tool implements can never run."""
    from killpoint.fake_tools.base import lookup

    return [f"{where}: calls[{index}].tool: {call.tool!r} is neither in the catalogue nor a fake tool; "
            f"check the spelling (`killpoint catalogue list` shows the tools)"
            for index, call in enumerate(plan.calls) if call.tool not in catalogue.tools and lookup(call.tool) is None]


def scenario_from_flags(workload: str, plan: str, catalogue: str | None) -> Scenario:
    """A scenario from ``--workload CMD --plan PLAN.json --catalogue CATALOGUE``."""
    argv = split_workload(workload)
    plan_path = Path(plan)
    origin = {"workload": workload, "plan": plan}
    if catalogue:
        origin["catalogue"] = catalogue
    return Scenario(
        name=plan_path.stem,
        workload=expand_workload(argv),
        plan=load_plan_file(plan_path),
        catalogue=resolve_catalogue(catalogue, Path(".")),
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
