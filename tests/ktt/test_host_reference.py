"""Python references as the original's runner calls them: per-target calls, dicts, tuples, and how they are timed.

The GPU cases use a stand-in ``torch`` package written into the problem directory (ref.py's
directory comes first on its import path): CPU tests can then check that a torch reference is
timed with CUDA events around the call alone, and that the fallbacks say so. The real torch
is exercised by the GPU tests (tests/ktt/test_compat_tune_gpu.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ktt_paths import ROOT

INPUTS = """
args:
  - {kind: scalar, name: N, value: 8}
  - {kind: buffer, name: X, dtype: float, size: N, access: read, min: 1, max: 2}
  - {kind: buffer, name: S, dtype: float, size: N, access: write, validate: true}
  - {kind: buffer, name: P, dtype: float, size: N, access: write, validate: true}
"""

FAKE_TORCH = """
import numpy as _np

AVAILABLE = {available}
ELAPSED = [5.0, 4.0, 3.0, 6.0, 7.0, 9.0, 9.0, 9.0, 9.0, 9.0]
calls = []


class Tensor:
    is_cuda = AVAILABLE

    def __init__(self, a):
        self._a = _np.asarray(a)

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        return self._a

    def __add__(self, o):
        calls.append("add")
        return Tensor(self._a + o)

    def __mul__(self, o):
        calls.append("mul")
        return Tensor(self._a * o)


def from_numpy(a):
    return Tensor(a)


class _Event:
    def __init__(self, enable_timing=False):
        pass

    def record(self):
        pass

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return ELAPSED.pop(0)


class cuda:
    Event = _Event

    @staticmethod
    def is_available():
        return AVAILABLE

    @staticmethod
    def synchronize():
        pass
"""


def make(tmp_path: Path, ref: str, function: str | None = "ref", torch: bool | None = None) -> Path:
    d = tmp_path / "p"
    d.mkdir()
    (d / "inputs.yaml").write_text(INPUTS)
    fn = f", function: {function}" if function else ""
    (d / "problem.yaml").write_text(
        f"name: p\ngrid: {{x: 1}}\nreference: {{type: python, file: ref.py{fn}}}\nvalidation: {{tolerance: 0}}\n"
    )
    (d / "ref.py").write_text(ref)
    if torch is not None:
        (d / "torch").mkdir()
        (d / "torch" / "__init__.py").write_text(FAKE_TORCH.format(available=torch))
    return d


def run(d: Path, tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    work = tmp_path / "work"
    cmd = [sys.executable, "-m", "ktt.host_reference", "--problem", str(d), "--work", str(work), "--sets", "0,1"]
    proc = subprocess.run([*cmd, *extra], capture_output=True, text=True, cwd=ROOT, timeout=120)
    line = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
    return proc, line


def outputs(tmp_path: Path, set_index: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from ktt.inputs import make_inputs
    from ktt.problem import load_problem
    from ktt.workdir import WorkDir

    problem = load_problem(tmp_path / "p")
    x = make_inputs(problem, problem.primary, set_index, 0, WorkDir(tmp_path / "work").root)["X"]
    d = tmp_path / "work" / "reference" / "default" / f"set{set_index}"
    return x, np.load(d / "S.npy"), np.load(d / "P.npy")


TARGETED = """import numpy as np

def ref(scalars, buffers, target="S"):
    x = buffers["X"]
    buffers["X"] += 100  # a call that spoils its inputs must not spoil the next call's
    return x + 1 if target == "S" else x * 2
