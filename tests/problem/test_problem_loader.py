"""Loading problems: the shipped ones, the older inline form, warnings, cases, rules, inputs.hpp."""

from __future__ import annotations

import ctypes
import importlib.util
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from problem_fixtures import REPO, edit_yaml, snapshot

from cacao_tui.problem import load_problem, render_inputs_hpp, write_inputs_hpp
from cacao_tui.problem.summary import render_check
from ktt.problem import ProblemError

SHIPPED = sorted(p.name for p in (REPO / "problems").iterdir() if (p / "problem.yaml").is_file())
FLOOR_WORDS = ("floor", "bytes")


def test_the_issue_problems_are_shipped() -> None:
    assert {"mmul", "transpose", "softmax", "stencil"} <= set(SHIPPED)
    types = {load_problem(REPO / "problems" / n).reference.type for n in SHIPPED}
    assert {"cuda", "cpu_c", "python"} <= types
    with_cases = [n for n in SHIPPED if load_problem(REPO / "problems" / n).declared_cases]
    with_rules = [n for n in SHIPPED if load_problem(REPO / "problems" / n).forbid]
    assert set(with_cases) & set(with_rules)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_problem_loads_and_states_its_floor(name: str) -> None:
    directory = REPO / "problems" / name
    before = snapshot(directory)
    problem = load_problem(directory)
    assert problem.validated and problem.boundary
    header = (directory / "problem.yaml").read_text().lower()
    assert all(w in header for w in FLOOR_WORDS), "problem.yaml must state its physical floor in a comment"
    assert problem.floor_bytes is not None or problem.floor_flops is not None
    render_check(problem)
    assert snapshot(directory) == before


def test_mmul_boundary_sizes_and_grid() -> None:
    p = load_problem(REPO / "problems" / "mmul")
    assert p.boundary_signature() == "const float* A, const float* B, float* C"
    assert p.primary.sizes == {"A": 2048 * 2048, "B": 2048 * 2048, "C": 2048 * 2048}
    assert p.primary.grid.as_tuple() == (128, 128, 1)
    assert p.reference.function == "mmul_ref" and p.reference.block.as_tuple() == (16, 16, 1)
    assert p.defines() == {"DIM_M": 2048, "DIM_N": 2048, "DIM_K": 2048}


def test_stencil_cases_apply_their_overrides() -> None:
    p = load_problem(REPO / "problems" / "stencil")
    small = p.shape("small")
    assert small.scalars == {"NX": 1024, "NY": 1024}
    assert small.sizes["IN"] == 1024 * 1024
    assert small.grid.as_tuple() == (64, 64, 1)
    assert p.shape("tall").duration_s == 10
    assert p.shape("small").duration_s == p.shape("square").duration_s == 15
    assert [s.name for s in p.shapes] == ["square", "small", "tall"] and p.primary.name == "square"
    assert p.floor(small)[0] == 2 * 4 * 1024 * 1024


def test_forbid_rules_are_compiled_and_ignore_comments() -> None:
    p = load_problem(REPO / "problems" / "stencil")
    source = "// cublasSgemm in a comment is fine\n__global__ void k() {\n  thrust::sort(a, b);\n}\n"
    hits = p.forbid_hits(source)
    assert [(h.line, h.reason) for h in hits] == [(3, "Thrust is not allowed; write the kernel yourself")]


def test_derived_scalars_follow_case_overrides(tiny: Path) -> None:
    edit_yaml(
        tiny / "inputs.yaml", lambda d: d["args"].insert(1, {"kind": "scalar", "name": "HALF", "value": "COUNT / 2"})
    )
    edit_yaml(tiny / "problem.yaml", lambda d: d.update(cases=[{"name": 2048, "scalars": {"COUNT": "1 << 11"}}]))
    p = load_problem(tiny)
    assert [s.name for s in p.shapes] == ["2048"] and p.declared_cases
    assert [s.value for s in p.scalars] == [1024, 512]
    assert p.shape("2048").scalars == {"COUNT": 2048, "HALF": 1024}


def test_inline_form_is_converted(tmp_path: Path) -> None:
    d = tmp_path / "old"
    d.mkdir()
    (d / "problem.yaml").write_text(
        "name: old\n"
        "grid: {x: 'VEC_LEN / 256'}\n"
        "block_x: 256\n"
        "reference: {type: cuda, file: ref_kernel.cu, function: scale}\n"
        "scalars: {VEC_LEN: 4096, FACTOR: {dtype: float, value: 3}}\n"
        "vectors:\n"
        "  - {name: src, type: float, size: VEC_LEN, direction: in}\n"
        "  - {name: dst, type: float, size: VEC_LEN, direction: out}\n"
    )
    (d / "ref_kernel.cu").write_text('extern "C" __global__ void scale(const float* src, float* dst) {}\n')
    p = load_problem(d)
    assert p.boundary_signature() == "const float* src, float* dst"
    assert [b.name for b in p.validated] == ["dst"]
    assert p.reference.block.as_tuple() == (256, 1, 1)
    assert p.primary.scalars == {"VEC_LEN": 4096, "FACTOR": 3.0}
    assert any("converted from the older inline form" in w for w in p.warnings)
    assert any("validating the outputs (dst)" in w for w in p.warnings)
    assert not (d / "inputs.yaml").exists()


