"""GPU tests (pytest -m gpu) of the 16-bit float dtypes: a bf16-in, half-out problem tuned by
``python -m ktt tune`` with a cpu_c reference and a python one; the real compare kernels
(ktt_compare_bf16 / ktt_compare_f16) judge right, wrong, NaN and unwritten outputs. Their CPU twins
(the same rules on a FAKE GPU): tests/ktt/test_half_dtypes.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_gpu_tuning import results, tune

pytestmark = pytest.mark.gpu

PROBLEM = """name: halves
grid: {x: LEN / 256}
reference: {type: %(type)s, file: %(file)s, function: ref}
validation:
  tolerance: 1e-2
%(extra)s"""
INPUTS = """args:
  - {kind: scalar, name: LEN, value: 1 << 20}
  - {kind: buffer, name: X, dtype: bf16, size: LEN, min: -2, max: 2}
  - {kind: buffer, name: W, dtype: half, size: LEN}
  - {kind: buffer, name: Y, dtype: half, size: LEN, access: write, validate: true}
"""
CPU_REF = """#include "inputs.hpp"
void ref(const X_t* x, const W_t* w, Y_t* y) {
    for (int i = 0; i < LEN; ++i) y[i] = ktt_float_to_half(ktt_bf16_to_float(x[i]) * ktt_half_to_float(w[i]));
}
"""
PY_REF = """def ref(scalars, buffers):
    return buffers["X"] * buffers["W"]  # float32 values in, rounded to half by ktt
"""
# VARIANT 0: right; 1: off by 0.5 at one element; 2: a NaN; 3: writes only the first half of Y
KERNEL = """#include "inputs.hpp"
extern "C" __global__ void k(const X_t* x, const W_t* w, Y_t* y) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= LEN || (VARIANT == 3 && i >= LEN / 2)) return;
    float v = __bfloat162float(x[i]) * __half2float(w[i]);
    if (VARIANT == 1 && i == 777) v += 0.5f;
    if (VARIANT == 2 && i == 777) v = __int_as_float(0x7fc00000);
    y[i] = __float2half_rn(v);
}
"""
SPEC = """tune_params: {VARIANT: [0, 1, 2, 3]}
launches:
  - {kernel: k, grid: {x: LEN / 256}, block: {x: 256}}
"""


def make_problem(tmp_path: Path, reference: str, extra: str = "") -> Path:
    d = tmp_path / f"halves-{reference}"
    d.mkdir()
    file = {"cpu_c": "ref_cpu.c", "python": "ref.py"}[reference]
    (d / "problem.yaml").write_text(PROBLEM % {"type": reference, "file": file, "extra": extra})
    (d / "inputs.yaml").write_text(INPUTS)
    (d / file).write_text(CPU_REF if reference == "cpu_c" else PY_REF)
    (d / "kernels.cu").write_text(KERNEL)
    (d / "tuning.yaml").write_text(SPEC)
    return d


@pytest.mark.parametrize("reference", ["cpu_c", "python"])
def test_16_bit_buffers_tune_and_the_compare_kernels_judge_them(tmp_path: Path, reference: str) -> None:
    problem = make_problem(tmp_path, reference)
    out = tmp_path / "out"
    code, summary = tune(problem, problem / "kernels.cu", problem / "tuning.yaml", out, "--duration", "0",
                         "--reference-time", str(tmp_path / "ref.json"))  # fmt: skip
    assert code == 0 and summary.best is not None, summary.message
    assert summary.best.config["VARIANT"] == 0 and summary.best.confirmed  # fresh random bf16/half inputs too
    by_variant = {int(r.config["VARIANT"]): r for r in results(out)}
    assert by_variant[0].status == "ok"
    assert by_variant[1].status == "validation_failed" and "Y: 1 of" in (by_variant[1].error or "")
    assert by_variant[2].status == "validation_failed" and "NaN/Inf" in (by_variant[2].error or "")
    assert by_variant[3].status == "validation_failed"


def test_an_unwritten_poisoned_half_output_is_reported_still_poisoned(tmp_path: Path) -> None:
    problem = make_problem(tmp_path, "cpu_c", "  poison_outputs: true\n")
    out = tmp_path / "out"
    tune(problem, problem / "kernels.cu", problem / "tuning.yaml", out, "--duration", "0",
         "--reference-time", str(tmp_path / "ref.json"))  # fmt: skip
    by_variant = {int(r.config["VARIANT"]): r for r in results(out)}
    assert by_variant[0].status == "ok"
    assert by_variant[3].status == "validation_failed"
    assert "never written (still poisoned)" in (by_variant[3].error or ""), by_variant[3].error
