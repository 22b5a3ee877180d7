"""Class 5 of issue 10: parser crashes. Expressions in problem.yaml and in a model's tuning.yaml that
used to end in a traceback (or reach the model as ``internal error: ZeroDivisionError``) are one
line naming the file and field; every number is range-checked."""

from __future__ import annotations

from pathlib import Path

import pytest
from bounds_problem import make_problem, one_line

from ktt.candidates import launch_plan
from ktt.expressions import ExpressionError
from ktt.problem import ProblemError, load_problem
from ktt.spec import SpecError, load_spec_text

# The inputs that ended in a traceback or passed the 64-bit check before (division by zero, 1e999
# and pow(10, 10**9) were already one line; tests/ktt/test_expressions.py keeps them).
CRASHERS = [
    "pow(-8, 0.5)",
    "pow(0, -1)",
    "(" * 3000 + "N" + ")" * 3000,
    "(" * 150 + "N" + ")" * 150,
    "9" * 5000,
    "99999999999999999999999",
]


def set_grid_x(root: Path, value: str) -> None:
    text = (root / "problem.yaml").read_text()
    start = text.index("grid:")
    end = text.index("\n", text.index("x:", start))
    (root / "problem.yaml").write_text(text[:start] + f"grid:\n  x: '{value}'" + text[end:])


@pytest.mark.parametrize("expr", CRASHERS)
def test_problem_yaml_grid_expressions(expr: str, tmp_path: Path) -> None:
    root = make_problem(tmp_path)
    set_grid_x(root, expr)
    with pytest.raises(ProblemError) as info:
        load_problem(root)
    assert "grid" in str(info.value) and one_line(str(info.value)) and len(str(info.value)) < 400


def test_an_unquoted_huge_integer_is_refused(tmp_path: Path) -> None:
    root = make_problem(tmp_path)
    text = (root / "problem.yaml").read_text()
    start = text.index("grid:")
    end = text.index("\n", text.index("x:", start))
    (root / "problem.yaml").write_text(text[:start] + "grid:\n  x: 99999999999999999999999" + text[end:])
    with pytest.raises(ProblemError, match="64 bits"):
        load_problem(root)


@pytest.mark.parametrize("expr", CRASHERS)
def test_tuning_yaml_expressions_never_reach_the_model_as_internal_errors(expr: str, tmp_path: Path) -> None:
    problem = load_problem(make_problem(tmp_path))
    launch = f"  - kernel: scale\n    grid: {{x: '{expr}'}}\n    block: {{x: B}}\n"
    spec_text = f"tune_params: {{B: [32]}}\nlaunches:\n{launch}"
    try:
        spec = load_spec_text(spec_text, problem)
    except SpecError as exc:  # refused when read
        assert "launches[0].grid.x" in str(exc) and one_line(str(exc))
        return
    with pytest.raises(ExpressionError) as info:  # or when evaluated for a configuration
        launch_plan(spec, {"B": 32}, problem.primary)
    message = str(info.value)
    assert one_line(message) and "Error" not in message and len(message) < 300