"""


def test_a_reference_with_a_target_argument_is_called_once_per_validated_buffer(tmp_path: Path) -> None:
    proc, line = run(make(tmp_path, TARGETED), tmp_path, "--time")
    assert proc.returncode == 0, proc.stderr
    for s in (0, 1):
        x, s_out, p_out = outputs(tmp_path, s)
        np.testing.assert_array_equal(s_out, x + 101)  # += spoils the copy the call itself got
        np.testing.assert_array_equal(p_out, (x + 100) * 2)
    assert line is not None and line["ms"] > 0 and line["method"] == "wall clock around the call"
    assert line["warning"] is None


@pytest.mark.parametrize(
    "body",
    [
        'return {"P": x * 2, "S": x + 1}',
        "return x + 1, x * 2",
        "return [x + 1, x * 2]",
    ],
)
def test_a_dict_or_a_sequence_in_args_order_gives_every_buffer(tmp_path: Path, body: str) -> None:
    ref = f"def ref(scalars, buffers):\n    x = buffers['X']\n    {body}\n"
    proc, _ = run(make(tmp_path, ref), tmp_path)
    assert proc.returncode == 0, proc.stderr
    x, s_out, p_out = outputs(tmp_path)
    np.testing.assert_array_equal(s_out, x + 1)
    np.testing.assert_array_equal(p_out, x * 2)


def test_one_array_for_two_buffers_is_one_clear_line(tmp_path: Path) -> None:
    proc, _ = run(make(tmp_path, "def ref(scalars, buffers):\n    return buffers['X']\n"), tmp_path)
    assert proc.returncode == 2
    assert "ref.py: the reference returned 1 array(s) for 2 validated buffers (S, P)" in proc.stderr
    assert "accept a target argument" in proc.stderr and "Traceback" not in proc.stderr


def test_without_a_function_name_the_first_public_function_of_ref_py_is_used(tmp_path: Path) -> None:
    ref = """from numpy import asarray  # imported: not a candidate

def prepare_input(scalars, buffers):  # never the reference
    return buffers["X"]

def _helper(x):
    return x

def compute(x, target="S"):
    return _helper(x) + 1 if target == "S" else x * 2

def zzz_other(x):
    raise AssertionError("not this one")
"""
    proc, _ = run(make(tmp_path, ref, function=None), tmp_path)
    assert proc.returncode == 0, proc.stderr
    x, s_out, p_out = outputs(tmp_path)
    np.testing.assert_array_equal(s_out, x + 1)
    np.testing.assert_array_equal(p_out, x * 2)


TORCH_REF = """import torch

def prepare_input(scalars, buffers):
    return torch.from_numpy(buffers["X"].copy())

def ref(x, target="S"):
    return x + 1 if target == "S" else x * 2
"""


def test_a_torch_reference_on_the_gpu_is_timed_with_cuda_events_around_the_call(tmp_path: Path) -> None:
    proc, line = run(make(tmp_path, TORCH_REF, torch=True), tmp_path, "--time")
    assert proc.returncode == 0, proc.stderr
    x, s_out, p_out = outputs(tmp_path)
    np.testing.assert_array_equal(s_out, x + 1)
    np.testing.assert_array_equal(p_out, x * 2)
    assert line is not None and line["warning"] is None
    assert line["ms"] == 3.0  # the minimum of the 5 timed calls (5, 4, 3, 6, 7), after 5 warm-up calls
    assert line["method"].startswith("CUDA events around the reference call (torch)")


def test_a_torch_reference_without_cuda_falls_back_to_wall_clock_with_a_warning(tmp_path: Path) -> None:
    proc, line = run(make(tmp_path, TORCH_REF, torch=False), tmp_path, "--time")
    assert proc.returncode == 0, proc.stderr
    assert line is not None and line["method"] == "wall clock around the call"
    assert "torch has no CUDA device here" in line["warning"]


def test_a_torch_reference_without_prepare_input_is_timed_by_wall_clock_with_a_warning(tmp_path: Path) -> None:
    ref = """import torch

def ref(scalars, buffers, target="S"):
    x = torch.from_numpy(buffers["X"])
    return x + 1 if target == "S" else x * 2
"""
    proc, line = run(make(tmp_path, ref, torch=True), tmp_path, "--time")
    assert proc.returncode == 0, proc.stderr
    assert line is not None and line["method"] == "wall clock around the call"
    assert "without prepare_input" in line["warning"]
