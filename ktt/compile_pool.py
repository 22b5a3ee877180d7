"""Compile configurations in a pool of processes while the GPU measures others.

Kernel Tuner compiles one configuration at a time and spends most of its wall time there;
here every CPU core but one compiles ahead of the GPU. The pool uses the ``forkserver``
start method: the tuner's main process has threads (pipe readers), and forking a process
with threads is unsafe.

Workers never outlive the tuner, even in the middle of a compile that spins (a hostile
kernel): each watches the tuner's pid from a thread (NVRTC releases the GIL while it
compiles) and exits once the tuner is gone, and asks the kernel for SIGKILL when the
forkserver, its parent, exits. (The forkserver alone does not end them: every worker
holds the pipe whose closing tells the forkserver its clients are gone.) A compile is cut
off after ``ktt.nvrtc.compile_timeout_s``, and workers still busy are killed at ``shutdown``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor

from ktt.compile_cache import compile_cached
from ktt.nvrtc import CompileOutput, CompileRequest
from ktt.procs import arm_parent_death_signal, pid_alive

SHUTDOWN_GRACE_S = 0.5
WATCH_S = 0.5


def _worker_init(tuner_pid: int) -> None:
    """Die with the forkserver (the parent) and with the tuner (watched from a thread)."""
    arm_parent_death_signal()
    if os.getppid() == 1 or not pid_alive(tuner_pid):
        os._exit(1)

    def watch() -> None:
        while pid_alive(tuner_pid):
            time.sleep(WATCH_S)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="tuner-watch").start()


def _compile_job(req: CompileRequest, cache_dir: str | None) -> tuple[CompileOutput, str]:
    out, key = compile_cached(req, cache_dir)
    # The cubin travels back through a pipe; when it is on disk the worker reads it there.
    return out, key


def default_workers() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus - 1)


class CompilePool:
    def __init__(self, workers: int | None = None, cache_dir: str | None = None) -> None:
        self.workers = workers if workers is not None else default_workers()
        self.cache_dir = cache_dir
        self._pool: ProcessPoolExecutor | None = None
        if self.workers > 0:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["ktt.compile_pool"])
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=ctx, initializer=_worker_init, initargs=(os.getpid(),)
            )

    def submit(self, req: CompileRequest) -> Future[tuple[CompileOutput, str]]:
        if self._pool is None:
            fut: Future[tuple[CompileOutput, str]] = Future()
            try:
                fut.set_result(_compile_job(req, self.cache_dir))
            except Exception as exc:  # pragma: no cover
                fut.set_exception(exc)
            return fut
        return self._pool.submit(_compile_job, req, self.cache_dir)

    def worker_pids(self) -> list[int]:
        procs = getattr(self._pool, "_processes", None) or {}
        return [p.pid for p in list(procs.values()) if p.pid is not None]

    def shutdown(self) -> None:
        """Cancel what has not started; kill workers still busy after a short grace (a spinning compile)."""
        if self._pool is None:
            return
        procs = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = None
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive() and proc.pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(proc.pid, signal.SIGKILL)

    def __enter__(self) -> CompilePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
