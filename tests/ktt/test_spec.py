from __future__ import annotations

from pathlib import Path

import pytest
from ktt_paths import DATA, PROBLEMS, ROOT

from ktt.problem import load_problem
from ktt.spec import SpecError, load_spec, load_spec_text

TINY = DATA / "tiny"


@pytest.mark.parametrize("name", PROBLEMS)
def test_every_example_spec_loads(name: str) -> None:
    problem = load_problem(ROOT / "problems" / name)
    spec = load_spec(ROOT / "problems" / name / "example" / "tuning.yaml", problem)
    assert spec.launches and spec.tune_params
    config = {k: v[0] for k, v in spec.tune_params.items()}
    geometry = spec.geometry(config, problem.primary)
    assert geometry[0].grid.x >= 1 and geometry[0].block.count() >= 1


def spec_error(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec_text(text, load_problem(TINY))
    return info.value


def test_errors_name_the_field() -> None:
    err = spec_error("tune_params: {B: [32]}\nlaunches:\n  - {kernel: scale, grid: {x: N / Q}, block: {x: B}}\n")
    assert err.field == "launches[0].grid.x" and "'Q'" in err.message
    err = spec_error("tune_params: {N: [1]}\nlaunches:\n  - {kernel: scale, grid: {x: 1}, block: {x: 1}}\n")
    assert err.field == "tune_params.N" and "problem scalar" in err.message
    err = spec_error(
        "compiler_options: [--use_fast_math]\nlaunches:\n  - {kernel: scale, grid: {x: 1}, block: {x: 1}}\n"
    )
    assert err.field == "compiler_options[0]"
    err = spec_error("launches: []\n")
    assert err.field == "launches"
    err = spec_error("tune_params: {B: []}\nlaunches:\n  - {kernel: scale, grid: {x: 1}, block: {x: 1}}\n")
    assert "empty" in err.message
    err = spec_error("launches:\n  - {kernel: scale, grid: {x: 1}, block: {x: 1}, args: [X, Z]}\n")
    assert err.field == "launches[0].args[1]" and "'Z'" in err.message
    err = spec_error("launches: [\n")
    assert "YAML" in err.message


def test_pipeline_with_scratch_values_and_a_side_stream() -> None:
    problem = load_problem(TINY)
    spec = load_spec_text(
        """
tune_params: {B: [64, 128], PARTS: [4]}
restrictions: [B * PARTS <= 1024]
scratch:
  - {name: partial, dtype: float, size: PARTS * (N / B)}
launches:
  - kernel: stage1
    grid: {x: N / B}
    block: {x: B}
    shared_mem: B * 4
    args: [X, partial, {value: N / 2, dtype: int}]
  - kernel: stage2
    grid: {x: 1}
    block: {x: 32}
    stream: 1
    args: [partial, Y]
""",
        problem,
    )
    g = spec.geometry({"B": 64, "PARTS": 4}, problem.primary)
    assert [x.kernel for x in g] == ["stage1", "stage2"]
    assert g[0].grid.x == 16 and g[0].shared_mem == 256 and g[1].stream == 1
    kinds = [(a.kind, a.name, v) for a, v in g[0].args]
    assert kinds == [("buffer", "X", None), ("scratch", "partial", None), ("value", "arg2", 512)]
    assert spec.scratch_sizes({"B": 64, "PARTS": 4}, problem.primary) == {"partial": 64}
    assert spec.satisfies({"B": 128, "PARTS": 4}, problem.primary)


def test_default_arguments_are_the_boundary(tmp_path: Path) -> None:
    problem = load_problem(ROOT / "bench" / "gemm_space" / "problem")
    spec = load_spec(ROOT / "bench" / "gemm_space" / "tuning.yaml", problem)
    g = spec.geometry({k: v[0] for k, v in spec.tune_params.items()}, problem.primary)
    assert [(a.kind, a.name) for a, _ in g[0].args] == [
        ("buffer", "A"), ("buffer", "B"), ("buffer", "C"), ("value", "M"), ("value", "N"), ("value", "K")
    ]  # fmt: skip
    assert [v for _, v in g[0].args][3:] == [2048, 2048, 2048]
