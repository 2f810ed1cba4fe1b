#!/usr/bin/env python3
"""Fail when the project's own modules import each other in a cycle, or its packages do.

Reads every .py file of orchestrator/, jarb_core/, integrations/ (and mcp/, tools/ when they hold Python) with
`ast`, without importing anything, and records each import of a project module: at module level and inside
functions alike (an import moved into a function to dodge a cycle is still the cycle), and under
`if TYPE_CHECKING:` too (a type named from a module above is a dependency pointing the wrong way all the same).
`from pkg import name` counts as an import of `pkg.name` when that is a module, else of `pkg`; importing
`pkg.sub.mod` counts as importing `pkg` and `pkg.sub` too (their __init__ runs first), except the importer's own
packages.

Packages must point one way too: orchestrator's sub-packages (chat, jorbs, tools, ...) and top-level modules
(app, platform_graph), jarb_core and integrations are each one node, and no two may import each other however
indirectly (chat.graph -> tools.executor is fine; tools.executor -> chat.state as well would fail, even though
the modules themselves form no cycle).

    python scripts/check_import_cycles.py            # exit 1 and each cycle printed, or 0
    python scripts/check_import_cycles.py --stats    # also: modules, imports, imports inside functions

tests/test_import_cycles.py runs it, so `make test` fails on a new cycle.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOTS = ("orchestrator", "jarb_core", "integrations", "mcp", "tools")


@dataclass
class Graph:
    repo: Path
    modules: dict[str, Path] = field(default_factory=dict)
    edges: dict[str, dict[str, int]] = field(default_factory=dict)  # importer -> imported -> line
    imports: int = 0
    in_functions: int = 0


def module_name(path: Path, repo: Path) -> str:
    parts = list(path.relative_to(repo).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import with whether it sits inside a function."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, in_function))
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(tree, False)
    return found


def _resolve(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool, modules: dict[str, Path]) -> set[str]:
    def known(name: str) -> str | None:
        while name:
            if name in modules:
                return name
            name = name.rpartition(".")[0]
        return None

    targets: set[str] = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            if (hit := known(alias.name)) is not None:
                targets.add(hit)
        return targets
    if node.level:
        base = importer.split(".")
        if not is_package:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    for alias in node.names:
        full = f"{prefix}.{alias.name}" if prefix else alias.name
        hit = full if full in modules else known(prefix)
        if hit is not None:
            targets.add(hit)
    return targets


def _parents(module: str, modules: dict[str, Path]) -> list[str]:
    """The packages Python runs before `module` (importing a.b.c runs a/__init__ and a/b/__init__ first)."""
    parts = module.split(".")
    return [p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if p in modules]


def _is_ancestor(package: str, module: str) -> bool:
    """A module's own packages are already running when it runs; importing them again is not a new edge."""
    return module.startswith(package + ".")


def build(repo: Path = REPO, roots: tuple[str, ...] = ROOTS) -> Graph:
    graph = Graph(repo)
    files = [p for root in roots if (repo / root).is_dir() for p in sorted((repo / root).rglob("*.py"))]
    for path in files:
        graph.modules[module_name(path, repo)] = path
    for name, path in graph.modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        out = graph.edges.setdefault(name, {})
        for node, in_function in _imports(tree):
            targets = _resolve(node, name, path.name == "__init__.py", graph.modules) - {name}
            targets |= {parent for target in targets for parent in _parents(target, graph.modules)
                        if not _is_ancestor(parent, name)}
            graph.imports += bool(targets)
            graph.in_functions += bool(targets) and in_function
            for target in targets:
                out.setdefault(target, node.lineno)
    return graph


def strongly_connected(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively; components of more than one module (or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def shortest_cycle(component: list[str], edges: dict[str, dict[str, int]]) -> list[str]:
    """A shortest cycle through the component's first module, for the message (breadth first)."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges.get(node, {})):
                if child not in members:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return [start, start]


def describe(graph: Graph, component: list[str]) -> str:
    cycle = shortest_cycle(component, graph.edges)
    steps = [f"{a} -> {b} ({graph.modules[a].relative_to(graph.repo)}:{graph.edges[a][b]})"
             for a, b in zip(cycle, cycle[1:])]
    head = f"import cycle among {len(component)} modules: {', '.join(component)}"
    return "\n".join([head, "  e.g. " + "\n       ".join(steps)])


def package_of(module: str) -> str:
    """The package a module belongs to for the one-way rule: orchestrator's sub-packages (and its top-level
    modules) each count as one; jarb_core and integrations as one each."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "orchestrator" and len(parts) > 1 else parts[0]


def package_edges(graph: Graph) -> dict[str, dict[str, tuple[str, str]]]:
    """package -> package it imports -> one (importer, imported) pair of modules that does it."""
    edges: dict[str, dict[str, tuple[str, str]]] = {}
    # Sorted, deepest target first, so the example printed is the same on every run and names a module rather
    # than the package whose __init__ it runs on the way.
    for importer in sorted(graph.edges):
        for target in sorted(graph.edges[importer], key=lambda name: (-name.count("."), name)):
            a, b = package_of(importer), package_of(target)
            if a != b and b != "orchestrator":  # orchestrator/__init__ is empty: every module runs it
                edges.setdefault(a, {}).setdefault(b, (importer, target))
    return edges


def describe_packages(graph: Graph, edges: dict[str, dict[str, tuple[str, str]]], component: list[str]) -> str:
    cycle = shortest_cycle(component, {a: dict.fromkeys(bs, 0) for a, bs in edges.items()})
    steps = []
    for a, b in zip(cycle, cycle[1:]):
        importer, target = edges[a][b]
        steps.append(f"{a} -> {b} ({importer} imports {target}, "
                     f"{graph.modules[importer].relative_to(graph.repo)}:{graph.edges[importer][target]})")
    return "\n".join([f"packages import each other: {', '.join(component)}", "  e.g. " + "\n       ".join(steps)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stats", action="store_true", help="print how many imports there are, and where")
    parser.add_argument("--repo", type=Path, default=REPO, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    graph = build(args.repo)
    cycles = strongly_connected(graph.edges)
    if args.stats:
        print(f"{len(graph.modules)} modules, {graph.imports} imports of project modules, "
              f"{graph.in_functions} of them inside functions", flush=True)
    for component in cycles:
        print(describe(graph, component), file=sys.stderr)
    edges = package_edges(graph)
    package_cycles = strongly_connected({a: dict.fromkeys(bs, 0) for a, bs in edges.items()})
    for component in package_cycles:
        print(describe_packages(graph, edges, component), file=sys.stderr)
    if cycles or package_cycles:
        print(f"{len(cycles)} import cycle(s) of modules, {len(package_cycles)} of packages; break each "
              "(see docs/ARCHITECTURE.md, the dependency rule)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
