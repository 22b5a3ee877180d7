"""The gemm_bf16 problem: its inputs and torch reference on the CPU, and on a Hopper GPU (pytest -m gpu)
the TMA + wgmma example and the SIMT baseline tuned to valid bests by ktt."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from ktt.half_types import decode, encode
from ktt.inputs import make_inputs
from ktt.peaks import flops_peak
from ktt.problem import load_problem
from ktt.protocol import TuneSummary
from ktt.timing import floor_ms
from tests.pathenv import child_pythonpath

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = ROOT / "problems" / "gemm_bf16"
RUN_FILES = ("output", "archive", "output.lock", "inputs.hpp")


def small_copy(tmp_path: Path, n: int) -> Path:
    """The problem with DIM_M = DIM_N = DIM_K = n and no cases (one shape)."""
    target = tmp_path / "gemm_bf16"
    shutil.copytree(PROBLEM, target, ignore=shutil.ignore_patterns(*RUN_FILES))
    problem = yaml.safe_load((target / "problem.yaml").read_text())
    del problem["cases"]
    (target / "problem.yaml").write_text(yaml.safe_dump(problem, sort_keys=False))
    inputs = yaml.safe_load((target / "inputs.yaml").read_text())
    for arg in inputs["args"]:
        if arg["kind"] == "scalar":
            arg["value"] = n
    (target / "inputs.yaml").write_text(yaml.safe_dump(inputs, sort_keys=False))
    return target


def test_the_inputs_are_random_bf16_in_range_and_fresh_in_the_second_set(tmp_path: Path) -> None:
    problem = load_problem(small_copy(tmp_path, 128))
    shape = problem.primary
    assert [(b.name, b.dtype, b.init) for b in problem.buffers] == [
        ("A", "bf16", "random"), ("BT", "bf16", "random"), ("C", "float", "random")]  # fmt: skip
    sets = [make_inputs(problem, shape, k, 0, tmp_path / "work") for k in (0, 1)]
    for data in sets:
        a, bt = decode(data["A"], "bf16"), decode(data["BT"], "bf16")
        assert a.shape == bt.shape == (128 * 128,)
        assert np.all(np.abs(a) <= 1.0) and np.all(np.abs(bt) <= 1.0)
        assert np.array_equal(encode(a, "bf16"), data["A"])  # bf16 values
        assert len(np.unique(a)) > 1000 and not np.array_equal(a, bt)  # random, and the two differ
        assert abs(a.mean()) < 0.05 and 0.25 < a.var() < 0.42  # uniform on [-1, 1]: mean 0, variance 1/3
    # ktt's fresh-input confirmation draws new matrices (a custom init gave the same data twice)
    assert not np.array_equal(sets[0]["A"], sets[1]["A"]) and not np.array_equal(sets[0]["BT"], sets[1]["BT"])


def test_the_floor_takes_the_flops_at_the_bf16_tensor_core_peak() -> None:
    problem = load_problem(PROBLEM)
    assert problem.floor_flops_dtype == "bf16"
    nbytes, flops = problem.floor(problem.shape("n8192"))
    assert flops == 2 * 8192**3 and nbytes == 2 * 2 * 8192**2 + 4 * 8192**2
    h200 = flops_peak("bf16", "NVIDIA H200", "sm_90a", 132, 1_980_000)
    assert floor_ms(nbytes, flops, 4300.0, h200.gflops) == pytest.approx(1.111, rel=1e-3)  # compute-bound


def test_the_reference_multiplies_the_bf16_matrices(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(PROBLEM))
    try:
        import ref  # problems/gemm_bf16/ref.py
    finally:
        sys.path.remove(str(PROBLEM))
        sys.modules.pop("ref", None)
    m, n, k = 48, 40, 64
    rng = np.random.default_rng(1)
    a = rng.integers(-8, 9, (m, k)).astype(np.float32) / 8  # exact in bf16
    bt = rng.integers(-8, 9, (n, k)).astype(np.float32) / 8
    scalars = {"DIM_M": m, "DIM_N": n, "DIM_K": k}
    # what ktt hands a python reference for a bf16 buffer: a float32 array of its values
    inputs = ref.prepare_input(scalars, {"A": a.ravel(), "BT": bt.ravel(), "C": np.zeros(m * n, np.float32)})
    assert inputs[0].dtype == torch.bfloat16
    c = ref.gemm_bf16(inputs)
    np.testing.assert_array_equal(c.cpu().numpy(), (a.astype(np.float64) @ bt.T.astype(np.float64)).ravel())


@pytest.mark.parametrize(("spec", "sample"), [("example/tuning.yaml", 6), ("demo/2_wgmma.yaml", 1000)])
def test_the_hopper_kernel_passes_ktt_check_for_sm_90a(spec: str, sample: int, tmp_path: Path) -> None:
    """Tensor-map arguments, the cluster launch and an sm_90a compile, as the replay's author step checks them."""
    env = dict(os.environ, PYTHONPATH=child_pythonpath())
    done = subprocess.run(
        [sys.executable, "-m", "ktt", "check", "--problem", str(PROBLEM), "--kernel", str(PROBLEM / "example" /
         "kernels.cu"), "--spec", str(PROBLEM / spec), "--sample", str(sample), "--cache-dir", str(tmp_path / "c")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    head = done.stdout.splitlines()[0]
    assert head.startswith("check ok: ") and head.endswith("arch sm_90a"), head


# -- on a Hopper GPU ----------------------------------------------------------------------------
def _tune(tmp_path: Path, kernel: str, spec: str, seconds: int) -> tuple[TuneSummary, subprocess.CompletedProcess]:
    problem = tmp_path / "gemm_bf16"
    shutil.copytree(PROBLEM, problem, ignore=shutil.ignore_patterns(*RUN_FILES))
    out = tmp_path / "tune"
    env = dict(os.environ, PYTHONPATH=child_pythonpath())
    done = subprocess.run(
        [sys.executable, "-m", "ktt", "tune", "--problem", str(problem), "--kernel", str(problem / kernel),
         "--spec", str(problem / spec), "--output", str(out), "--duration", str(seconds),
         "--reference-time", str(tmp_path / "reference_time.json"), "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    return TuneSummary.model_validate_json((out / "summary.json").read_text()), done


def _never_wrong(summary: TuneSummary) -> None:
    """No configuration computed wrong values, crashed or hung (launch_failed is allowed: limits)."""
    bad = {s: summary.by_status.get(s, 0) for s in ("validation_failed", "runtime_error", "timeout", "suspect")}
    assert not any(bad.values()), bad


@pytest.mark.gpu
def test_the_hopper_example_tunes_to_a_valid_best_with_tma_and_wgmma(tmp_path: Path) -> None:
    summary, done = _tune(tmp_path, "example/kernels.cu", "example/tuning.yaml", 40)
    assert done.returncode == 0 and summary.ok, (summary.message, done.stderr[-3000:])
    assert [c.name for c in summary.cases] == ["n4096", "n8192"]
    for case in summary.cases:
        assert case.status == "ok" and case.config is not None and case.time_ms, case
        assert case.speedup is not None and case.speedup > 0.25, case  # a fair fraction of cuBLAS, at least
    _never_wrong(summary)
    assert summary.best is not None and summary.best.confirmed
    # the floor is the bf16 tensor-core one: the best is neither suspect nor far from it
    floor = summary.floor
    assert floor is not None and floor.flops_dtype == "bf16" and floor.peak_gflops, floor
    assert floor.fraction_of_floor is not None and 0.1 < floor.fraction_of_floor < 1 / 0.9, floor
    # every configuration of the space is a TMA + wgmma kernel; the best one's machine code shows it
    cuobjdump = shutil.which("cuobjdump")
    if cuobjdump:
        sass = _sass_of(tmp_path, summary.cases[1].config, cuobjdump)
        assert "HGMMA" in sass and "UTMALDG" in sass, sass[:2000]


def _sass_of(tmp_path: Path, config: dict, cuobjdump: str) -> str:
    from ktt.nvrtc import CompileRequest, compile_cubin, define_pairs
    from ktt.problem.inputs_hpp import render_inputs_hpp
    from ktt.toolkit import cuda_include_dirs

    problem = load_problem(PROBLEM)
    shape = problem.shape("n8192")
    work = tmp_path / "sass"
    work.mkdir()
    header = render_inputs_hpp(problem, shape)
    (work / "inputs.hpp").write_text(header)
    out = compile_cubin(CompileRequest(
        source=(PROBLEM / "example" / "kernels.cu").read_text(), program_path=str(work / "kernels.cu"),
        display_name="kernels.cu", arch="sm_90a", defines=define_pairs(problem.defines(shape), config),
        include_dirs=(str(work), *cuda_include_dirs()), header_texts=(("inputs.hpp", header),),
    ))  # fmt: skip
    assert out.ok and out.cubin, out.log
    (work / "k.cubin").write_bytes(out.cubin)
    return subprocess.run([cuobjdump, "-sass", str(work / "k.cubin")], capture_output=True, text=True,
                          check=True, timeout=120).stdout  # fmt: skip


@pytest.mark.gpu
def test_the_simt_baseline_tunes_to_a_valid_best(tmp_path: Path) -> None:
    summary, done = _tune(tmp_path, "baseline/kernels.cu", "baseline/tuning.yaml", 5)
    assert done.returncode == 0 and summary.ok, (summary.message, done.stderr[-3000:])
    assert all(c.status == "ok" for c in summary.cases), [c.model_dump() for c in summary.cases]
    _never_wrong(summary)
    results = [json.loads(line) for line in (tmp_path / "tune" / "results.jsonl").read_text().splitlines()]
    assert any(r["status"] == "ok" for r in results)
