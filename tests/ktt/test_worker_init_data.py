"""The GPU worker's evaluation of one configuration, run on a FAKE GPU (host memory, Python kernels).

What the original guarantees a kernel: every buffer, ``write`` included, starts each run with its
``init`` data (re-initialised before the validation run, the race re-run, every timed repetition
and the fresh-input confirmation). ``validation.poison_outputs: true`` asks for poisoned outputs
instead. These tests drive ``ktt.worker.Session.evaluate`` itself, with ``ktt.buffers`` and
``ktt.sequence`` unchanged; only the device (FakeGpu) and the GPU-side checks (FakeChecks, the same
counters computed in numpy) are fakes. The same cases on a real device: tests/ktt/test_compat_tune_gpu.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from fake_launch_gpu import FakeGpu, fake_session

from ktt.candidates import launch_plan
from ktt.gpu_checks import COMPARE_KERNELS, SOURCE
from ktt.nvrtc import CompileRequest, compile_cubin, cubin_kernels
from ktt.problem import load_problem
from ktt.problem.model import Problem
from ktt.spec import load_spec_text
from ktt.worker import Session

INPUTS = """args:
  - {kind: scalar, name: N, value: 4096}
  - {kind: buffer, name: X, dtype: float, size: N, init: random, min: 0, max: 1, seed: 3}
  - {kind: buffer, name: S, dtype: float, size: %(size)s, access: write, init: %(init)s, validate: true}
"""
SPEC = """tune_params: {BLOCK: [32]}
launches:
  - {kernel: k, grid: {x: 1}, block: {x: BLOCK}}
"""


def make_problem(tmp_path: Path, *, init: str = "zeros", size: str = "1", extra: str = "") -> Problem:
    d = tmp_path / "accumulate"
    d.mkdir(parents=True)
    (d / "problem.yaml").write_text(
        "name: accumulate\ngrid: {x: 1}\nreference: {type: python, file: ref.py, function: ref}\n"
        f"validation:\n  tolerance: 1e-2\n{extra}"
    )
    (d / "inputs.yaml").write_text(INPUTS % {"size": size, "init": init})
    (d / "ref.py").write_text("def ref(scalars, buffers):\n    return buffers['S'] + buffers['X'].sum()\n")
    return load_problem(d)


Kernel = Callable[..., None]


def session(problem: Problem, kernel: Kernel, work: Path, expected: Callable[[dict], np.ndarray]) -> Session:
    """A worker Session on a FakeGpu, with each input set's reference set from ``expected(inputs)``."""
    return fake_session(problem, {"k": kernel}, work, {"S": expected})


def evaluate(s: Session, floor_ms: float | None = None) -> dict:
    program, scratch = launch_plan(load_spec_text(SPEC, s.problem), {"BLOCK": 32}, s.problem.primary)
    req = {"cubin_hex": "00", "launches": program, "scratch": scratch, "floor_ms": floor_ms}
    return s.evaluate(req)


def accumulate(gpu: FakeGpu, grid, block, x: int, y: int) -> None:
    """atomicAdd of every X into S[0]: correct only when S starts at zero."""
    gpu.view(y, 4, np.float32)[0] += gpu.view(x, 4 * 4096, np.float32).sum(dtype=np.float32)


def writes_nothing(gpu: FakeGpu, grid, block, x: int, y: int) -> None:
    return None


def test_a_kernel_that_accumulates_into_a_zeroed_output_is_valid(tmp_path: Path) -> None:
    """4/4 validation_failed on the H200 before: the output was poisoned (NaN + sum = NaN)."""
    problem = make_problem(tmp_path)
    s = session(problem, accumulate, tmp_path / "work", lambda inp: np.array([inp["X"].sum()], np.float32))
    result = evaluate(s)
    assert result["status"] == "ok", result.get("error")
    assert result["confirmed"] and result["repeats"] == 3
    # every run started from zeros: the validation run, the race re-run, three timed repetitions
    # (each after a device copy of the init data) and the fresh input set.
    launches = [r for r in s.gpu.launches() if r.kernel == "k"]
    assert len(launches) == 6


