#!/usr/bin/env python3
"""The import contract (DESIGN.md), checked statically with ``ast``; nothing is imported.

1. Nothing in ``cacao_tui/`` outside ``cacao_tui/ui/`` imports textual, so the engine runs
   headless and the TUI stays a front end.
2. ``ktt/`` imports nothing from ``cacao_tui`` and no UI or LLM library (textual, rich,
   anthropic, openai, google.genai), so the tuner runs on a bare GPU box.
3. Inside ``cacao_tui/`` dependencies point one way, down the layers of ``LAYERS``:
   front ends and entry points (ui, headless, cli, launch, ...) -> engine -> nodes ->
   services (llm, store, problem, settings, ...). A module may import its own layer and
   those below, never one above; every top-level module or package of ``cacao_tui/`` must
   be in a layer (a new one is reported until it is placed).
4. No circles between modules, anywhere in ``cacao_tui/`` and ``ktt/``: if module A imports
   B, B may not import A, directly or through others (DESIGN.md, "No circles"). The shared
   part moves below both, or one side receives a callback or a Protocol. Each circle is one
   line, from its first module round to it again, with the line of every import on the way.

Every ``import`` and ``from ... import`` counts, at module level, inside a function or under
``if TYPE_CHECKING:``, plus ``importlib.import_module("...")`` and ``__import__("...")`` with a
literal name. ``from package import name`` depends on the package's ``__init__`` and, when
``name`` is a submodule, on that module too.
Usage: ``python scripts/check_imports.py [ROOT]``; exit 1 and one line per violation.
"""

from __future__ import annotations

import ast
import itertools
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

UI_ONLY = ("textual",)
KTT_FORBIDDEN = ("cacao_tui", "textual", "rich", "anthropic", "openai", "google.genai", "google.generativeai")

# The layers of cacao_tui, top first, each a name and its top-level modules and packages
# ("" is the package's own __init__). DESIGN.md: ui -> engine -> nodes -> (llm, store, problem).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "front ends and entry points",
        (
            "ui", "headless", "runs", "__main__", "cli", "steer_flags", "launch", "launch_phases", "run_options",
            "run_request", "suite", "kernelbench", "resume_provider",
        ),
    ),
    ("engine", ("engine",)),
    ("nodes", ("nodes",)),
    (
        "services",
        ("", "llm", "store", "problem", "settings", "flag_bounds", "prompts", "ktt_client", "subprocesses", "tuners",
         "cluster"),
    ),
)
CIRCLE_FIX = "move the shared part below both, or pass a callback or a Protocol"
_RANK = {name: rank for rank, (_, names) in enumerate(LAYERS) for name in names}


@dataclass(frozen=True)
class Violation:
    path: Path
    line: int
    module: str
    rule: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.module}: {self.rule}"


def _module_of(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve_relative(current: str, is_package: bool, level: int, module: str | None) -> str:
    base = current.split(".") if current else []
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, module] if module else base)


def imported_modules(path: Path, root: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) for every import in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    current = _module_of(path, root)
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = _resolve_relative(current, is_package, node.level, node.module)
            yield node.lineno, base
            # "from google import genai" imports google.genai.
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{base}.{alias.name}" if base else alias.name
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                yield node.lineno, node.args[0].value


def _matches(module: str, names: tuple[str, ...]) -> str | None:
    return next((n for n in names if module == n or module.startswith(n + ".")), None)


def _top_level(root: Path) -> set[str]:
    """The top-level modules and packages of cacao_tui/ ("" for the package itself)."""
    base = root / "cacao_tui"
    names = {""}
    if base.is_dir():
        for p in base.iterdir():
            if p.suffix == ".py" and p.stem != "__init__":
                names.add(p.stem)
            elif p.is_dir() and any(p.glob("*.py")):
                names.add(p.name)
    return names


def _unit(module: str, top: set[str]) -> str | None:
    """The top-level unit of cacao_tui a module name belongs to; None outside cacao_tui.

    ``from cacao_tui import __version__`` names an attribute of the package: its unit is "".
    """
    parts = module.split(".")
    if parts[0] != "cacao_tui":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in top else ""


def _layer_rule(source: str, target: str) -> str | None:
    """Why ``source`` may not import ``target`` (top-level units of cacao_tui), or None."""
    if source == target or source not in _RANK or target not in _RANK:
        return None
    if _RANK[target] < _RANK[source]:
        above, below = LAYERS[_RANK[target]][0], LAYERS[_RANK[source]][0]
        return f"layers: {below} may not import {above} (ui -> engine -> nodes -> services)"
    return None


