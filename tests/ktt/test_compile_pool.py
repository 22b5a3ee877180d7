"""The compile pool: a compile past its time limit kills its worker (replaced at once), priorities, duplicates.

The jobs here are fakes (``fake_compile_job``: a job that sleeps as long as the request's
source says, then answers like a compile), so the pool's own behaviour is tested without
NVRTC's timing; one test runs real NVRTC to see a duplicate configuration compile once.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ktt.compile_cache import cache_key, effective_request
from ktt.compile_pool import CompilePool
from ktt.nvrtc import CompileOutput, CompileRequest
from ktt.procs import pid_alive
from ktt.toolkit import cuda_include_dirs


def fake_compile_job(req: CompileRequest, cache_dir: str | None, pch_dir: str | None) -> tuple[CompileOutput, str]:
    """A fake compile: sleeps for the seconds in ``req.source`` ("sleep:2.5"), then reports which process ran it."""
    seconds = float(req.source.split(":", 1)[1].split("#")[0]) if req.source.startswith("sleep:") else 0.0
    time.sleep(seconds)
    return CompileOutput(True, b"fake", log=f"pid={os.getpid()} t={time.monotonic()}", seconds=seconds), req.source


def fake_request(source: str, name: str = "k.cu") -> CompileRequest:
    return CompileRequest(source, f"/nonexistent/{name}", name, "sm_90", (), ())


def wait_until(cond, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def test_a_compile_past_its_limit_kills_its_worker_and_the_pool_keeps_its_size() -> None:
    pool = CompilePool(2, None, timeout_s=1.0, pch=False, job=fake_compile_job)
    try:
        assert wait_until(lambda: len(pool.worker_pids()) == 2, 30)
        before = set(pool.worker_pids())
        spin = pool.submit(fake_request("sleep:600"))
        out, _ = spin.result(timeout=30)
        assert not out.ok and out.timed_out
        assert "compile timeout" in out.errors[0].message and "did not finish within 1 s" in out.errors[0].message
        assert pool.stats.timeouts == 1
        # The spinning worker is gone, a fresh one took its place: two workers, both free.
        assert wait_until(lambda: len(pool.worker_pids()) == 2 and set(pool.worker_pids()) != before, 10)
        gone = before - set(pool.worker_pids())
        assert len(gone) == 1 and wait_until(lambda: not any(pid_alive(p) for p in gone), 5)
        start = time.monotonic()
        quick = [pool.submit(fake_request(f"sleep:0.5#{i}")) for i in range(2)]
        outs = [f.result(timeout=30)[0] for f in quick]
        assert all(o.ok for o in outs)
        assert len({o.log.split()[0] for o in outs}) == 2, "both workers took a job"
        assert time.monotonic() - start < 5
    finally:
        pool.shutdown()


def exploding_macros(levels: int) -> str:
    """A source whose macro expansion grows 3^levels: NVRTC takes minutes over it (a stand-in for a hostile kernel)."""
    lines = ["#define E0(...) __VA_ARGS__"]
    lines += [f"#define E{i}(...) E{i - 1}(E{i - 1}(E{i - 1}(__VA_ARGS__)))" for i in range(1, levels + 1)]
    lines.append(f'E{levels}(extern "C" __global__ void k(float* y) {{ y[0] = 1.0f; }})')
    return "\n".join(lines) + "\n"


def test_a_timed_out_compile_is_not_cached_and_the_real_pool_kills_it(tmp_path: Path) -> None:
    from ktt.compile_cache import CompileCache

    req = CompileRequest(exploding_macros(16), str(tmp_path / "kernels.cu"), "kernels.cu", "sm_90", (),
                         (str(tmp_path), *cuda_include_dirs()))  # fmt: skip
    pool = CompilePool(1, str(tmp_path / "cache"), timeout_s=5.0, pch=False)  # a trivial compile fits, loaded or not
    try:
        start = time.monotonic()
        out, key = pool.submit(req).result(timeout=120)
        assert time.monotonic() - start < 60
        assert out.timed_out and not out.ok and "did not finish within 5 s" in out.errors[0].message
        assert CompileCache(tmp_path / "cache").get(key) is None, "a timeout must not be cached"
        assert wait_until(lambda: len(pool.worker_pids()) == 1, 30)
        ok, _ = pool.submit(request_for(tmp_path, (("SCALE", "2.0f"),))).result(timeout=300)
        assert ok.ok
    finally:
        pool.shutdown()


def test_jobs_run_in_priority_order() -> None:
    pool = CompilePool(1, None, timeout_s=30, pch=False, job=fake_compile_job)
    try:
        blocker = pool.submit(fake_request("sleep:1.0"))  # occupies the only worker
        time.sleep(0.2)
        late = pool.submit(fake_request("sleep:0#late"), priority=10)
        first = pool.submit(fake_request("sleep:0#first"), priority=-5)
        middle = pool.submit(fake_request("sleep:0#middle"), priority=1)
        moved = pool.submit(fake_request("sleep:0#moved"), priority=20)
        assert pool.reprioritize(moved, -10)
        blocker.result(timeout=30)
        stamps = {name: float(f.result(timeout=30)[0].log.split("t=")[1])
                  for name, f in (("late", late), ("first", first), ("middle", middle), ("moved", moved))}  # fmt: skip
        assert sorted(stamps, key=stamps.__getitem__) == ["moved", "first", "middle", "late"]
    finally:
        pool.shutdown()


def test_a_worker_that_dies_costs_one_configuration() -> None:
    pool = CompilePool(1, None, timeout_s=30, pch=False, job=fake_compile_job)
    try:
        victim = pool.submit(fake_request("sleep:30"))
        assert wait_until(lambda: bool(pool.worker_pids()), 30)
        time.sleep(0.5)
        os.kill(pool.worker_pids()[0], 9)
        out, _ = victim.result(timeout=30)
        assert not out.ok and "compiler process died (signal 9)" in out.errors[0].message
        after, _ = pool.submit(fake_request("sleep:0")).result(timeout=30)
        assert after.ok and pool.stats.crashes == 1
    finally:
        pool.shutdown()


def test_cancelled_jobs_never_run_and_shutdown_cancels_the_queue() -> None:
    pool = CompilePool(1, None, timeout_s=30, pch=False, job=fake_compile_job)
    blocker = pool.submit(fake_request("sleep:1"))
    queued = pool.submit(fake_request("sleep:0#q"))
    assert queued.cancel()
    blocker.result(timeout=30)
    waiting = pool.submit(fake_request("sleep:5#w1"))
    never = pool.submit(fake_request("sleep:5#w2"))
    time.sleep(0.3)
    pool.shutdown()
    assert never.cancelled()
    assert waiting.done()


UNUSED_SOURCE = """extern "C" __global__ void k(float* x) { x[threadIdx.x] *= SCALE; }
"""


def request_for(tmp: Path, defines: tuple[tuple[str, str], ...]) -> CompileRequest:
    return CompileRequest(UNUSED_SOURCE, str(tmp / "kernels.cu"), "kernels.cu", "sm_90", defines,
                          (str(tmp), *cuda_include_dirs()))  # fmt: skip


def test_configurations_that_differ_in_an_unread_parameter_compile_once(tmp_path: Path) -> None:
    a = request_for(tmp_path, (("SCALE", "2.0f"), ("UNREAD_KNOB", "1")))
    b = request_for(tmp_path, (("SCALE", "2.0f"), ("UNREAD_KNOB", "2")))
    c = request_for(tmp_path, (("SCALE", "3.0f"), ("UNREAD_KNOB", "1")))
    assert effective_request(a).defines == (("SCALE", "2.0f"),)
    assert cache_key(effective_request(a)) == cache_key(effective_request(b)) != cache_key(effective_request(c))
    pool = CompilePool(2, str(tmp_path / "cache"), pch=False)
    try:
        futures = [pool.submit(r) for r in (a, b, c)]
        outs = [f.result(timeout=300)[0] for f in futures]
        assert all(o.ok for o in outs)
        assert pool.stats.compiled + pool.stats.cache_hits == 2 and pool.stats.deduplicated == 1
        assert outs[1].deduplicated and outs[1].cubin == outs[0].cubin
    finally:
        pool.shutdown()


def test_the_precompiled_header_store_is_private_and_cleaned_up(tmp_path: Path) -> None:
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"pch-{int(gone.stdout)}-abc"
    stale.mkdir()
    (stale / "x.pch").write_bytes(b"left by a killed tuner")
    alive = tmp_path / f"pch-{os.getpid()}-other"  # a live process's store is left alone
    alive.mkdir()
    pool = CompilePool(0, str(tmp_path), pch=True)
    try:
        assert not stale.exists() and alive.exists()
        assert pool.pch_dir is not None and Path(pool.pch_dir).parent == tmp_path
        assert os.stat(pool.pch_dir).st_mode & 0o777 == 0o700
    finally:
        pool.shutdown()
    assert not Path(pool.pch_dir).exists()


def _stamp(future) -> float:  # type: ignore[no-untyped-def]
    return float(future.result(timeout=30)[0].log.split("t=")[1])


def test_a_duplicate_wanted_sooner_moves_its_queued_leader_forward() -> None:
    pool = CompilePool(1, None, timeout_s=30, pch=False, job=fake_compile_job, dedup=True)
    try:
        blocker = pool.submit(fake_request("sleep:1.0"))
        time.sleep(0.2)
        leader = pool.submit(fake_request("sleep:0#A"), priority=10)
        other = pool.submit(fake_request("sleep:0#B"), priority=5)
        follower = pool.submit(fake_request("sleep:0#A"), priority=1)  # the same program, wanted first now
        assert pool.stats.deduplicated == 1
        blocker.result(timeout=30)
        assert _stamp(leader) < _stamp(other)
        assert follower.result(timeout=30)[0].deduplicated
    finally:
        pool.shutdown()


def test_a_duplicate_can_be_reprioritized_and_a_cancelled_leader_is_not_followed() -> None:
    pool = CompilePool(1, None, timeout_s=30, pch=False, job=fake_compile_job, dedup=True)
    try:
        blocker = pool.submit(fake_request("sleep:1.0"))
        time.sleep(0.2)
        leader = pool.submit(fake_request("sleep:0#A"), priority=10)
        follower = pool.submit(fake_request("sleep:0#A"), priority=10)
        other = pool.submit(fake_request("sleep:0#B"), priority=5)
        assert pool.reprioritize(follower, 1)  # moves the job both wait for
        gone = pool.submit(fake_request("sleep:0#C"), priority=2)
        assert gone.cancel()  # withdrawn by its only caller
        again = pool.submit(fake_request("sleep:0#C"), priority=20)  # a fresh job, not a follower of the cancelled one
        assert pool.stats.deduplicated == 1
        blocker.result(timeout=30)
        assert _stamp(leader) < _stamp(other) < _stamp(again)
        assert not again.result(timeout=30)[0].deduplicated and gone.cancelled()
    finally:
        pool.shutdown()
