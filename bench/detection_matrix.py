"""Detection matrix: every mutant of the zoo under every mode; writes docs/detection.md.

    .venv/bin/python bench/detection_matrix.py [--jobs 2] [--random 200] [--hunt-examples 300] [--backend NAME]

For each mutant and mode it records whether the mode caught the bug, whether the
property named in the first failing run is the intended one, and how many
schedules and seconds it took to the first catch (the session stops there). The
last column is the size of the plan ``killpoint hunt`` shrinks the bug to.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from killpoint.errors import ConfigError
from killpoint.harness.config.scenario import load_scenario, with_workload
from killpoint.harness.frontends.spec import SessionSpec, build_spec, run_spec
from killpoint.harness.model import RunOutcome
from killpoint.harness.schedules.hunt import hunt
from killpoint.scenarios.mutants import Mutant, zoo

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "detection.md"


@dataclass(frozen=True)
class Cell:
    caught: bool
    properties: tuple[str, ...]
    schedules: int
    seconds: float


def modes(runs: int) -> dict[str, dict[str, Any]]:
    """Mode name -> the choices of ``killpoint run`` that make it (``spec.build_spec``'s keywords)."""
    return {
        "depth 1": {"exhaustive": True, "depth": 1},
        "depth 2": {"exhaustive": True, "depth": 2},
        f"random {runs}": {"random": runs, "seed": 0},
        "timed 60": {"timed": True, "runs": 60, "seed": 0},
        "torn tail": {"exhaustive": True, "torn_tail": True},
        "drift": {"exhaustive": True, "drift": "append=READ_ONLY"},
        "power loss": {"exhaustive": True, "power_loss": True},
    }


def run_cell(spec: SessionSpec) -> Cell:
    first: list[tuple[int, float, RunOutcome]] = []
    started = time.monotonic()
    count = 0

    def seen(outcome: RunOutcome) -> None:
        nonlocal count
        count += 1
        if not outcome.verdict.valid and not first:
            first.append((count, time.monotonic() - started, outcome))

    _, outcomes = run_spec(spec, on_outcome=seen)
    if not first:
        return Cell(False, (), len(outcomes), time.monotonic() - started)
    schedules, seconds, outcome = first[0]
    return Cell(True, outcome.verdict.properties, schedules, seconds)


def render(rows: list[tuple[Mutant, dict[str, Cell | None], int | None]], mode_names: list[str], command: str,
           backends: str) -> str:
    lines = [
        "# Detection matrix",
        "",
        "Every mutant runtime of `scenarios/mutants/` (the reference runtime with one realistic bug) under",
        "every mode. A cell reads `caught: schedules to the first catch / seconds`, with the property named",
        "in the first failing run; ✔ marks the intended property among those named, ✘ a catch under another",
        "property. `-` means the mode did not catch the bug (all its schedules passed); `n/a` that the mode",
        "does not apply to the mutant's scenario (a torn tail of a runtime judged from its own store). The last column is",
        "the number of calls in the plan `killpoint hunt` shrinks the bug to.",
        "",
        f"Backend of the mode columns: {backends}; `hunt` runs on the workload's default backend.",
        "",
        f"Regenerate with `{command}`.",
        "",
        "| mutant | intended property | " + " | ".join(mode_names) + " | hunt: calls |",
        "|---|---|" + "---|" * len(mode_names) + "---|",
    ]
    for mutant, cells, shrunk in rows:
        rendered = []
        for name in mode_names:
            cell = cells[name]
            if cell is None:
                rendered.append("n/a")
                continue
            if not cell.caught:
                rendered.append("-")
                continue
            mark = "✔" if mutant.caught_by in cell.properties else "✘ " + ", ".join(cell.properties)
            rendered.append(f"{mark} {cell.schedules} / {cell.seconds:.1f}s")
        lines.append(f"| `{mutant.name}` | {mutant.caught_by} | " + " | ".join(rendered)
                     + f" | {shrunk if shrunk is not None else '-'} |")
    lines += ["", "## The bugs", ""]
    lines += [f"- `{mutant.name}` ({mutant.scenario}): {mutant.bug}" for mutant, _, _ in rows]
    caught_all = all(any(cell is not None and cell.caught and mutant.caught_by in cell.properties
                         for cell in cells.values())
                     for mutant, cells, _ in rows)
    lines += ["", f"Every mutant caught with its intended property by at least one mode: {'yes' if caught_all else 'NO'}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--random", type=int, default=200)
    parser.add_argument("--hunt-examples", type=int, default=300)
    parser.add_argument("--backend", choices=("subprocess", "forkserver", "docker"),
                        help="default: each workload's own default, as `killpoint run` picks it")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="killpoint-matrix-"))
    rows = []
    mode_names: list[str] = []
    backends: set[str] = set()
    for mutant in zoo():
        scenario = with_workload(load_scenario(ROOT / "scenarios" / f"{mutant.scenario}.toml"), mutant.workload)
        cells: dict[str, Cell | None] = {}
        for name, choices in modes(args.random).items():
            try:
                spec = build_spec(scenario, **choices, backend=args.backend, jobs=args.jobs, exitfirst=True,
                                  runs_dir=Path(tempfile.mkdtemp(dir=work)))
            except ConfigError:  # the mode does not apply to this scenario
                cells[name] = None
                continue
            backends.add(spec.backend)
            cells[name] = run_cell(spec)
            print(f"{mutant.name:<30} {name:<12} {cells[name]}", flush=True)
        mode_names = list(cells)
        found = hunt([ROOT / "scenarios" / f"{mutant.scenario}.toml"], mutant.workload,
                     Path(tempfile.mkdtemp(dir=work)), max_examples=args.hunt_examples, seed=1)
        rows.append((mutant, cells, len(found.found.example.plan.calls) if found.found else None))
    command = (f".venv/bin/python bench/detection_matrix.py --jobs {args.jobs} --random {args.random} "
               f"--hunt-examples {args.hunt_examples}" + (f" --backend {args.backend}" if args.backend else ""))
    DOC.write_text(render(rows, mode_names, command, ", ".join(sorted(backends))))
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
