"""The 16-bit float dtypes of inputs.yaml, bf16 and half: loading, input data, inputs.hpp, the
references (cpu_c, python), the GPU-side comparison (its CUDA source compiled with NVRTC; its rules
run on the FAKE GPU of fake_launch_gpu.py, through ktt.worker.Session.evaluate) and tensor maps.

Nothing here runs on a GPU; the real path is tests/ktt/test_half_dtypes_gpu.py (pytest -m gpu).
"""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fake_launch_gpu import FakeGpu, fake_session
from ktt_paths import ROOT

from ktt import half_types
from ktt.candidates import launch_plan
from ktt.gpu_checks import COMPARE_KERNELS, SOURCE, poison_word
from ktt.host_compiler import build_shared_library
from ktt.inputs import make_inputs
from ktt.nvrtc import CompileRequest, compile_cubin, cubin_kernels
from ktt.problem import ProblemError, load_problem
from ktt.problem.inputs_hpp import render_inputs_hpp
from ktt.problem.model import Problem
from ktt.spec import load_spec_text
from ktt.toolkit import cuda_include_dirs
from ktt.worker import Session

needs_cc = pytest.mark.skipif(
    not (shutil.which("cc") or shutil.which("gcc")) or not (shutil.which("c++") or shutil.which("g++")),
    reason="no host C/C++ compiler",
)

INPUTS = """args:
  - {kind: scalar, name: LEN, value: 4096}
  - {kind: buffer, name: X, dtype: bf16, size: LEN, min: -2, max: 2, seed: 5}
  - {kind: buffer, name: W, dtype: %(w)s, size: LEN, seed: 6}
  - {kind: buffer, name: Y, dtype: half, size: LEN, access: write, init: zeros, validate: true}
"""
CPU_REF = """#include "inputs.hpp"
void ref(const X_t* x, const W_t* w, Y_t* y) {
    for (int i = 0; i < LEN; ++i) y[i] = ktt_float_to_half(ktt_bf16_to_float(x[i]) * ktt_half_to_float(w[i]));
}
"""
PY_REF = """import numpy as np

def ref(scalars, buffers):
    assert buffers["X"].dtype == np.float32 and buffers["W"].dtype == np.float32, "16-bit floats arrive as float32"
    return buffers["X"].astype(np.float64) * buffers["W"]
"""


def make_problem(tmp_path: Path, *, w: str = "float16", ref: str = "cpu_c", extra: str = "") -> Problem:
    d = tmp_path / "halves"
    d.mkdir(parents=True, exist_ok=True)
    file = {"cpu_c": "ref_cpu.c", "python": "ref.py"}[ref]
    (d / "problem.yaml").write_text(
        f"name: halves\ngrid: {{x: 16}}\nreference: {{type: {ref}, file: {file}, function: ref}}\n"
        f"validation:\n  tolerance: 1e-2\n{extra}"
    )
    (d / "inputs.yaml").write_text(INPUTS % {"w": w})
    (d / file).write_text(CPU_REF if ref == "cpu_c" else PY_REF)
    return load_problem(d)


