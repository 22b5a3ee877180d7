"""Class 2 and 5 of issue 10: a small YAML file must not exhaust memory, recurse without bound,
or be quoted expanded in an error. Every YAML we read goes through one bounded loader."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
from bounds_problem import ALIAS_BOMB, make_problem, one_line

from ktt.problem import ProblemError, load_problem
from ktt.problem.yaml_io import MAX_YAML_DEPTH, parse_yaml_mapping, yaml_value_lines
from ktt.spec import SpecError, load_spec_text

MEMORY_CEILING = 32 * 1024 * 1024  # bytes allocated at peak while refusing a hostile file
TIME_CEILING_S = 5.0


def refused(call, *args) -> tuple[str, int, float]:
    """(message, peak bytes, seconds) of a call that must raise ProblemError."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(ProblemError) as info:
            call(*args)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return str(info.value), peak, time.perf_counter() - start


def test_alias_bomb_in_problem_yaml_is_refused_small_and_fast(tmp_path: Path) -> None:
    root = make_problem(tmp_path)
    text = (root / "problem.yaml").read_text() + "\n" + ALIAS_BOMB + "rules:\n  text: *i\n"
    (root / "problem.yaml").write_text(text)
    assert len(ALIAS_BOMB) < 1100
    message, peak, seconds = refused(load_problem, root)
    assert "once aliases are expanded" in message and one_line(message)
    assert message.count("lol") == 0  # never an expanded value
    assert peak < MEMORY_CEILING and seconds < TIME_CEILING_S


def test_alias_bomb_in_a_model_written_tuning_yaml(tmp_path: Path) -> None:
    problem = load_problem(make_problem(tmp_path))
    spec = ALIAS_BOMB + "tune_params: {BLOCK: *i}\nlaunches: [{kernel: k, grid: {x: 1}, block: {x: 1}}]\n"
    message, peak, seconds = refused(load_spec_text, spec, problem)
    assert "once aliases are expanded" in message and message.count("lol") == 0 and one_line(message)
    assert peak < MEMORY_CEILING and seconds < TIME_CEILING_S


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(ProblemError, match="refers to itself"):
        parse_yaml_mapping("a: &a [1, *a]\n", Path("tuning.yaml"))


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 5000 + "]" * 5000,
        "a: " + "{b: " * 5000 + "}" * 5000,
        "a:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1, 400)),
        "a:\n" + "- " * 5000 + "x\n",
    ],
    ids=["flow-sequences", "flow-mappings", "block-mappings", "block-sequences"],
)
def test_5000_deep_nesting_is_one_line_not_a_recursion_error(text: str) -> None:
    start = time.perf_counter()
    with pytest.raises(SpecError) as info:
        load_spec_text(text, None, "tuning.yaml")  # type: ignore[arg-type]  # refused before the problem is used
    assert "nest" in str(info.value) and one_line(str(info.value))
    assert time.perf_counter() - start < TIME_CEILING_S
    assert MAX_YAML_DEPTH <= 100


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x: " + "9" * 5000 + "\n", "does not fit in 64 bits"),
        ("grid: {x: 99999999999999999999999}\n", "does not fit in 64 bits"),
        ("x: .inf\n", "not a finite number"),
        ("x: 2024-02-31\n", "cannot read a value"),
        ("x: 1\n" * 2 + "---\ny: 2\n", "single document"),
    ],
)
def test_values_yaml_cannot_hold_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(ProblemError) as info:
        parse_yaml_mapping(text, Path("problem.yaml"))
    assert message in str(info.value) and one_line(str(info.value)) and len(str(info.value)) < 300


def test_a_file_over_the_size_cap_is_not_parsed(tmp_path: Path) -> None:
    root = make_problem(tmp_path)
    with (root / "problem.yaml").open("a") as f:
        f.write("# " + "x" * (2 * 1024 * 1024) + "\n")
    with pytest.raises(ProblemError, match="larger than the limit"):
        load_problem(root)


def test_value_lines_for_error_reports() -> None:
    text = "args:\n  - name: N\n  - name: X\n    body: |\n      x[i] = 1;\n"
    lines = yaml_value_lines(text)
    assert lines[("args", 1, "body")] == 4 and lines[("args", 0, "name")] == 2
    assert yaml_value_lines(ALIAS_BOMB + "z: *i\n") == {} and yaml_value_lines("a: [") == {}
