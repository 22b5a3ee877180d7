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


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("pow(-8, 0.5)", "negative value -8 to a non-integer power"),
        ("pow(0, -1)", "division by zero"),
        ("pow(0.0, -1.5)", "division by zero"),
        ("pow(10, 1000000000)", "does not fit in 64 bits"),
        ("pow(2.0, 1e9)", "too large"),
        ("pow(2, 63)", "does not fit in 64 bits"),
        ("ceil_div(X, 0)", "division by zero"),
        ("X / 0", "division by zero"),
        ("X % 0", "division by zero"),
        ("X / 0.0", "division by zero"),
        ("1.5 % 0.0", "division by zero"),
        ("1e308 * 10", "not a finite number"),
        ("1e308 / 1e-10", "not a finite number"),
        ("(" * 3000 + "1" + ")" * 3000, "longer than"),
        ("(" * 200 + "1" + ")" * 200, "nested more than"),
        ("-" * 300 + "1", "nested more than"),
        ("1" + " + 1" * 300, "nested more than"),
        ("9" * 5000, "longer than"),
        ("9" * 100, "too long"),
        ("99999999999999999999999", "does not fit in 64 bits"),
        ("0x1ffffffffffffffff", "does not fit in 64 bits"),
        ("1e999", "not a finite number"),
        ("abs(-9223372036854775807 - 1)", "64 bits"),
        ("int(1e300)", "64 bits"),
        ("S + 1", "not a number"),
        ("\x1b[2J", "unexpected character '\\x1b'"),
    ],
)
def test_every_bad_input_is_one_expression_error(text: str, message: str) -> None:
    with pytest.raises(ExpressionError) as info:
        Expression(text).evaluate({"X": 7, "S": "text"})
    assert message in str(info.value)
    assert "\n" not in str(info.value) and len(str(info.value)) < 300


def test_ceil_div_with_floats_and_negatives() -> None:
    assert Expression("ceil_div(X, 0.5)").evaluate({"X": 7}) == 14
    assert Expression("ceil_div(10, 2.5)").evaluate({}) == 4
    assert Expression("ceil_div(-7, 2)").evaluate({}) == -3
    assert Expression("ceil_div(7, -2)").evaluate({}) == -3


@pytest.mark.parametrize("value", [99999999999999999999999, -(2**63) - 1, float("inf"), float("nan")])
def test_numbers_from_yaml_are_range_checked(value: float) -> None:
    with pytest.raises(ExpressionError):
        Expression(value)


def test_a_long_flat_conjunction_is_fine() -> None:
    assert Expression(" && ".join(["A"] * 99)).evaluate({"A": 1}) == 1


@pytest.mark.parametrize(
    ("text", "env", "python", "c"),
    [
        ("M * K // 2", {"M": 3, "K": 5}, 7, 15),  # C++: // starts a comment
        ("N // 2 + 1", {"N": 9}, 5, 9),
        ("7 / 2", {}, 3.5, 3),  # Python's / is true division
        ("-7 % 3", {}, 2, -1),  # Python's % takes the divisor's sign
        ("-7 // 2", {}, -4, -7),
        ("2 ** 3 ** 2", {}, 512, None),  # right to left; not C at all
        ("-2 ** 2", {}, -4, None),
        ("(N + 1) // 2 * 2", {"N": 5}, 6, 6),
    ],
)
def test_the_python_dialect_of_the_older_inline_form(text: str, env: dict, python: object, c: object) -> None:
    assert Expression(text, python=True).evaluate(env) == python
    if c is None:
        with pytest.raises(ExpressionError):
            Expression(text).evaluate(env)
    else:
        assert Expression(text).evaluate(env) == c


def test_a_fractional_python_size_says_why() -> None:
    with pytest.raises(ExpressionError, match="/ is true division, // floor division"):
        Expression("N / 2", python=True).evaluate_int({"N": 7})
    with pytest.raises(ExpressionError, match="division by zero"):
        Expression("N // 0", python=True).evaluate({"N": 7})
