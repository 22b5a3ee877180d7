"""Issue 23, items 3 and 5: a compile is bounded in memory as well as in time.

A few hundred bytes of macros can make NVRTC allocate gigabytes (the red team's 642-byte kernel
took 2.5 GB, a 258 KB one ended in ``LLVM ERROR: out of memory``; four branches multiply it).
Every compile of model-written code now runs in a compile-pool worker whose address space is
limited (``RLIMIT_AS``, ``KTT_COMPILE_MEMORY_MB``, 4 GiB by default), ``ktt check`` included: the
compile fails as ``out of memory`` at the limit, whether NVRTC's front end reports it or LLVM
aborts the worker, the pool goes on, nothing of it is cached, and the check's work directory
does not stay behind.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest
from bounds_problem import ktt_check_argv, make_problem, run_measured, scale_spec

from ktt.compile_cache import CompileCache, compile_cached
from ktt.compile_pool import COMPILE_MEMORY_MB, CompilePool, compile_memory_limit_mb
from ktt.nvrtc import CompileOutput, CompileRequest
from tests.pathenv import child_pythonpath

pytestmark = pytest.mark.timeout(240)

SPEC = scale_spec(32, 64)


def memory_bomb(tens: int, times: int = 3) -> str:
    """A kernel of a few hundred bytes whose macros expand to ``times`` x 10^tens array elements:
    NVRTC's front end holds them all (3 x 10^6 took 1.6 GB and 14 s here, with no limit)."""
    lines = ["#define A0 1,1,1,1,1,1,1,1,1,1"]
    lines += [f"#define A{i} " + ",".join([f"A{i - 1}"] * 10) for i in range(1, tens)]
    body = ",".join([f"A{tens - 1}"] * times)
    lines.append(f"__device__ int table[] = {{ {body} }};")
    lines.append('extern "C" __global__ void scale(const float* X, float* Y) { Y[0] = X[0] + table[threadIdx.x]; }')
    return "\n".join(lines) + "\n"


def test_a_macro_bomb_in_ktt_check_is_out_of_memory_at_the_limit(tmp_path: Path) -> None:
    root = make_problem(tmp_path)
    (root / "tuning.yaml").write_text(SPEC)
    source = memory_bomb(6)
    assert len(source) < 700
    (root / "kernels.cu").write_text(source)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "KTT_COMPILE_MEMORY_MB": "2048", "TMPDIR": str(scratch)}
    argv = ktt_check_argv(root, tmp_path / "cache", "--sample", "1")
    code, out, err, took, max_rss_kib = run_measured(argv, env, 200)
    assert code == 1, (code, err[-2000:])
    report = json.loads(out.strip().splitlines()[-1])
    errors = [c["error"] or "" for c in report["configs"]]
    assert errors and all("out of memory" in e for e in errors), errors
    assert "KTT_COMPILE_MEMORY_MB" in errors[0]
    assert "Traceback" not in err
    # The limit is 2 GiB of address space, 1.5 GiB of it mapped before the compile: 0.7 GiB resident here;
    # without it, 1.3 GiB resident and a pass.
    assert max_rss_kib < 1024 * 1024, max_rss_kib
    assert took < 120, took
    assert not list(scratch.glob("ktt-check-*")) and not list(scratch.glob("ktt-pool-*"))
    assert not list((tmp_path / "cache").rglob("*.json")), "an out-of-memory failure is never cached"


def rlimit_job(req: CompileRequest, cache_dir: str | None, pch_dir: str | None) -> tuple[CompileOutput, str]:
    """A fake compile that reports its worker's address-space limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return CompileOutput(True, b"fake", log=str(soft)), "k"


def aborting_job(req: CompileRequest, cache_dir: str | None, pch_dir: str | None) -> tuple[CompileOutput, str]:
    """A fake compile that ends as LLVM does when an allocation fails: a message on stderr, then abort()."""
    os.write(2, b"LLVM ERROR: out of memory\nAllocation failed\n")
    os.abort()


def fake_request(source: str = "x") -> CompileRequest:
    return CompileRequest(source, "/nonexistent/k.cu", "k.cu", "sm_90", (), ())


def test_compile_workers_run_under_the_memory_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KTT_COMPILE_MEMORY_MB", raising=False)
    assert compile_memory_limit_mb() == COMPILE_MEMORY_MB == 4096
    with CompilePool(1, None, pch=False, job=rlimit_job) as pool:
        out, _ = pool.submit(fake_request()).result(timeout=60)
    assert int(out.log) == 4096 * 1024 * 1024
    monkeypatch.setenv("KTT_COMPILE_MEMORY_MB", "3000")
    with CompilePool(1, None, pch=False, job=rlimit_job) as pool:
        out, _ = pool.submit(fake_request()).result(timeout=60)
    assert int(out.log) == 3000 * 1024 * 1024
    assert resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY  # the tuner itself is not limited


def test_a_worker_that_aborts_out_of_memory_is_reported_as_such_and_replaced() -> None:
    with CompilePool(1, None, pch=False, job=aborting_job) as pool:
        before = pool.worker_pids()
        out, _ = pool.submit(fake_request()).result(timeout=60)
        assert not out.ok and out.out_of_memory
        assert out.errors[0].message.startswith("out of memory: the compiler reached the memory limit of 4,096 MiB")
        assert "signal 6" in out.errors[0].message
        assert pool.stats.out_of_memory == 1
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not pool.worker_pids() or pool.worker_pids() == before):
            time.sleep(0.05)
        assert pool.worker_pids() and pool.worker_pids() != before


def test_an_out_of_memory_failure_is_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ktt.compile_cache as cc

    def oom(req: CompileRequest, pch_dir: str | None = None) -> CompileOutput:
        return CompileOutput(False, None, log="catastrophic error: out of memory", out_of_memory=True)

    monkeypatch.setattr(cc, "compile_cubin", oom)
    monkeypatch.setattr(cc, "precheck", lambda req: None)
    out, key = compile_cached(fake_request(), str(tmp_path))
    assert out.out_of_memory and CompileCache(str(tmp_path)).get(key) is None
