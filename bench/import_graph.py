"""The import graph of killpoint's modules and its cycles, from the source (no module is imported).

    python bench/import_graph.py [ROOT]

Counts every import of one project module by another, at module level and
inside functions (a lazy import that hides a cycle is still a cycle), and
prints the strongly connected components of more than one module, the package
edges (harness -> fake_tools, ...) and how many project modules the checker
and each report reach (``ROLES``). ROOT defaults to this checkout; pointed at an
old checkout (``git worktree add``) it reads the pre-namespace layout too.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

FOLDERS = ("killpoint", "harness", "fake_tools", "scenarios")
ROLES = ("checker", "summary", "report", "show", "merge")  # how much of the project importing each one reaches


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    name = ".".join(parts)
    return name if name.startswith("killpoint") or not (root / "killpoint" / "harness").exists() else f"killpoint.{name}"


def modules_of(root: Path) -> dict[str, Path]:
    found = {}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            if "__pycache__" not in path.parts and (folder != "killpoint" or not path.relative_to(root / folder).parts[0]
                                                    in FOLDERS[1:]):
                found[module_name(root, path)] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports, resolved to the longest known module name."""
    targets = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            candidates = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
                break
    return targets


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    sys.setrecursionlimit(10_000)

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def closure(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def package_of(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "killpoint" and len(parts) > 1 and parts[1] in FOLDERS else parts[0]


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    known = modules_of(root)
    graph = {name: imports_of(name, path, known) for name, path in known.items()}
    components = cycles(graph)
    print(f"{len(known)} modules, {sum(map(len, graph.values()))} import edges, {len(components)} cycles")
    for component in components:
        print(f"  cycle of {len(component)}: {', '.join(component)}")
    edges: dict[tuple[str, str], int] = defaultdict(int)
    for source, targets in graph.items():
        for target in targets:
            if package_of(source) != package_of(target):
                edges[package_of(source), package_of(target)] += 1
    print("package edges: " + "; ".join(f"{a} -> {b} ({n})" for (a, b), n in sorted(edges.items())))
    for role in ROLES:  # found by their last name, so an older checkout's flat harness/ is read too
        module = next(name for name in known if ".harness." in name and name.rsplit(".", 1)[-1] == role)
        print(f"{module} reaches {len(closure(graph, module)) - 1} project modules")


if __name__ == "__main__":
    main()
