"""Input data and the host references (cpu_c through ctypes, python in its own process)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ktt_paths import ROOT

from ktt.inputs import make_inputs
from ktt.problem import load_problem
from ktt.workdir import WorkDir

needs_cc = pytest.mark.skipif(
    not (shutil.which("cc") or shutil.which("gcc")) or not (shutil.which("c++") or shutil.which("g++")),
    reason="no host C/C++ compiler (cpu_c references and custom inputs need one)",
)

INPUTS = """
args:
  - {kind: scalar, name: R, value: 3}
  - {kind: scalar, name: C, value: 5}
  - {kind: buffer, name: A, dtype: float, size: R * C, access: read, min: 2, max: 4}
  - {kind: buffer, name: I, dtype: int, size: R, access: read, min: 0, max: 9}
  - {kind: buffer, name: Z, dtype: float, size: R, access: read, init: zeros}
  - {kind: buffer, name: K, dtype: int, size: C, access: read, init: custom,
     body: "std::vector<int> v(C); for (int i = 0; i < C; ++i) v[i] = i * R; return v;"}
  - {kind: buffer, name: B, dtype: float, size: C * R, access: write, validate: true}
"""


def make_problem(tmp_path: Path, reference: str, ref_file: str, source: str) -> Path:
    d = tmp_path / "p"
    d.mkdir()
    (d / "inputs.yaml").write_text(INPUTS)
    (d / "problem.yaml").write_text(f"name: p\ngrid: {{x: 1}}\n{reference}\nvalidation: {{tolerance: 0}}\n")
    (d / ref_file).write_text(source)
    return d


CPU_REF = """#include "inputs.hpp"
void transpose_ref(const float* A, const int* I, const float* Z, const int* K, float* B) {
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) B[c * R + r] = A[r * C + c] + Z[r] * 0.0f;
}
"""
PY_REF = """import numpy as np

def prepare_input(scalars, buffers):
    return buffers["A"].reshape(scalars["R"], scalars["C"])

def transpose(a):
    return np.ascontiguousarray(a.T).ravel()
"""


@needs_cc
def test_inputs_are_deterministic_and_in_range(tmp_path: Path) -> None:
    d = make_problem(tmp_path, "reference: {type: cpu_c, file: ref_cpu.c}", "ref_cpu.c", CPU_REF)
    problem = load_problem(d)
    first = make_inputs(problem, problem.primary, 0, 0, tmp_path)
    assert np.array_equal(first["A"], make_inputs(problem, problem.primary, 0, 7, tmp_path)["A"])
    fresh = make_inputs(problem, problem.primary, 1, 0, tmp_path)
    assert not np.array_equal(first["A"], fresh["A"])
    assert not np.array_equal(fresh["A"], make_inputs(problem, problem.primary, 1, 1, tmp_path)["A"])
    assert first["A"].dtype == np.float32 and first["A"].min() >= 2 and first["A"].max() <= 4
    assert first["I"].dtype == np.int32 and first["I"].min() >= 0 and first["I"].max() <= 9
    assert not first["Z"].any()
    assert first["K"].tolist() == [0, 3, 6, 9, 12]


@needs_cc
@pytest.mark.parametrize("kind", ["cpu_c", "python"])
def test_host_reference_writes_outputs_and_a_time(tmp_path: Path, kind: str) -> None:
    if kind == "cpu_c":
        d = make_problem(
            tmp_path, "reference: {type: cpu_c, file: ref_cpu.c, function: transpose_ref}", "ref_cpu.c", CPU_REF
        )
    else:
        d = make_problem(tmp_path, "reference: {type: python, file: ref.py, function: transpose}", "ref.py", PY_REF)
    work = tmp_path / "work"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ktt.host_reference",
            "--problem",
            str(d),
            "--work",
            str(work),
            "--sets",
            "0,1",
            "--time",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["shape"] == "default" and info["ms"] is not None and info["ms"] >= 0
    problem = load_problem(d)
    w = WorkDir(work)
    for s in (0, 1):
        a = make_inputs(problem, problem.primary, s, 0, work)["A"].reshape(3, 5)
        assert np.array_equal(np.load(w.reference_file("default", s, "B")), a.T.ravel())