def expected(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Y = X * W, computed in float32 from the decoded values and rounded to half."""
    return (half_types.decode(inputs["X"], "bf16") * half_types.decode(inputs["W"], "half")).astype(np.float16)


# -- the dtypes and their conversions ------------------------------------------------------------


def _bf16_nearest(x: np.ndarray) -> np.ndarray:
    """bf16 bits of finite float32 values, rounded to nearest even, the slow way: compare distances."""
    u = x.view(np.uint32)
    down = (u >> 16).astype(np.uint16)  # truncation: toward zero in magnitude
    up = down + np.uint16(1)
    lo, hi = half_types.decode(down, "bf16").astype(np.float64), half_types.decode(up, "bf16").astype(np.float64)
    d_lo, d_hi = np.abs(x.astype(np.float64) - lo), np.abs(hi - x.astype(np.float64))
    return np.where((d_hi < d_lo) | ((d_hi == d_lo) & (down & 1 == 1)), up, down)


def test_bf16_rounds_to_nearest_even_and_keeps_nan_and_infinity() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(200_000).astype(np.float32) * np.float32(1e3)
    ties = (np.arange(1000, dtype=np.uint32) << 16 | 0x8000).view(np.float32)  # exactly halfway
    x = np.concatenate([x, ties, -ties])
    np.testing.assert_array_equal(half_types.encode(x, "bf16"), _bf16_nearest(x))
    special = np.array([np.inf, -np.inf, np.nan, 3.40e38, -3.40e38, 0.0, -0.0], np.float32)
    back = half_types.decode(half_types.encode(special, "bf16"), "bf16")
    assert np.isposinf(back[0]) and np.isneginf(back[1]) and np.isnan(back[2])
    assert np.isposinf(back[3]) and np.isneginf(back[4])  # past bf16's largest: infinity
    assert back[5] == 0 and np.signbit(back[6])


def test_every_16_bit_pattern_decodes_exactly_and_encodes_back() -> None:
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    for dtype in ("bf16", "half"):
        stored = bits if dtype == "bf16" else bits.view(np.float16)
        values = half_types.decode(stored, dtype)
        again = half_types.encode(values, dtype).view(np.uint16)
        nan = np.isnan(values)
        np.testing.assert_array_equal(again[~nan], bits[~nan])
        assert np.isnan(half_types.decode(again[nan], dtype)).all()
    np.testing.assert_array_equal(half_types.decode(bits.view(np.float16), "half"), bits.view(np.float16))
    assert np.isnan(half_types.decode(np.array([half_types.POISON16], np.uint16), "bf16")).all()
    assert np.isnan(np.array([half_types.POISON16], np.uint16).view(np.float16)).all()  # the poison is NaN in both


@needs_cc
def test_the_c_helpers_of_inputs_hpp_agree_with_numpy(tmp_path: Path) -> None:
    """The conversions a cpu_c reference gets in inputs.hpp, compiled as C, on every 16-bit pattern
    and on floats that exercise rounding, ties, subnormals, overflow and NaN."""
    problem = make_problem(tmp_path)
    header = render_inputs_hpp(problem)
    work = tmp_path / "c"
    work.mkdir()
    (work / "inputs.hpp").write_text(header)
    source = """#include "inputs.hpp"
void run(const uint16_t* bits, float* bf, float* hf, const float* x, uint16_t* to_bf, uint16_t* to_hf, int n) {
    for (int i = 0; i < 65536; ++i) { bf[i] = ktt_bf16_to_float(bits[i]); hf[i] = ktt_half_to_float(bits[i]); }
    for (int i = 0; i < n; ++i) { to_bf[i] = ktt_float_to_bf16(x[i]); to_hf[i] = ktt_float_to_half(x[i]); }
}
"""
    built = build_shared_library(source, work, cxx=False, defines={}, include_dirs=[work], source_name="h.c")
    lib = ctypes.CDLL(str(built))
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    rng = np.random.default_rng(1)
    with np.errstate(invalid="ignore", over="ignore"):
        x = _test_floats(rng, bits)
    bf, hf = np.zeros(1 << 16, np.float32), np.zeros(1 << 16, np.float32)
    to_bf, to_hf = np.zeros(x.size, np.uint16), np.zeros(x.size, np.uint16)
    lib.run(*(a.ctypes.data_as(ctypes.c_void_p) for a in (bits, bf, hf, x, to_bf, to_hf)), ctypes.c_int(x.size))
    np.testing.assert_array_equal(bf.view(np.uint32), half_types.decode(bits, "bf16").view(np.uint32))
    want_h = bits.view(np.float16).astype(np.float32)
    nan = np.isnan(want_h)
    np.testing.assert_array_equal(hf[~nan], want_h[~nan])
    assert np.isnan(hf[nan]).all()
    finite = ~np.isnan(x)
    np.testing.assert_array_equal(to_bf[finite], half_types.encode(x, "bf16")[finite])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(to_hf[finite], x[finite].astype(np.float16).view(np.uint16))
    assert np.isnan(half_types.decode(to_bf[~finite], "bf16")).all()
    assert np.isnan(to_hf[~finite].view(np.float16)).all()


def _test_floats(rng: np.random.Generator, bits: np.ndarray) -> np.ndarray:
    """Rounding, ties (bf16 values sit halfway between halves), subnormals, overflow, NaN."""
    return np.concatenate([
        rng.standard_normal(100_000).astype(np.float32) * np.float32(100),
        rng.uniform(-1e-4, 1e-4, 50_000).astype(np.float32),  # half's subnormals (below 6.1e-5)
        half_types.decode(bits, "bf16"),  # every bf16 value, ties between halves among them
        (bits.view(np.float16).astype(np.float32) + np.float32(2.0**-26)),
        np.array([65504, 65519.99, 65520, 1e9, -1e9, np.inf, -np.inf, np.nan, 2.0**-25, 2.0**-24 * 1.5], np.float32),
    ]).astype(np.float32)  # fmt: skip


# -- loading ------------------------------------------------------------------------------------


def test_the_dtypes_load_with_their_spellings(tmp_path: Path) -> None:
    problem = make_problem(tmp_path)  # W is written 'float16'
    x, w, y = problem.buffers
    assert (x.dtype, w.dtype, y.dtype) == ("bf16", "half", "half")
    assert (x.ctype, x.host_ctype, x.itemsize, x.numpy_dtype) == ("__nv_bfloat16", "uint16_t", 2, "uint16")
    assert (w.ctype, w.host_ctype, w.numpy_dtype) == ("__half", "uint16_t", "float16")
    assert problem.boundary_signature() == "const __nv_bfloat16* X, const __half* W, __half* Y"
    assert problem.primary.bytes_of(x) == 4096 * 2
    for spelling, dtype in (("bfloat16", "bf16"), ("fp16", "half"), ("half", "half")):
        assert make_problem(tmp_path / spelling, w=spelling).buffers[1].dtype == dtype


@pytest.mark.parametrize(
    ("line", "field", "message"),
    [
        ("{kind: scalar, name: LEN, dtype: bf16, value: 4}", "args[0] (LEN).dtype", "bf16 is a buffer dtype"),
        ("{kind: buffer, name: X, dtype: half, size: 4, max: 70000}", "args[1] (X).max", "outside half's range"),
        ("{kind: buffer, name: X, dtype: bf16, size: 4, min: -1e39}", "args[1] (X).min", "outside bf16's range"),
        ("{kind: buffer, name: X, dtype: float8, size: 4}", "args[1] (X).dtype", "bf16, half"),
    ],
)
def test_bad_16_bit_declarations_are_one_line_naming_the_field(
    tmp_path: Path, line: str, field: str, message: str
) -> None:
    d = tmp_path / "bad"
    d.mkdir()
    (d / "problem.yaml").write_text("name: bad\ngrid: {x: 1}\nreference: {type: cpu_c, file: ref_cpu.c, function: r}\n")
    (d / "ref_cpu.c").write_text("void r(void) {}\n")
    scalar = "{kind: scalar, name: LEN, value: 4}" if "scalar" not in line else line
    buffer = line if "buffer" in line else "{kind: buffer, name: X, size: 4}"
    (d / "inputs.yaml").write_text(
        f"args:\n  - {scalar}\n  - {buffer}\n  - {{kind: buffer, name: Y, size: 4, access: write, validate: true}}\n"
    )
    with pytest.raises(ProblemError) as err:
        load_problem(d)
    text = str(err.value)
    assert "inputs.yaml" in text and field in text and message in text and "\n" not in text, text


# -- input data ---------------------------------------------------------------------------------


def test_random_16_bit_inputs_are_in_range_and_fresh_in_set_1(tmp_path: Path) -> None:
    problem = make_problem(tmp_path)
    sets = [make_inputs(problem, problem.primary, k, 7, tmp_path / "w") for k in (0, 1)]
    for data in sets:
        assert data["X"].dtype == np.uint16 and data["W"].dtype == np.float16 and data["Y"].dtype == np.float16
        x, w = half_types.decode(data["X"], "bf16"), half_types.decode(data["W"], "half")
        assert x.min() >= -2 and x.max() <= 2 and x.min() < -1.9 and x.max() > 1.9  # uniform on [min, max]
        assert w.min() >= -1 and w.max() <= 1 and len(np.unique(w)) > 1000
        assert not data["Y"].any()  # init: zeros
    assert not np.array_equal(sets[0]["X"], sets[1]["X"]) and not np.array_equal(sets[0]["W"], sets[1]["W"])
    again = make_inputs(problem, problem.primary, 0, 99, tmp_path / "w")  # set 0 depends on the seed: only
    assert np.array_equal(again["X"], sets[0]["X"])


@needs_cc
def test_file_and_custom_inits_of_16_bit_buffers(tmp_path: Path) -> None:
    d = tmp_path / "inits"
    (d / "inputs").mkdir(parents=True)
    values = np.linspace(-3, 3, 64, dtype=np.float32)
    half_types.encode(values, "bf16").tofile(d / "inputs" / "x.bin")  # raw little-endian bit patterns
    (d / "problem.yaml").write_text("name: inits\ngrid: {x: 1}\nreference: {type: cpu_c, file: r.c, function: r}\n")
    (d / "r.c").write_text("void r(void) {}\n")
    (d / "inputs.yaml").write_text("""args:
  - {kind: scalar, name: LEN, value: 64}
  - {kind: buffer, name: X, dtype: bf16, size: LEN, init: file, file_name: x.bin}
  - kind: buffer
    name: W
    dtype: half
    size: LEN
    init: custom
    body: |
      std::vector<ktt_half> v(LEN, 0.5);  // from a double: rounded to half
      for (int i = 0; i < LEN; i += 2) v[i] = ktt_half(i * 0.1f) + 1.0f;  // float arithmetic, then half
      return v;
  - {kind: buffer, name: Y, dtype: bf16, size: LEN, access: write, validate: true, init: custom,
     body: "std::vector<ktt_bf16> v(LEN); v[3] = 1.0f / 3; return v;"}
""")
    problem = load_problem(d)
    data = make_inputs(problem, problem.primary, 1, 0, tmp_path / "w")
    np.testing.assert_array_equal(half_types.decode(data["X"], "bf16"), half_types.decode(
        half_types.encode(values, "bf16"), "bf16"))  # fmt: skip
    want_w = np.full(64, 0.5, np.float32)
    want_w[::2] = (np.arange(0, 64, 2, dtype=np.float32) * np.float32(0.1)).astype(np.float16).astype(np.float32) + 1
    np.testing.assert_array_equal(data["W"], want_w.astype(np.float16))
    y = half_types.decode(data["Y"], "bf16")
    assert (
        y[3] == half_types.decode(half_types.encode(np.float32(1 / 3), "bf16"), "bf16")[0] and not np.delete(y, 3).any()
    )


def test_inputs_hpp_gives_kernels_cudas_types_and_compiles_with_nvrtc(tmp_path: Path) -> None:
    problem = make_problem(tmp_path)
    header = render_inputs_hpp(problem)
    assert "#include <cuda_bf16.h>" in header and "typedef __nv_bfloat16 X_t;" in header
    assert "typedef uint16_t X_t;" in header and "typedef __half Y_t;" in header
    work = tmp_path / "k"
    work.mkdir()
    (work / "inputs.hpp").write_text(header)
    source = """#include "inputs.hpp"
extern "C" __global__ void k(const X_t* x, const W_t* w, Y_t* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < LEN) y[i] = __float2half(__bfloat162float(x[i]) * __half2float(w[i]));
}
"""
    for arch in ("sm_90", "sm_90a"):
        out = compile_cubin(CompileRequest(source, str(work / "k.cu"), "k.cu", arch, (), (str(work),
                            *cuda_include_dirs()), header_texts=(("inputs.hpp", header),)))  # fmt: skip
        assert out.ok, out.log
        assert "k" in cubin_kernels(out.cubin or b"")


# -- references ---------------------------------------------------------------------------------


def _reference_outputs(problem: Problem, work: Path) -> dict[int, np.ndarray]:
    done = subprocess.run(
        [sys.executable, "-m", "ktt.host_reference", "--problem", str(problem.directory), "--work", str(work),
         "--shape", "default", "--sets", "0,1"],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["shape"] == "default"
    return {k: np.load(work / "reference" / "default" / f"set{k}" / "Y.npy") for k in (0, 1)}


@needs_cc
def test_a_cpu_c_reference_gets_bit_patterns_and_the_conversions(tmp_path: Path) -> None:
    problem = make_problem(tmp_path)
    outputs = _reference_outputs(problem, tmp_path / "work")
    for k, y in outputs.items():
        assert y.dtype == np.float16
        np.testing.assert_array_equal(y, expected(make_inputs(problem, problem.primary, k, 0, tmp_path / "work")))


def test_a_python_reference_gets_float32_values_and_its_result_is_rounded(tmp_path: Path) -> None:
    problem = make_problem(tmp_path, ref="python")
    outputs = _reference_outputs(problem, tmp_path / "work")
    for k, y in outputs.items():
        data = make_inputs(problem, problem.primary, k, 0, tmp_path / "work")
        exact = half_types.decode(data["X"], "bf16").astype(np.float64) * half_types.decode(data["W"], "half")
        assert y.dtype == np.float16
        np.testing.assert_array_equal(y, exact.astype(np.float32).astype(np.float16))


def test_a_torch_bf16_result_comes_back_as_its_values() -> None:
    torch = pytest.importorskip("torch")
    from ktt.host_reference import _host_array

    t = torch.tensor([1.0, -2.5, 1 / 3], dtype=torch.bfloat16)
    np.testing.assert_array_equal(
        half_types.encode(_host_array(t), "bf16"), t.view(torch.int16).numpy().view(np.uint16)
    )


# -- the GPU-side comparison ----------------------------------------------------------------------


def test_the_compare_kernels_compile_for_sm_90_and_sm_90a() -> None:
    assert COMPARE_KERNELS["bf16"] == "ktt_compare_bf16" and COMPARE_KERNELS["half"] == "ktt_compare_f16"
    assert f"#define KTT_POISON16 {half_types.POISON16:#06X}u".replace("0X", "0x") in SOURCE
    for arch in ("sm_90", "sm_90a"):
        out = compile_cubin(CompileRequest(SOURCE, "/tmp/ktt_checks.cu", "ktt_checks.cu", arch, (), ()))
        assert out.ok, out.log
        assert set(COMPARE_KERNELS.values()) <= cubin_kernels(out.cubin or b"")


SPEC = """tune_params: {BLOCK: [256]}
launches:
  - {kernel: k, grid: {x: 16}, block: {x: BLOCK}}
