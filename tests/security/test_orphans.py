"""Class 4: every child dies with its parent; a compile that spins is cut off.

The hostile kernel here makes NVRTC's preprocessor spin without using much memory: each
macro level expands the one below three times, so 15 levels take minutes of CPU.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from bounds_problem import scale_spec

from ktt.compile_pool import CompilePool
from ktt.nvrtc import CompileRequest, compile_cubin
from ktt.procs import pid_alive
from ktt.toolkit import cuda_include_dirs
from tests.pathenv import child_pythonpath

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "ktt" / "data" / "tiny"
SPEC = scale_spec(64)


def spinning_kernel(levels: int) -> str:
    lines = ["#define E0(...) __VA_ARGS__"]
    lines += [f"#define E{i}(...) E{i - 1}(E{i - 1}(E{i - 1}(__VA_ARGS__)))" for i in range(1, levels + 1)]
    lines.append(f'E{levels}(extern "C" __global__ void scale(const float* X, float* Y) {{ Y[0] = X[0]; }})')
    return "\n".join(lines) + "\n"


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and pid_alive(int(entry)):
            found.append(int(entry))
    return found


def wait_until(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_a_ktt_check_dies_with_the_engine_that_started_it(tmp_path: Path) -> None:
    problem = tmp_path / "problem"
    shutil.copytree(TINY, problem)
    kernel = problem / "spinning_kernels.cu"
    kernel.write_text(spinning_kernel(15))
    (problem / "tuning.yaml").write_text(SPEC)
    engine = textwrap.dedent(
        f"""
        import asyncio
        from pathlib import Path
        from cacao_tui.ktt_client import KttTuner
        asyncio.run(KttTuner().check(Path({str(problem)!r}), Path({str(kernel)!r}),
                                     Path({str(problem / "tuning.yaml")!r}), sample=1, arch="sm_90"))
        """
    )
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "KTT_CACHE_DIR": str(tmp_path / "cache")}
    parent = subprocess.Popen([sys.executable, "-c", engine], env=env, start_new_session=True)
    try:
        assert wait_until(lambda: processes_with(str(kernel)), 30), "ktt check did not start"
        time.sleep(2.0)  # well inside the compile, which would take minutes
        checks = processes_with(str(kernel))
        assert checks
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert wait_until(lambda: not processes_with(str(kernel)), 5), f"ktt check {checks} outlived its parent"
    finally:
        with_kill(parent)
        for pid in processes_with(str(kernel)):
            os.kill(pid, signal.SIGKILL)


def with_kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def request(tmp: Path, source: str) -> CompileRequest:
    return CompileRequest(source, str(tmp / "kernels.cu"), "kernels.cu", "sm_90", (), (str(tmp), *cuda_include_dirs()))


def test_compile_workers_die_with_the_tuner(tmp_path: Path) -> None:
    tuner = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_orphans import request, spinning_kernel
        from ktt.compile_pool import CompilePool
        pool = CompilePool(1, None)
        pool.submit(request(Path({str(tmp_path)!r}), spinning_kernel(15)))
        deadline = time.monotonic() + 60  # a loaded machine starts the forkserver's worker late
        while not pool.worker_pids() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)
        print(*pool.worker_pids(), flush=True)
        time.sleep(600)
        """
    )
    env = {**os.environ, "PYTHONPATH": child_pythonpath()}
    parent = subprocess.Popen(
        [sys.executable, "-c", tuner], env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    workers: list[int] = []
    try:
        workers = [int(p) for p in parent.stdout.readline().split()]  # type: ignore[union-attr]
        assert workers and all(pid_alive(p) for p in workers)
        time.sleep(1.0)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert wait_until(lambda: not any(pid_alive(p) for p in workers), 5), "a compile worker outlived the tuner"
    finally:
        with_kill(parent)
        for pid in workers:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_shutting_the_pool_down_kills_a_spinning_compile(tmp_path: Path) -> None:
    pool = CompilePool(1, None)
    pool.submit(request(tmp_path, spinning_kernel(15)))
    assert wait_until(lambda: bool(pool.worker_pids()), 30)
    workers = pool.worker_pids()
    time.sleep(1.5)
    pool.shutdown()
    assert wait_until(lambda: not any(pid_alive(p) for p in workers), 3)


def test_a_compile_that_spins_ends_at_its_time_limit(tmp_path: Path) -> None:
    start = time.monotonic()
    out = compile_cubin(request(tmp_path, spinning_kernel(12)), timeout_s=0.5)
    assert time.monotonic() - start < 4
    assert not out.ok and "did not finish within 0.5 s" in out.errors[0].message


@pytest.mark.parametrize("spawner", ["thread that waits", "event loop"])
def test_a_child_learns_its_parent_and_dies_with_it(tmp_path: Path, spawner: str) -> None:
    """The mechanism itself: KTT_PARENT_PID + PR_SET_PDEATHSIG (and the polling fallback)."""
    child = "from ktt.procs import exit_when_parent_dies as d; import time; d(poll_s=30); time.sleep(600)"
    if spawner == "event loop":
        code = (
            "import asyncio, sys\nfrom cacao_tui.subprocesses import run_streaming\n"
            f"asyncio.run(run_streaming([sys.executable, '-c', {child!r}], on_stdout_line=print))"
        )
    else:
        code = f"import sys\nfrom ktt import procs\nprocs.run([sys.executable, '-c', {child!r}], timeout_s=600)"
    marker = f"# {tmp_path}"
    env = {**os.environ, "PYTHONPATH": child_pythonpath()}
    parent = subprocess.Popen([sys.executable, "-c", code.replace("time.sleep(600)", f"time.sleep(600)  {marker}")],
                              env=env, start_new_session=True)  # fmt: skip
    try:
        assert wait_until(lambda: len(processes_with(marker)) >= 2, 30)
        time.sleep(1.0)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        # poll_s=30: only the kernel's parent-death signal can end the child this fast
        assert wait_until(lambda: not processes_with(marker), 3)
    finally:
        with_kill(parent)
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)