def test_inline_form_with_explicit_validate_is_kept(tmp_path: Path) -> None:
    d = tmp_path / "old"
    d.mkdir()
    (d / "problem.yaml").write_text(
        "grid: {x: 4}\n"
        "reference: {type: cuda, function: k, block: {x: 4}}\n"
        "scalars: [{name: LEN, value: 16}]\n"
        "vectors:\n"
        "  - {name: a, size: LEN, direction: inout, validate: true}\n"
        "  - {name: b, size: LEN, direction: out}\n"
    )
    (d / "ref_kernel.cu").write_text('extern "C" __global__ void k(float* a, float* b) {}\n')
    p = load_problem(d)
    assert [b.name for b in p.validated] == ["a"]
    assert p.buffers[0].access == "readwrite"


def test_unknown_and_duplicate_keys_are_warnings(tiny: Path) -> None:
    text = (tiny / "problem.yaml").read_text()
    (tiny / "problem.yaml").write_text(text + "colour: blue\nvalidation: {tolerance: 1e-3, tolerence: 2}\n")
    p = load_problem(tiny)
    assert p.tolerance == 1e-3
    assert "problem.yaml: colour: unknown key (ignored)" in p.warnings
    assert "problem.yaml: validation.tolerence: unknown key (ignored)" in p.warnings
    assert any("key 'validation' is given twice" in w for w in p.warnings)


def test_one_letter_macros_warn(tiny: Path) -> None:
    edit_yaml(tiny / "inputs.yaml", lambda d: d["args"].append({"kind": "scalar", "name": "N", "value": 3}))
    assert any("one-letter macros (N)" in w for w in load_problem(tiny).warnings)


def test_reference_detected_without_type_or_file(tiny: Path) -> None:
    edit_yaml(tiny / "problem.yaml", lambda d: d["reference"].pop("type") and d["reference"].pop("file"))
    p = load_problem(tiny)
    assert p.reference.type == "cuda" and p.reference.file.name == "ref_kernel.cu"


def test_missing_block_warns_for_cuda(tiny: Path) -> None:
    edit_yaml(tiny / "problem.yaml", lambda d: d["reference"].pop("block"))
    p = load_problem(tiny)
    assert p.reference.block.as_tuple() == (1, 1, 1)
    assert any("reference.block: absent" in w for w in p.warnings)


def test_inputs_hpp_for_mmul(tmp_path: Path) -> None:
    p = load_problem(REPO / "problems" / "mmul")
    text = render_inputs_hpp(p)
    assert "#define DIM_M 2048" in text and "typedef float C_t;" in text
    assert "#define C_SIZE (((size_t)DIM_M) * ((size_t)DIM_N))" in text
    target = write_inputs_hpp(p, tmp_path)
    assert target.read_text() == text


def test_loading_writes_nothing(tiny: Path) -> None:
    before = snapshot(tiny)
    load_problem(tiny)
    assert snapshot(tiny) == before


def test_problem_error_is_one_line(tiny: Path) -> None:
    (tiny / "problem.yaml").write_text("grid: [1, 2\n")
    with pytest.raises(ProblemError) as info:
        load_problem(tiny)
    assert "\n" not in str(info.value)


def test_softmax_python_reference_runs() -> None:
    """The shipped numpy reference, on a small input, gives a softmax."""
    p = load_problem(REPO / "problems" / "softmax")
    spec = importlib.util.spec_from_file_location("softmax_ref_under_test", p.reference.file)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows, cols = 3, 7
    x = np.random.default_rng(0).uniform(-8, 8, rows * cols).astype(np.float32)
    arg = module.prepare_input({"ROWS": rows, "COLS": cols}, {"X": x, "Y": np.zeros_like(x)})
    y = getattr(module, p.reference.function)(arg)
    e = np.exp(x.reshape(rows, cols) - x.reshape(rows, cols).max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, (e / e.sum(axis=1, keepdims=True)).ravel(), atol=1e-6)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_transpose_cpu_reference_runs(tmp_path: Path) -> None:
    """The shipped C reference, compiled as the tuner does (scalars as -D), transposes."""
    p = load_problem(REPO / "problems" / "transpose")
    rows, cols = 5, 3
    lib = tmp_path / "ref.so"
    subprocess.run(
        [
            "cc",
            "-std=c99",
            "-Wall",
            "-Werror",
            "-shared",
            "-fPIC",
            f"-DROWS={rows}",
            f"-DCOLS={cols}",
            str(p.reference.file),
            "-o",
            str(lib),
        ],
        check=True,
    )
    a = np.arange(rows * cols, dtype=np.float32)
    b = np.zeros_like(a)
    fn = getattr(ctypes.CDLL(str(lib)), p.reference.function)
    fn(ctypes.c_void_p(a.ctypes.data), ctypes.c_void_p(b.ctypes.data))
    np.testing.assert_array_equal(b, a.reshape(rows, cols).T.ravel())


def test_shipped_yaml_parses_without_duplicate_keys() -> None:
    for name in SHIPPED:
        for f in ("problem.yaml", "inputs.yaml"):
            assert yaml.safe_load((REPO / "problems" / name / f).read_text())
        assert not [w for w in load_problem(REPO / "problems" / name).warnings if "given twice" in w]
