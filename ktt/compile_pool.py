"""Compile configurations in a pool of processes while the GPU measures others.

Kernel Tuner compiles one configuration at a time and spends most of its wall time there;
here every CPU core but one compiles ahead of the GPU. The pool uses the ``forkserver``
start method: the tuner's main process has threads (pipe readers), and forking a process
with threads is unsafe.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor

from ktt.compile_cache import compile_cached
from ktt.nvrtc import CompileOutput, CompileRequest


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
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx)

    def submit(self, req: CompileRequest) -> Future[tuple[CompileOutput, str]]:
        if self._pool is None:
            fut: Future[tuple[CompileOutput, str]] = Future()
            try:
                fut.set_result(_compile_job(req, self.cache_dir))
            except Exception as exc:  # pragma: no cover
                fut.set_exception(exc)
            return fut
        return self._pool.submit(_compile_job, req, self.cache_dir)

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> CompilePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