"""


def session(problem: Problem, kernel, work: Path, gpu: FakeGpu | None = None) -> Session:
    """A worker Session on the FAKE GPU, each input set's reference from ``expected``."""
    return fake_session(problem, {"k": kernel}, work, {"Y": expected}, gpu)


def evaluate(s: Session, floor_ms: float | None = None) -> dict:
    program, scratch = launch_plan(load_spec_text(SPEC, s.problem), {"BLOCK": 256}, s.problem.primary)
    return s.evaluate({"cubin_hex": "00", "launches": program, "scratch": scratch, "floor_ms": floor_ms})


def multiply(gpu: FakeGpu, grid, block, x: int, w: int, y: int, *, nudge: float = 0.0, at: int = -1) -> None:
    """Y = X * W on the fake device (what the CUDA kernel above computes), one element changed by ``nudge``."""
    xs = half_types.decode(gpu.view(x, 2 * 4096, np.uint16), "bf16")
    ws = gpu.view(w, 2 * 4096, np.float16).astype(np.float32)
    out = (xs * ws).astype(np.float16)
    if at >= 0:
        out[at] = np.float16(out[at] + nudge) if np.isfinite(nudge) else np.float16(nudge)
    gpu.view(y, 2 * 4096, np.float16)[:] = out


def test_a_right_16_bit_output_is_valid_on_fresh_inputs_too(tmp_path: Path) -> None:
    s = session(make_problem(tmp_path), multiply, tmp_path / "w")
    result = evaluate(s)
    assert result["status"] == "ok" and result["confirmed"], result.get("error")
    assert result["validation"]["checked"] == 4096 and result["validation"]["bad_count"] == 0