def test_the_timed_repetitions_restart_from_the_init_data(tmp_path: Path) -> None:
    """Without the restore before each repetition the output would hold the sum 4 times (checked after timing)."""
    problem = make_problem(tmp_path)
    s = session(problem, accumulate, tmp_path / "work", lambda inp: np.array([inp["X"].sum()], np.float32))
    s.bufs.restore_writable = lambda set_index: None  # type: ignore[method-assign]
    result = evaluate(s)
    assert result["status"] == "validation_failed" and "after the timed runs" in result["error"]


def test_poison_outputs_is_the_opt_in_for_poisoned_write_buffers(tmp_path: Path) -> None:
    problem = make_problem(tmp_path, extra="  poison_outputs: true\n")
    assert problem.poison_outputs
    s = session(problem, accumulate, tmp_path / "work", lambda inp: np.array([inp["X"].sum()], np.float32))
    result = evaluate(s)
    assert result["status"] == "validation_failed"
    assert result["error"].startswith("S: 1 of 1 element(s)")  # poison + sum is still the poison NaN


def test_an_output_left_at_its_init_data_is_never_written(tmp_path: Path) -> None:
    problem = make_problem(tmp_path, size="N")
    s = session(problem, writes_nothing, tmp_path / "work", lambda inp: inp["X"] + 1)
    result = evaluate(s)
    assert result["status"] == "validation_failed"
    assert "4096 of 4096 element(s) never written (still hold their init data)" in result["error"]


def test_half_an_output_left_at_its_random_init_fails(tmp_path: Path) -> None:
    """A write buffer with init: random starts each run with those values, so half-written fails."""
    problem = make_problem(tmp_path, init="random", size="N")

    def half(gpu: FakeGpu, grid, block, x: int, y: int) -> None:
        gpu.view(y, 4 * 2048, np.float32)[:] = gpu.view(x, 4 * 2048, np.float32) + 1

    s = session(problem, half, tmp_path / "work", lambda inp: inp["X"] + 1)
    result = evaluate(s)
    assert result["status"] == "validation_failed"
    assert "2048 of 4096 element(s) never written" in result["error"]


def test_an_output_that_equals_its_init_cannot_be_told_from_one_never_written(tmp_path: Path) -> None:
    """The hostile case the init contract cannot catch by comparison: the right answer is the init
    data (all zeros here), so a kernel that writes nothing is right. The physical floor catches its
    time (suspect) where the problem declares one, and poison_outputs catches it outright."""

    def zeros(inp: dict) -> np.ndarray:
        return np.zeros(4096, np.float32)

    plain = session(make_problem(tmp_path / "a", size="N"), writes_nothing, tmp_path / "wa", zeros)
    assert evaluate(plain)["status"] == "ok"
    floor = session(make_problem(tmp_path / "b", size="N"), writes_nothing, tmp_path / "wb", zeros)
    assert evaluate(floor, floor_ms=5.0)["status"] == "suspect"  # 1 ms measured, 5 ms floor
    poisoned = session(
        make_problem(tmp_path / "c", size="N", extra="  poison_outputs: true\n"), writes_nothing, tmp_path / "wc", zeros
    )
    result = evaluate(poisoned)
    assert result["status"] == "validation_failed" and "never written (still poisoned)" in result["error"]


def test_the_helper_kernels_compile_for_sm_90() -> None:
    """The compare kernels (with their init argument, for every dtype) compile (NVRTC works without a GPU)."""
    out = compile_cubin(CompileRequest(SOURCE, "/tmp/ktt_checks.cu", "ktt_checks.cu", "sm_90", (), ()))
    assert out.ok, out.log
    assert set(COMPARE_KERNELS.values()) <= cubin_kernels(out.cubin)
