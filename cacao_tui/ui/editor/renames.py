"""A scalar renamed in the editor: the expressions that used its old name follow it.

Buffer sizes, scalar values, the grid, the physical floor and the reference block are
expressions over scalars (ktt/expressions.py), and a case's ``scalars:`` names them as keys;
left on the old name they would fail to load. Whole names only: renaming ``N`` leaves ``NX``.
"""

from __future__ import annotations

import re
from typing import Any

from cacao_tui.problem.writer import ProblemSource

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
EXPRESSION_KEYS = (("grid", ("x", "y", "z")), ("physical_floor", ("bytes", "flops")))


def _renamed(value: Any, old: str, new: str) -> Any:
    if not isinstance(value, str):
        return value
    return re.sub(rf"(?<![A-Za-z0-9_]){re.escape(old)}(?![A-Za-z0-9_])", new, value)


def rename_in_problem(source: ProblemSource, old: str, new: str) -> bool:
    """Rename ``old`` to ``new`` in every expression of the problem; whether anything changed."""
    if not (NAME.match(old) and NAME.match(new)) or old == new:
        return False
    changed = False

    def update(mapping: dict[str, Any], key: str) -> None:
        nonlocal changed
        if key in mapping and (after := _renamed(mapping[key], old, new)) != mapping[key]:
            mapping[key] = after
            changed = True

    for arg in source.inputs.get("args") or []:
        if isinstance(arg, dict):
            for key in ("size", "value"):
                update(arg, key)
    problem = source.problem
    for section, keys in EXPRESSION_KEYS:
        if isinstance(problem.get(section), dict):
            for key in keys:
                update(problem[section], key)
    reference = problem.get("reference")
    if isinstance(reference, dict) and isinstance(reference.get("block"), dict):
        for key in ("x", "y", "z"):
            update(reference["block"], key)
    for case in problem.get("cases") or []:
        scalars = case.get("scalars") if isinstance(case, dict) else None
        if isinstance(scalars, dict):
            if old in scalars and new not in scalars:
                case["scalars"] = {new if k == old else k: v for k, v in scalars.items()}
                changed = True
            for key in list(case["scalars"]):
                update(case["scalars"], key)
    return changed