@pytest.mark.parametrize(("nudge", "ok"), [(0.004, True), (0.5, False), (float("nan"), False), (float("inf"), False)])
def test_the_tolerance_is_on_the_decoded_values_and_nan_never_passes(tmp_path: Path, nudge: float, ok: bool) -> None:
    s = session(make_problem(tmp_path), lambda *a: multiply(*a, nudge=nudge, at=100), tmp_path / "w")
    result = evaluate(s)
    if ok:
        assert result["status"] == "ok", result.get("error")
    else:
        assert result["status"] == "validation_failed" and result["error"].startswith("Y: 1 "), result
        assert result["validation"]["first_bad_index"] == 100


def test_a_kernel_that_only_knows_the_first_input_set_fails_the_fresh_one(tmp_path: Path) -> None:
    problem = make_problem(tmp_path)
    first = expected(make_inputs(problem, problem.primary, 0, 0, tmp_path / "w"))

    def replay(gpu: FakeGpu, grid, block, x: int, w: int, y: int) -> None:
        gpu.view(y, 2 * 4096, np.float16)[:] = first

    result = evaluate(session(problem, replay, tmp_path / "w"))
    assert result["status"] == "validation_failed" and "wrong on a fresh input set" in result["error"], result


def test_a_poisoned_16_bit_output_left_unwritten_is_reported_as_such(tmp_path: Path) -> None:
    problem = make_problem(tmp_path, extra="  poison_outputs: true\n")
    assert poison_word("half") == 0x7FAD7FAD and poison_word("float") == 0x7FF8DEAD

    def half_done(gpu: FakeGpu, grid, block, x: int, w: int, y: int) -> None:
        multiply(gpu, grid, block, x, w, y)
        gpu.view(y + 2 * 2048, 2 * 2048, np.uint32)[:] = poison_word("half")  # the second half untouched

    result = evaluate(session(problem, half_done, tmp_path / "w"))
    assert result["status"] == "validation_failed", result
    assert result["error"] == "Y: 2048 of 4096 element(s) never written (still poisoned)"


