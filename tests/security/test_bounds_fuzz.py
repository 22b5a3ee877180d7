"""Class 5 of issue 10, fuzzed: the expression evaluator and the YAML reader turn every input into a
value or their one-line error, never another exception.

100,000 cases in all, derandomized (CI sees the same ones every run) and with no deadline (a loaded
CI machine is slow). Each generated example is cut at ten points, so one example gives ten cases,
most of them malformed: 60,000 expressions from the grammar's tokens, 10,000 from arbitrary text,
25,000 YAML texts from YAML's syntax pieces and 5,000 anchor/alias pyramids.
"""

from __future__ import annotations

import math
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ktt.expressions import INT64_MAX, INT64_MIN, Expression, ExpressionError
from ktt.problem import ProblemError
from ktt.problem.yaml_io import parse_yaml_mapping, yaml_value_lines

CUTS = 10


def cuts(items: list) -> list[list]:
    """``CUTS`` prefixes of a list, evenly spaced, the whole list last: ten cases from one example."""
    return [items[: round(len(items) * (k + 1) / CUTS)] for k in range(CUTS)]


def fuzz(examples: int):
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


# fmt: off
TOKENS = [
    "0", "1", "2", "7", "-1", "32", "1024", "0.5", "2.5", "1e308", "1e-308", "1e999", "0x10",
    "0xffffffffffffffff", "9223372036854775807", "9223372036854775808", "99999999999999999999999",
    "1.5f", "10u", "3L", "X", "Y", "Z", "S", "F", "true", "false", "not", "and", "or",
    "+", "-", "*", "/", "%", "<<", ">>", "<", "<=", ">", ">=", "==", "!=", "&&", "||", "!", "~", "&", "|", "^",
    "?", ":", "(", ")", "(", ")", ",", "min(", "max(", "abs(", "ceil(", "floor(", "ceil_div(", "div_up(",
    "round_up(", "int(", "log2(", "sqrt(", "pow(", "unknown(", "//", " ", "\t", "\x1b", "\u202e", "@", ".",
]
# fmt: on
ENV = {"X": 7, "Y": -3, "Z": 0, "F": 0.5, "S": "text"}


def check_expression(text: str, env: dict, python: bool = False) -> None:
    try:
        value = Expression(text, python=python).evaluate(env)
    except ExpressionError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 1000
        return
    if isinstance(value, float):
        assert math.isfinite(value)
    else:
        assert isinstance(value, int) and INT64_MIN <= value <= INT64_MAX


@fuzz(6_000)
@given(
    st.lists(st.sampled_from(TOKENS), max_size=25),
    st.integers(INT64_MIN, INT64_MAX),
    st.floats(allow_nan=False, allow_infinity=False),
)
def test_expressions_from_tokens(tokens: list[str], x: int, f: float) -> None:
    for part in cuts(tokens):
        check_expression(" ".join(part), {**ENV, "X": x, "F": f})


@fuzz(3_000)
@given(
    st.lists(st.sampled_from([*TOKENS, "**", "**", "//", "//"]), max_size=25),
    st.integers(INT64_MIN, INT64_MAX),
    st.floats(allow_nan=False, allow_infinity=False),
)
def test_the_inline_forms_python_dialect_from_tokens(tokens: list[str], x: int, f: float) -> None:
    """The older inline form's sizes and grid (// floor division, ** power): the same bounds."""
    for part in cuts(tokens):
        check_expression(" ".join(part), {**ENV, "X": x, "F": f}, python=True)


@fuzz(5_000)
@given(st.text(max_size=60))
def test_expressions_from_any_text(text: str) -> None:
    check_expression(text, ENV)
    check_expression(f"X * ({text})", ENV)


# fmt: off
YAML_PIECES = [
    "a", "b", "k", "0", "1", "-1", "1.5", ".inf", ".nan", "~", "null", "true", "0x1f", "0o17", "1e999",
    "99999999999999999999999", "2024-02-31", ": ", ":", "- ", "-", "? ", "[", "]", "{", "}", ", ", ",",
    "&a ", "*a", "&b ", "*b", "<<: ", "!!int ",
    "!!str ", "!!python/name:os.system ", "!x ", "|", ">", "'", '"', "#", "\n", "\n  ", "\n    ", " ", "\t",
    "---", "...", "%YAML 1.1", "\\", "\x1b", "\u202e", "\x00",
]
# fmt: on


def check_yaml(text: str) -> None:
    try:
        data = parse_yaml_mapping(text, Path("fuzz.yaml"))
        assert isinstance(data, dict)
    except ProblemError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 1000
    assert isinstance(yaml_value_lines(text), dict)


@fuzz(2_500)
@given(st.lists(st.sampled_from(YAML_PIECES), max_size=30))
def test_yaml_from_syntax_pieces(pieces: list[str]) -> None:
    for part in cuts(pieces):
        check_yaml("".join(part))


@fuzz(500)
@given(st.integers(1, 12), st.integers(1, 12), st.integers(0, 3))
def test_yaml_alias_pyramids(levels: int, width: int, shape: int) -> None:
    lines = ["l0: &l0 [x, y]"]
    for i in range(1, levels + 1):
        refs = ", ".join([f"*l{i - 1}"] * width)
        lines.append(f"l{i}: &l{i} " + ([f"[{refs}]", f"{{k: [{refs}]}}", f"[[{refs}]]", f"[{refs}, *l0]"][shape]))
    for part in cuts(lines):
        check_yaml("\n".join(part) + "\nz: *l0\n")
