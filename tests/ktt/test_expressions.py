from __future__ import annotations

import pytest

from ktt.expressions import Expression, ExpressionError


@pytest.mark.parametrize(
    ("text", "env", "value"),
    [
        ("7 / 2", {}, 3),
        ("-7 / 2", {}, -3),  # C truncates toward zero
        ("-7 % 3", {}, -1),
        ("(N + 15) / 16", {"N": 33}, 3),
        ("BX * BY <= 1024 && BX % 32 == 0", {"BX": 64, "BY": 8}, 1),
        ("BX * BY <= 1024 and not BX == 64", {"BX": 64, "BY": 8}, 0),
        ("X > 2 ? 10 : 20", {"X": 3}, 10),
        ("ceil_div(N, 32) * 32", {"N": 33}, 64),
        ("min(A, B, 3)", {"A": 5, "B": 4}, 3),
        ("1 << 10", {}, 1024),
        ("N / 16 // the grid", {"N": 64}, 4),
        ("4.0 / 8", {}, 0.5),
    ],
)
def test_values(text: str, env: dict, value: float) -> None:
    assert Expression(text).evaluate(env) == value


def test_names_and_errors() -> None:
    e = Expression("BLOCK * TILE + N")
    assert e.names == {"BLOCK", "TILE", "N"}
    with pytest.raises(ExpressionError, match="unknown name 'TILE'"):
        e.evaluate({"BLOCK": 1, "N": 2})
    with pytest.raises(ExpressionError, match="division by zero"):
        Expression("1 / X").evaluate({"X": 0})
    with pytest.raises(ExpressionError, match="unknown function"):
        Expression("system(1)")
    with pytest.raises(ExpressionError):
        Expression("a.b")
    with pytest.raises(ExpressionError, match="integer"):
        Expression("3 / 2.0").evaluate_int({})