def check(root: Path) -> tuple[list[Violation], int]:
    """All violations under ``root`` and the number of files read."""
    violations: list[Violation] = []
    count = 0
    top = _top_level(root)
    for name in sorted(top - set(_RANK)):
        where = root / "cacao_tui" / name
        path = where / "__init__.py" if where.is_dir() else where.with_suffix(".py")
        rule = "layers: not in a layer; add it to LAYERS in scripts/check_imports.py"
        violations.append(Violation(path.relative_to(root), 1, f"cacao_tui.{name}", rule))
    for package in ("cacao_tui", "ktt"):
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root)
            count += 1
            in_ui = relative.parts[:2] == ("cacao_tui", "ui")
            source = _unit(_module_of(path, root), top) if package == "cacao_tui" else None
            seen: set[tuple[int, str]] = set()  # one report per import statement and library
            for line, module in imported_modules(path, root):
                rule = None
                if package == "cacao_tui" and not in_ui and (hit := _matches(module, UI_ONLY)):
                    rule = "only cacao_tui/ui/ may import textual"
                elif package == "ktt" and (hit := _matches(module, KTT_FORBIDDEN)):
                    why = "ktt must not depend on the application" if hit == "cacao_tui" else "no UI or LLM library"
                    rule = f"ktt/: {why}"
                elif source is not None and (target := _unit(module, top)) is not None:
                    rule, hit = _layer_rule(source, target), f"cacao_tui.{target}"
                if rule is None or (line, hit) in seen:
                    continue
                seen.add((line, hit))
                violations.append(Violation(relative, line, module, rule))
    return violations, count


def module_graph(root: Path) -> dict[str, dict[str, int]]:
    """module -> {module it imports: the line of the first such import}, within cacao_tui/ and ktt/."""
    files = {
        _module_of(path, root): path
        for package in ("cacao_tui", "ktt")
        for path in sorted((root / package).rglob("*.py"))
    }
    graph: dict[str, dict[str, int]] = {name: {} for name in files}
    for name, path in files.items():
        edges = graph[name]
        for line, module in imported_modules(path, root):
            if module in files and module != name and module not in edges:
                edges[module] = line
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The circles of the graph, each as [a, b, ..., a]: for every strongly connected group of
    modules (Tarjan), the shortest way round through each of its members not yet on one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def enter(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)

    for root in sorted(graph):  # iterative depth-first search: no recursion limit
        if root in index:
            continue
        enter(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    enter(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while node not in group:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                    if len(group) > 1:
                        groups.append(sorted(group))
    found = []
    for group in sorted(groups):
        covered: set[str] = set()
        for member in group:
            if member not in covered:
                way = _shortest_round(graph, set(group), member)
                covered.update(way)
                found.append(way)
    return found


def _shortest_round(graph: dict[str, dict[str, int]], members: set[str], start: str) -> list[str]:
    """The shortest path from ``start`` back to itself through ``members`` (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node]):
                if nxt == start:
                    way = [node]
                    while way[-1] != start:
                        way.append(came_from[way[-1]])
                    return [*reversed(way), start]
                if nxt in members and nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{start} is on no circle")  # a strongly connected group always has one


def circle_violations(root: Path) -> list[Violation]:
    graph = module_graph(root)
    found = []
    for circle in circles(graph):
        steps = " -> ".join(f"{a}:{graph[a][b]}" for a, b in itertools.pairwise(circle)) + f" -> {circle[-1]}"
        path = Path(*circle[0].split("."))
        path = path / "__init__.py" if (root / path).is_dir() else path.with_suffix(".py")
        rule = f"circle (module:line of each import): {steps}; {CIRCLE_FIX}"
        found.append(Violation(path, graph[circle[0]][circle[1]], circle[1], rule))
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    try:
        violations, count = check(root)
        violations += circle_violations(root)
    except SyntaxError as exc:
        print(f"{exc.filename}:{exc.lineno}: cannot parse: {exc.msg}", file=sys.stderr)
        return 1
    for v in violations:
        print(v)
    if violations:
        print(f"import contract: {len(violations)} violation(s) in {count} files", file=sys.stderr)
        return 1
    print(f"import contract: OK ({count} files)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
