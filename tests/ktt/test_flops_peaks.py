"""physical_floor.flops_dtype: the peak a problem's flops are measured against (ktt.peaks), the floor
the worker computes from it (on the FAKE GPU of fake_launch_gpu.py) and what --check shows."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_launch_gpu import FakeGpu

from cacao_tui.problem.summary import render_check
from ktt.peaks import FLOPS_DTYPES, flops_peak, peak_gflops
from ktt.problem import ProblemError, load_problem
from ktt.problem.model import Problem
from ktt.timing import FLOOR_MARGIN
from ktt.worker import Session

H200 = ("NVIDIA H200", "sm_90", 132, 1_980_000)
H100_SXM = ("NVIDIA H100 80GB HBM3", "sm_90", 132, 1_980_000)
H100_PCIE = ("NVIDIA H100 PCIe", "sm_90", 114, 1_755_000)
A100 = ("NVIDIA A100-SXM4-80GB", "sm_80", 108, 1_410_000)
RTX5090 = ("NVIDIA GeForce RTX 5090", "sm_120", 170, 2_407_000)


@pytest.mark.parametrize("device", [H200, H100_SXM])
def test_hopper_sxm_parts_use_their_datasheet_dense_peaks(device: tuple) -> None:
    tflops = {d: flops_peak(d, *device).gflops / 1e3 for d in FLOPS_DTYPES}  # type: ignore[operator]
    assert tflops == pytest.approx({"fp32": 66.9, "fp64": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4,
                                    "fp8": 1978.9}, rel=1e-3)  # fmt: skip
    assert "datasheet" in flops_peak("bf16", *device).source
    assert flops_peak("fp32", *device).gflops == peak_gflops("sm_90", 132, 1_980_000)  # unchanged: CUDA cores


def test_other_parts_use_the_architecture_rate_or_none() -> None:
    pcie = flops_peak("bf16", *H100_PCIE)  # the rule: 4096 flops per SM per clock on sm_90
    assert pcie.gflops == pytest.approx(4096 * 114 * 1.755e9 / 1e9) and "sm_90" in pcie.source
    assert flops_peak("bf16", *A100).gflops == pytest.approx(311.9e3, rel=1e-3)  # A100's 312 TFLOP/s
    assert flops_peak("fp8", *A100).gflops is None  # no fp8 tensor cores before sm_89
    none = flops_peak("bf16", *RTX5090)
    assert none.gflops is None and "no BF16 dense tensor-core peak known for sm_120" in none.source
    assert flops_peak("fp64", *RTX5090).gflops == flops_peak("fp32", *RTX5090).gflops  # fp64 <= fp32: an upper bound
    assert flops_peak("bf16", "NVIDIA H100", "sm_90a", 132, 1_980_000).gflops == pytest.approx(989.4e3)


PROBLEM = """name: gemm
grid: {x: 1}
reference: {type: cpu_c, file: ref_cpu.c, function: ref}
physical_floor:
  bytes: 3 * 4 * N * N
  flops: 2 * N * N * N
%s"""
INPUTS = """args:
  - {kind: scalar, name: N, value: 4096}
  - {kind: buffer, name: A, size: N * N}
  - {kind: buffer, name: B, size: N * N}
  - {kind: buffer, name: C, size: N * N, access: write, validate: true}
"""


def make_problem(tmp_path: Path, dtype_line: str) -> Problem:
    d = tmp_path / "gemm"
    d.mkdir(parents=True, exist_ok=True)
    (d / "problem.yaml").write_text(PROBLEM % dtype_line)
    (d / "inputs.yaml").write_text(INPUTS)
    (d / "ref_cpu.c").write_text("void ref(const float* a, const float* b, float* c) {}\n")
    return load_problem(d)


def floor_of(problem: Problem, device: tuple) -> dict:
    """Session.floor on a FAKE GPU that reports ``device``'s name, arch, SMs and clock."""
    gpu = FakeGpu({})
    name, arch, sms, khz = device
    gpu.props = gpu.props.__class__(**{**gpu.props.__dict__, "name": name, "arch": arch, "sm_count": sms,
                                       "clock_khz": khz})  # fmt: skip
    s = Session.__new__(Session)  # no CUDA context: only the floor is asked for
    s.problem, s.gpu, s.bandwidth, s.chan = problem, gpu, 4000.0, SimpleNamespace(send=lambda m: None)
    return s.floor(problem.primary)


def test_a_bf16_gemm_floor_is_the_tensor_core_time_not_the_fp32_one(tmp_path: Path) -> None:
    """A good tensor-core kernel at 4096^3 takes ~0.2 ms on an H200: below the FP32 floor (2.05 ms),
    which made it suspect, above the bf16 floor (0.139 ms)."""
    fp32 = floor_of(make_problem(tmp_path / "a", ""), H200)
    bf16 = floor_of(make_problem(tmp_path / "b", "  flops_dtype: bf16\n"), H200)
    flops = 2 * 4096**3
    assert fp32["flops_dtype"] == "fp32" and fp32["floor_ms"] == pytest.approx(flops / 66.908e12 * 1e3, rel=1e-3)
    assert bf16["flops_dtype"] == "bf16" and bf16["floor_ms"] == pytest.approx(flops / 989.4e12 * 1e3)
    assert bf16["peak_gflops"] == pytest.approx(989.4e3) and "H100/H200 SXM datasheet" in bf16["peak_from"]
    good_kernel_ms = 0.2
    assert good_kernel_ms < FLOOR_MARGIN * fp32["floor_ms"]  # what the tuner flagged as suspect before
    assert good_kernel_ms > bf16["floor_ms"] / FLOOR_MARGIN


def test_without_a_known_peak_the_floor_keeps_only_the_bytes(tmp_path: Path) -> None:
    got = floor_of(make_problem(tmp_path, "  flops_dtype: fp8\n"), RTX5090)
    assert got["peak_gflops"] is None and got["floor_ms"] == pytest.approx(3 * 4 * 4096**2 / 4000e9 * 1e3)
    assert "no FP8 dense tensor-core peak known" in got["peak_from"]


def test_a_bad_flops_dtype_is_one_line_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ProblemError) as err:
        make_problem(tmp_path, "  flops_dtype: int4\n")
    assert "physical_floor.flops_dtype" in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_check_shows_the_peak_the_flops_are_measured_against(tmp_path: Path) -> None:
    text = " ".join(render_check(make_problem(tmp_path / "b", "  flops_dtype: bf16\n")).split())  # unwrapped
    assert "137,438,953,472 flops (0.139 ms on H100/H200 SXM)" in text
    assert "flops at the BF16 dense tensor-core peak (flops_dtype bf16): 989.4 TFLOP/s on H100/H200 SXM" in text
    plain = " ".join(render_check(make_problem(tmp_path / "a", "")).split())
    assert "flops at the FP32 CUDA-core peak (flops_dtype fp32): the GPU's SMs x clock x FP32 lanes" in plain
