"""The GPU parts of classes 1, 3 and 4, through ``python -m ktt tune`` on a real device (``pytest -m gpu``).

- a kernel that makes the compiler spin: every compile is cut off at its time limit, the
  tuning ends at its budget, and no compile worker is left running;
- a kernel that includes a header linked to /dev/zero (or /dev/zero itself): refused
  before NVRTC, in seconds, with bounded memory;
- two tunings on one GPU: the second waits for the first and says so.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bounds_problem import scale_spec
from test_orphans import processes_with, spinning_kernel

from tests.pathenv import child_pythonpath

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "ktt" / "data" / "tiny"
SPEC = scale_spec(32, 64, 128, 256)


def problem_copy(tmp_path: Path, kernel: str) -> Path:
    d = tmp_path / "problem"
    shutil.copytree(TINY, d)
    (d / "kernels.cu").write_text(kernel)
    (d / "tuning.yaml").write_text(SPEC)
    return d


def ktt_tune(problem: Path, out: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    argv = [sys.executable, "-m", "ktt", "tune", "--problem", str(problem), "--kernel", str(problem / "kernels.cu"),
            "--spec", str(problem / "tuning.yaml"), "--output", str(out), "--cache-dir", str(out.parent / "cache"),
            "--device", "0", "--json", *extra]  # fmt: skip
    full_env = {**os.environ, "PYTHONPATH": child_pythonpath(), **(env or {})}
    return subprocess.Popen(argv, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def lines_of(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def test_a_kernel_that_spins_the_compiler_is_cut_off(tmp_path: Path) -> None:
    problem = problem_copy(tmp_path, spinning_kernel(16))
    before = set(processes_with("multiprocessing.forkserver"))
    start = time.monotonic()
    proc = ktt_tune(problem, tmp_path / "out", "--duration", "10", env={"KTT_COMPILE_TIMEOUT_S": "5"})
    out, err = proc.communicate(timeout=300)
    took = time.monotonic() - start
    assert proc.returncode == 1, err[-2000:]  # ran, nothing valid
    summary = next(x for x in lines_of(out) if x.get("type") == "result")
    assert summary["valid"] == 0 and took < 120
    rows = [json.loads(r) for r in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert rows and all("did not finish within 5 s" in (r.get("error") or "") for r in rows)
    time.sleep(2)
    left = set(processes_with("multiprocessing.forkserver")) - before
    assert not left, f"compile workers left running: {sorted(left)}"


@pytest.mark.parametrize("include", ['#include "zero.h"', '#include "/dev/zero"'])
def test_a_kernel_that_includes_dev_zero_is_refused_in_seconds(tmp_path: Path, include: str) -> None:
    kernel = (TINY / "kernels.cu").read_text().replace('#include "inputs.hpp"', f'#include "inputs.hpp"\n{include}')
    problem = problem_copy(tmp_path, kernel)
    (problem / "zero.h").symlink_to("/dev/zero")
    start = time.monotonic()
    proc = ktt_tune(problem, tmp_path / "out", "--duration", "10")
    _, err = proc.communicate(timeout=300)
    assert time.monotonic() - start < 120
    assert proc.returncode == 1, err[-2000:]
    rows = [json.loads(r) for r in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert rows and all(r["status"] == "compile_failed" for r in rows)
    assert any("link leading out" in (r.get("error") or "") or "absolute path" in (r.get("error") or "") for r in rows)
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert peak_kib < 4 * 1024 * 1024, f"a child used {peak_kib} KiB"


def test_two_tunings_on_one_gpu_take_turns(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a_problem = problem_copy(tmp_path / "a", (TINY / "kernels.cu").read_text())
    b_problem = problem_copy(tmp_path / "b", (TINY / "kernels.cu").read_text())
    first = ktt_tune(a_problem, tmp_path / "a" / "out", "--duration", "8")
    deadline = time.monotonic() + 60
    from ktt.gpu_lock import lock_dir

    while time.monotonic() < deadline and not any(
        p.read_text().strip() for p in lock_dir().glob("cacao-gpu-*.lock") if p.is_file()
    ):
        time.sleep(0.1)
    second = ktt_tune(b_problem, tmp_path / "b" / "out", "--duration", "3")
    a_out, _ = first.communicate(timeout=300)
    b_out, b_err = second.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, b_err[-2000:]
    waits = [x["message"] for x in lines_of(b_out) if x.get("type") == "log" and "waiting for GPU" in x["message"]]
    assert waits and f"held by pid {first.pid}, ktt tune of problem tiny" in waits[0]
    assert lines_of(a_out)[-1]["type"] == "result"