def test_a_tensor_map_of_a_bf16_buffer_defaults_to_bfloat16(tmp_path: Path) -> None:
    problem = make_problem(tmp_path)
    spec = load_spec_text(
        """tune_params: {BLOCK: [128]}
launches:
  - {kernel: k, grid: {x: 16}, block: {x: BLOCK}, args: [{tensor_map: X, dims: [64, 64], box: [64, 8]},
     {tensor_map: W, dims: [4096], box: [256]}, Y]}
""",
        problem,
    )
    maps = [a.tensor_map for a in spec.launches[0].args if a.tensor_map is not None]
    assert [(m.buffer, m.dtype) for m in maps] == [("X", "bfloat16"), ("W", "float16")]


def test_an_odd_count_of_16_bit_elements_is_compared_without_the_slack_of_its_last_word(tmp_path: Path) -> None:
    """4095 bf16 inputs end mid-word: the word checks (input modified, drift) read the last word whole.
    Device memory is not zeroed (the FAKE heap is filled with garbage here); the slack must not
    read as a modified input."""
    problem = make_problem(tmp_path)
    (problem.directory / "inputs.yaml").write_text(INPUTS.replace("value: 4096", "value: 4095") % {"w": "half"})
    problem = load_problem(problem.directory)
    kernel = lambda g, grid, block, x, w, y: multiply_n(g, x, w, y, 4095)  # noqa: E731
    gpu = FakeGpu({"k": kernel})
    gpu.heap[:] = np.random.default_rng(0).integers(0, 256, gpu.heap.size, dtype=np.uint8)  # left behind
    result = evaluate(session(problem, kernel, tmp_path / "w", gpu))
    assert result["status"] == "ok", result.get("error")
    assert "nondeterministic" not in result["flags"]


def multiply_n(gpu: FakeGpu, x: int, w: int, y: int, n: int) -> None:
    xs = half_types.decode(gpu.view(x, 2 * n, np.uint16), "bf16")
    gpu.view(y, 2 * n, np.float16)[:] = (xs * gpu.view(w, 2 * n, np.float16).astype(np.float32)).astype(np.float16)
