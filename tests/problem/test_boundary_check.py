"""The editor's boundary check: the reference's declared parameters against inputs.yaml's boundary
(C and CUDA signatures, the Python function's arguments), as a warning."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cacao_tui.problem.boundary_check import boundary_warnings
from cacao_tui.problem.writer import check_source, read_problem_source
from ktt.problem import load_problem

REPO = Path(__file__).resolve().parents[2]


def _copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(REPO / "problems" / name, target, ignore=shutil.ignore_patterns("output", "archive"))
    return target


CUDA_OK = 'extern "C" __global__ void mmul_ref(const float* A, const float* B, float* C) {}'


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (CUDA_OK, []),
        ('// mmul_ref(int x)\n/* mmul_ref(int y) */\n' + CUDA_OK, []),  # comments are not the declaration
        ('extern "C" __global__ void mmul_ref(const float* __restrict__ A, const float* B, float C[]) {}', []),
        ('extern "C" __global__ void mmul_ref(const float* A, float* C) {}', ["declares 2 parameter(s)", "(A, B, C)"]),
        ('extern "C" __global__ void mmul_ref(const float* B, const float* A, float* C) {}',
         ["in another order", "1: B (boundary: A)", "2: A (boundary: B)"]),
        ('extern "C" __global__ void mmul_ref(const float* a, const float* mat_b, float* out) {}', []),  # renamed
        ("__global__ void something_else(float* A) {}", []),  # not found: the build step says so
    ],
)
def test_cuda_reference(tmp_path: Path, source: str, expected: list[str]) -> None:
    problem = load_problem(_copy(tmp_path, "mmul"))
    warnings = boundary_warnings(problem, source)
    if not expected:
        assert warnings == []
    else:
        assert len(warnings) == 1 and all(part in warnings[0] for part in expected), warnings
        assert warnings[0].startswith("ref_kernel.cu: mmul_ref")


def test_cpu_c_reference_takes_the_buffers_only(tmp_path: Path) -> None:
    problem = load_problem(_copy(tmp_path, "transpose"))
    assert boundary_warnings(problem, "void transpose_ref(const float* A, float* B) { }") == []
    (line,) = boundary_warnings(problem, "void transpose_ref(const float* A, float* B, int ROWS) { }")
    assert "declares 3 parameter(s); the buffers" in line and "-D macros" in line


def test_python_reference_is_scalars_and_buffers(tmp_path: Path) -> None:
    problem = load_problem(_copy(tmp_path, "softmax"))
    function = problem.reference.function
    assert boundary_warnings(problem, f"def {function}(scalars, buffers):\n    return 0\n") == []
    assert boundary_warnings(problem, f"def {function}(scalars, buffers, target):\n    return 0\n") == []
    (line,) = boundary_warnings(problem, f"def {function}(x):\n    return 0\n")
    assert "takes 1 argument(s)" in line and "f(scalars, buffers)" in line
    assert boundary_warnings(problem, "def (:\n") == []  # not Python: the import step reports it


def test_check_source_carries_the_warning(tmp_path: Path) -> None:
    problem = _copy(tmp_path, "mmul")
    (problem / "ref_kernel.cu").write_text(
        (problem / "ref_kernel.cu").read_text().replace("const float* B, ", "", 1)
    )
    result = check_source(read_problem_source(problem), problem, existing=True, preflight=lambda p: [])
    assert result.ok and len(result.boundary) == 1 and "declares 2 parameter(s)" in result.boundary[0]
