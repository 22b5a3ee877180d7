"""A YAML mistake is named on its own line (issue 32 item 14): a key without its ':', an unclosed
[ { or quote on line 13 is reported on line 13, where it began, not on line 14 (or the file's
end) where the parser noticed it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ktt.problem import ProblemError, load_problem

MMUL = Path(__file__).resolve().parents[2] / "problems" / "mmul"
LINE_13 = '  compute_capability: "9.0"'


@pytest.mark.parametrize(
    ("broken", "column"),
    [('  compute_capability "9.0"', 3), ("  compute_capability: [9.0", 23), ("  compute_capability: {a: 1", 23),
     ('  compute_capability: "9.0', 23), ('  compute_capability: "9.0": x', 28)],
)  # fmt: skip
def test_a_break_on_line_13_is_named_on_line_13(broken: str, column: int, tmp_path: Path) -> None:
    problem = tmp_path / "mmul"
    shutil.copytree(MMUL, problem, ignore=shutil.ignore_patterns("output", "archive", "demo"))
    lines = (problem / "problem.yaml").read_text().splitlines()
    assert lines[12] == LINE_13
    lines[12] = broken
    (problem / "problem.yaml").write_text("\n".join(lines) + "\n")
    with pytest.raises(ProblemError) as raised:
        load_problem(problem)
    line = raised.value.line()
    assert f"problem.yaml: line 13, column {column}: YAML syntax error" in line, line
