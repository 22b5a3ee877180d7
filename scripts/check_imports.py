#!/usr/bin/env python3
"""The import contract (DESIGN.md), checked statically with ``ast``; nothing is imported.

1. Nothing in ``cacao_tui/`` outside ``cacao_tui/ui/`` imports textual, so the engine runs
   headless and the TUI stays a front end.
2. ``ktt/`` imports nothing from ``cacao_tui`` and no UI or LLM library (textual, rich,
   anthropic, openai, google.genai), so the tuner runs on a bare GPU box.

Every ``import`` and ``from ... import`` counts, at module level or inside a function, plus
``importlib.import_module("...")`` and ``__import__("...")`` with a literal name.
Usage: ``python scripts/check_imports.py [ROOT]``; exit 1 and one line per violation.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

UI_ONLY = ("textual",)
KTT_FORBIDDEN = ("cacao_tui", "textual", "rich", "anthropic", "openai", "google.genai", "google.generativeai")


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


def check(root: Path) -> tuple[list[Violation], int]:
    """All violations under ``root`` and the number of files read."""
    violations: list[Violation] = []
    count = 0
    for package in ("cacao_tui", "ktt"):
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root)
            count += 1
            in_ui = relative.parts[:2] == ("cacao_tui", "ui")
            seen: set[tuple[int, str]] = set()  # one report per import statement and library
            for line, module in imported_modules(path, root):
                rule = None
                if package == "cacao_tui" and not in_ui and (hit := _matches(module, UI_ONLY)):
                    rule = "only cacao_tui/ui/ may import textual"
                elif package == "ktt" and (hit := _matches(module, KTT_FORBIDDEN)):
                    why = "ktt must not depend on the application" if hit == "cacao_tui" else "no UI or LLM library"
                    rule = f"ktt/: {why}"
                if rule is None or (line, hit) in seen:
                    continue
                seen.add((line, hit))
                violations.append(Violation(relative, line, module, rule))
    return violations, count


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    try:
        violations, count = check(root)
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
