"""Compile configurations in a pool of processes while the GPU measures others.

Kernel Tuner compiles one configuration at a time and spends most of its wall time there;
here every CPU core but one compiles ahead of the GPU. The pool is ours, not
``concurrent.futures``: each worker is one process with one pipe, and one dispatcher
thread hands out jobs, so that

- a compile that outlives its time limit (a hostile kernel that makes NVRTC spin) is
  ended by killing *that* worker, which is replaced at once; the configuration is
  recorded as a compile timeout and the pool keeps its size for the rest of the run;
- a worker that dies in the middle of a compile (NVRTC crashed, the OOM killer) costs
  one failed configuration, not the pool;
- each worker's address space is limited (``RLIMIT_AS``, ``compile_memory_limit_mb``), so a
  kernel that makes NVRTC allocate without end (a 600-byte macro bomb took 2.5 GB) fails as
  ``out of memory`` at the limit instead of taking the machine's memory: NVRTC's front end
  reports it as a compile error, and where LLVM aborts the worker instead (``LLVM ERROR: out
  of memory``, read from the worker's captured stderr) the pool reports the same;
- jobs run in priority order (``submit(..., priority=)``, lower first, then submission
  order), so the search can say which configuration it wants first;
- two configurations that compile the same program (a parameter the source never reads:
  ``ktt.compile_cache.effective_request``) compile once: the second waits for the first.

Processes start from the ``forkserver`` (the tuner's main process has threads, and
forking a process with threads is unsafe) as soon as the pool is made, and each loads
NVRTC once (``warm``) while the tuner starts its GPU worker.

Workers never outlive the tuner, even in the middle of a compile that spins: each watches
the tuner's pid from a thread (NVRTC releases the GIL while it compiles) and exits once
the tuner is gone, and asks the kernel for SIGKILL when the forkserver, its parent, exits.
``shutdown`` kills workers still busy after a short grace.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import multiprocessing
import os
import resource
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from ktt.compile_cache import cache_key, compile_cached, effective_request
from ktt.cpu_quiet import HeavyHold
from ktt.nvrtc import (
    CompileDiagnostic,
    CompileOutput,
    CompileRequest,
    compile_timeout_s,
    out_of_memory_message,
    warm_up,
)
from ktt.procs import arm_parent_death_signal, pid_alive

SHUTDOWN_GRACE_S = 0.5
WATCH_S = 0.5
HELD_BACK_POLL_S = 0.1  # jobs held back while a CPU reference is timed: how often to look again
KILL_GRACE_S = 1.0  # past its time limit, a compile gets this long to report its own timeout
# The address space a compile worker may map (RLIMIT_AS). A worker maps about 1.5 GiB before
# it compiles anything (Python, cuda.core, NVRTC and its 1 GiB PCH heap, reserved in the
# forkserver); the heaviest normal compile measured (bench/compile_memory.py: a cub kernel
# making its precompiled header) peaked at 1.6 GiB mapped, 0.47 GiB resident. docs/SECURITY.md
# has the figures.
COMPILE_MEMORY_MB = 4 * 1024
MEMORY_ENV = "KTT_COMPILE_MEMORY_MB"  # the user's environment only (a problem's .env never reaches ktt)
_ERR_TAIL = 4096  # bytes of a dead worker's stderr looked at for the out-of-memory message
_OOM_WORDS = ("out of memory", "std::bad_alloc", "cannot allocate memory")


def compile_memory_limit_mb() -> int:
    """A compile worker's address-space limit in MiB: ``KTT_COMPILE_MEMORY_MB``, else the default; 0: none."""
    with contextlib.suppress(ValueError):
        value = int(os.environ.get(MEMORY_ENV, ""))
        if value >= 0:
            return value
    return COMPILE_MEMORY_MB


def _limit_address_space(limit_mb: int) -> None:
    """RLIMIT_AS for this process, never above a limit already in force."""
    if limit_mb <= 0:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    want = limit_mb * 1024 * 1024
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if soft == resource.RLIM_INFINITY or soft > want:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (want, hard))


def _capture_stderr(path: str | None) -> int | None:
    """Point fd 2 at ``path`` (so the pool can read what NVRTC printed before it aborted); the
    old stderr's duplicate, to forward what a job printed, or None when not captured."""
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    saved = os.dup(2)
    os.dup2(fd, 2)
    os.close(fd)
    return saved


def _forward_stderr(saved: int | None) -> None:
    """Copy what the last job printed to the real stderr and empty the capture (an fstat when it printed nothing)."""
    if saved is None:
        return
    with contextlib.suppress(OSError):
        size = os.fstat(2).st_size
        if size:
            os.write(saved, os.pread(2, min(size, 64 * 1024), 0))
            os.ftruncate(2, 0)
            os.lseek(2, 0, os.SEEK_SET)


def _worker_init(tuner_pid: int, limit_mb: int = 0) -> None:
    """Die with the forkserver (the parent) and with the tuner (watched from a thread); limit the address space."""
    arm_parent_death_signal()
    if os.getppid() == 1 or not pid_alive(tuner_pid):
        os._exit(1)
    _limit_address_space(limit_mb)

    def watch() -> None:
        while pid_alive(tuner_pid):
            time.sleep(WATCH_S)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="tuner-watch").start()


def _compile_job(req: CompileRequest, cache_dir: str | None, pch_dir: str | None) -> tuple[CompileOutput, str]:
    if pch_dir is not None and not nvrtc_heap_shared():
        pch_dir = None  # this worker's NVRTC heap is its own: a header made by another would not load
    return compile_cached(req, cache_dir, pch_dir=pch_dir)


def nvrtc_heap_shared() -> bool:
    """True in a worker forked after the forkserver reserved NVRTC's PCH heap (ktt.nvrtc_heap)."""
    import sys

    heap = sys.modules.get("ktt.nvrtc_heap")
    return bool(heap is not None and heap.RESERVED and os.getpid() != heap.RESERVED_IN)


def _warm_job(arch: str) -> None:
    warm_up(arch)


def _worker_main(conn: Connection, tuner_pid: int, limit_mb: int = 0, err_path: str | None = None) -> None:
    """One worker: run jobs from the pipe until told to stop; retire after a compile left a thread behind."""
    _worker_init(tuner_pid, limit_mb)
    saved_err = _capture_stderr(err_path)
    baseline = threading.active_count()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        if msg is None:
            os._exit(0)
        job_id, fn, args = msg
        try:
            reply: tuple[str, Any] = ("ok", fn(*args))
        except BaseException as exc:  # handed to the caller's future
            reply = ("error", f"{type(exc).__name__}: {exc}")
        _forward_stderr(saved_err)
        # A sandboxed compile that hit its own time limit leaves its thread spinning, and one that
        # reached the memory limit leaves the address space at its peak: this process is spent.
        # Say so with the result, then go (the pool starts a fresh one).
        out = reply[1][0] if reply[0] == "ok" and isinstance(reply[1], tuple) and reply[1] else None
        retire = threading.active_count() > baseline or bool(getattr(out, "out_of_memory", False))
        try:
            conn.send((job_id, reply, retire))
        except (OSError, ValueError):
            os._exit(1)
        if retire:
            os._exit(0)


def default_workers() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus - 1)


@dataclass(order=True)
class _Job:
    priority: float
    seq: int
    fn: Callable[..., Any] = field(compare=False)
    args: tuple = field(compare=False)
    future: Future = field(compare=False)
    key: str | None = field(compare=False, default=None)  # dedup key (compile jobs)
    timeout_s: float | None = field(compare=False, default=None)
    followers: list[Future] = field(compare=False, default_factory=list)


@dataclass
class _Worker:
    process: Any
    conn: Connection
    err_path: str | None = None  # its captured stderr (read when it dies)
    job: _Job | None = None
    deadline: float = 0.0
    retiring: bool = False


@dataclass
class PoolStats:
    """What the pool did, for the tuner's log line and bench/compile_throughput.py."""

    submitted: int = 0
    deduplicated: int = 0  # waited for an identical compile in flight
    cache_hits: int = 0
    compiled: int = 0
    compile_s: float = 0.0
    pch_used: int = 0
    pch_created: int = 0
    timeouts: int = 0
    crashes: int = 0
    out_of_memory: int = 0  # compiles stopped at the memory limit (NVRTC's error or a worker that aborted)
    workers_replaced: int = 0

    def line(self) -> str:
        return (
            f"compile pool: {self.compiled} compiled ({self.compile_s:.1f} s of NVRTC, "
            f"{self.compile_s / self.compiled if self.compiled else 0:.3f} s each), {self.cache_hits} from the cache, "
            f"{self.deduplicated} identical to one in flight, precompiled header used {self.pch_used} "
            f"(created {self.pch_created}), {self.timeouts} timed out, {self.crashes} crashed"
            + (f", {self.out_of_memory} out of memory" if self.out_of_memory else "")
        )


def timeout_output(req: CompileRequest, seconds: float) -> CompileOutput:
    """What a compile killed at its time limit returns (never cached: it depends on the machine's load)."""
    message = f"compile timeout: the compiler did not finish within {seconds:g} s (a kernel that makes NVRTC spin)"
    diag = CompileDiagnostic(req.display_name, None, None, "error", message)
    return CompileOutput(False, None, [diag], f"{req.display_name}: error: {message}", seconds, timed_out=True)


def crash_output(req: CompileRequest, why: str) -> CompileOutput:
    message = f"the compiler process died ({why})"
    diag = CompileDiagnostic(req.display_name, None, None, "error", message)
    return CompileOutput(False, None, [diag], f"{req.display_name}: error: {message}", 0.0)


def out_of_memory_output(req: CompileRequest, limit_mb: int, why: str) -> CompileOutput:
    """A compile whose worker died at its address-space limit (LLVM aborts: ``LLVM ERROR: out of memory``)."""
    message = f"{out_of_memory_message(limit_mb)} (the compiler process ended: {why})"
    diag = CompileDiagnostic(req.display_name, None, None, "error", message)
    return CompileOutput(False, None, [diag], f"{req.display_name}: error: {message}", 0.0, out_of_memory=True)


def _err_tail(path: str | None) -> str:
    """The end of a dead worker's captured stderr (a regular file of ours, read capped), '' when none."""
    if path is None:
        return ""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, _ERR_TAIL, max(0, size - _ERR_TAIL)).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


class CompilePool:
    """A fixed number of compile processes fed in priority order; see the module docstring.

    ``job`` replaces the compile for tests (a fake that sleeps): it is called in the worker
    as ``job(req, cache_dir, pch_dir)`` and must be a module-level function; identical
    requests share one job only for the real compile unless ``dedup`` says so. ``pch``: let
    kernels that start with heavy includes share precompiled headers (ktt.pch) in a private
    directory that lives as long as the pool.
    """

    def __init__(
        self,
        workers: int | None = None,
        cache_dir: str | None = None,
        *,
        timeout_s: float | None = None,
        pch: bool = True,
        job: Callable[..., Any] | None = None,
        dedup: bool | None = None,
        memory_limit_mb: int | None = None,
    ) -> None:
        self.workers = workers if workers is not None else default_workers()
        self.cache_dir = cache_dir
        self.timeout_s = timeout_s if timeout_s is not None else compile_timeout_s()
        self.memory_limit_mb = memory_limit_mb if memory_limit_mb is not None else compile_memory_limit_mb()
        self.pch_dir: str | None = None
        base = ""
        if pch and os.environ.get("KTT_NO_PCH") is None:
            base = cache_dir if cache_dir and os.path.isdir(cache_dir) else tempfile.gettempdir()
            remove_stale_dirs(base)
            with contextlib.suppress(OSError):  # mode 0700, ours; the pid lets a later pool clean up after a kill
                self.pch_dir = tempfile.mkdtemp(prefix=f"pch-{os.getpid()}-", dir=base)
        self.stats = PoolStats()
        self._job_fn = job or _compile_job
        self._dedup = dedup if dedup is not None else self._job_fn is _compile_job
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._heap: list[_Job] = []
        self._inflight: dict[str, _Job] = {}  # dedup key -> the job that compiles it
        self._pool: list[_Worker] = []
        self._closing = False
        self._tuner_pid = os.getpid()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._err_dir: str | None = None  # the workers' captured stderr files
        self._spawned = itertools.count()
        self._cpu = HeavyHold()  # held while a job is in flight: no CPU reference is timed meanwhile (ktt.cpu_quiet)
        if self.workers > 0:
            if base != tempfile.gettempdir():  # not cleaned just above
                remove_stale_dirs(tempfile.gettempdir())
            with contextlib.suppress(OSError):  # mode 0700; the pid lets a later pool clean up after a kill
                self._err_dir = tempfile.mkdtemp(prefix=f"ktt-pool-{os.getpid()}-")
            self._ctx = multiprocessing.get_context("forkserver")
            self._ctx.set_forkserver_preload(["ktt.compile_pool", "ktt.nvrtc_heap"])
            self._thread = threading.Thread(target=self._dispatch, daemon=True, name="ktt-compile-pool")
            self._thread.start()
        else:
            self._started.set()

    # -- the caller's side -----------------------------------------------------------------

    def warm(self, arch: str) -> list[Future]:
        """Load NVRTC in every worker now (first, before any compile), so the first compiles do not pay for it."""
        if self.workers <= 0:
            return []
        return [self._enqueue(_warm_job, (arch,), -1e18, None, None) for _ in range(self.workers)]

    def submit(self, req: CompileRequest, priority: float | None = None) -> Future[tuple[CompileOutput, str]]:
        """Compile ``req``; lower ``priority`` first (default: submission order)."""
        self.stats.submitted += 1
        seq_priority = float(next(self._seq)) if priority is None else priority
        if self.workers <= 0:
            fut: Future[tuple[CompileOutput, str]] = Future()
            try:
                out, key = self._job_fn(req, self.cache_dir, self.pch_dir)
                self._count(out)
                fut.set_result((out, key))
            except Exception as exc:  # pragma: no cover
                fut.set_exception(exc)
            return fut
        key = cache_key(effective_request(req)) if self._dedup else None
        with self._lock:
            leader = self._inflight.get(key) if key is not None else None
            if leader is not None and (
                not leader.future.cancelled() or any(not f.cancelled() for f in leader.followers)
            ):  # an identical compile is queued or running (one cancelled by all its callers is not)
                follower: Future = Future()
                leader.followers.append(follower)
                self.stats.deduplicated += 1
                if seq_priority < leader.priority and not leader.future.running():  # still queued: wanted sooner now
                    leader.priority = seq_priority
                    heapq.heapify(self._heap)
                return follower
        return self._enqueue(self._job_fn, (req, self.cache_dir, self.pch_dir), seq_priority, key, self.timeout_s)

    def reprioritize(self, future: Future, priority: float) -> bool:
        """Move a job that has not started; False when it already runs, finished or is unknown.

        ``future`` may be a duplicate's (a follower of an identical compile): its job then
        moves only forward, as the other callers still want it at least as soon as before.
        """
        with self._lock:
            for job in self._heap:
                if job.future is future or any(f is future for f in job.followers):
                    job.priority = priority if job.future is future else min(job.priority, priority)
                    heapq.heapify(self._heap)
                    self._wake()
                    return True
        return False

    def pending(self) -> int:
        with self._lock:
            return len(self._heap)

    def worker_pids(self, wait_s: float = 60.0) -> list[int]:
        """The workers' pids, once the first ones have started (they start in the background)."""
        self._started.wait(wait_s)
        with self._lock:
            return [w.process.pid for w in self._pool if w.process.pid is not None]

    def shutdown(self) -> None:
        """Cancel what has not started; kill workers still busy after a short grace (a spinning compile)."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            jobs, self._heap = self._heap, []
        for job in jobs:
            job.future.cancel()
            for f in job.followers:
                f.cancel()
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            workers, self._pool = self._pool, []
        for w in workers:
            if w.job is None:
                with contextlib.suppress(OSError, ValueError):
                    w.conn.send(None)
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        for w in workers:
            w.process.join(max(0.0, deadline - time.monotonic()))
            if w.process.is_alive():
                self._kill(w)
            with contextlib.suppress(OSError):
                w.conn.close()
        for w in workers:
            if w.job is not None:
                self._finish(w.job, exc=RuntimeError("the compile pool was shut down"))
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._wake_w = -1  # the number may be reused: never write to it again
        for d in (self.pch_dir, self._err_dir):
            if d is not None:
                shutil.rmtree(d, ignore_errors=True)

    def __enter__(self) -> CompilePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- inside ------------------------------------------------------------------------------

    def _enqueue(
        self, fn: Callable[..., Any], args: tuple, priority: float, key: str | None, timeout_s: float | None
    ) -> Future:
        fut: Future = Future()
        job = _Job(priority, next(self._seq), fn, args, fut, key, timeout_s)
        with self._lock:
            if self._closing:
                fut.cancel()
                return fut
            heapq.heappush(self._heap, job)
            if key is not None:
                self._inflight[key] = job
        self._wake()
        return fut

    def _wake(self) -> None:
        if self._wake_w < 0:
            return
        with contextlib.suppress(OSError, BlockingIOError):
            os.write(self._wake_w, b"x")

    def _spawn(self) -> _Worker:
        parent, child = self._ctx.Pipe()
        err = os.path.join(self._err_dir, f"worker-{next(self._spawned)}.err") if self._err_dir else None
        proc = self._ctx.Process(target=_worker_main, args=(child, self._tuner_pid, self.memory_limit_mb, err),
                                 daemon=True, name="ktt-compile")  # fmt: skip
        proc.start()
        child.close()
        return _Worker(proc, parent, err)

    def _kill(self, w: _Worker) -> None:
        if w.process.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(w.process.pid, signal.SIGKILL)
        w.process.join(2.0)

    def _replace(self, w: _Worker) -> None:
        """Take a dead or spent worker out and start a fresh one in its place."""
        with contextlib.suppress(OSError):
            w.conn.close()
        if w.process.is_alive():
            self._kill(w)
        else:
            w.process.join(0.1)
        if w.err_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(w.err_path)
        with self._lock:
            if w in self._pool:
                self._pool.remove(w)
            closing = self._closing
        if not closing:
            fresh = self._spawn()
            with self._lock:
                self._pool.append(fresh)
            self.stats.workers_replaced += 1

    def _count(self, out: Any) -> None:
        if not isinstance(out, CompileOutput):
            return
        if out.out_of_memory and not out.cached:
            self.stats.out_of_memory += 1
        if out.cached:
            self.stats.cache_hits += 1
        elif out.timed_out:
            self.stats.timeouts += 1
        else:
            self.stats.compiled += 1
            self.stats.compile_s += out.seconds
        if out.pch == "used":
            self.stats.pch_used += 1
        elif out.pch == "created":
            self.stats.pch_created += 1

    def _finish(self, job: _Job, result: Any = None, exc: BaseException | None = None, count: bool = True) -> None:
        with self._lock:
            if job.key is not None and self._inflight.get(job.key) is job:
                del self._inflight[job.key]
            followers = list(job.followers)
        if exc is None and count:
            self._count(result[0] if isinstance(result, tuple) and result else None)
        for i, fut in enumerate([job.future, *followers]):
            value = result
            if exc is None and i > 0 and isinstance(result, tuple) and isinstance(result[0], CompileOutput):
                value = (_as_duplicate(result[0]), result[1])
            _resolve(fut, value, exc)

    def _next_job(self) -> _Job | None:
        """The most wanted job not cancelled (its followers inherit it when the leader was cancelled)."""
        while self._heap:
            job = heapq.heappop(self._heap)
            if job.future.set_running_or_notify_cancel():
                return job
            live = [f for f in job.followers if not f.cancelled()]
            if live:  # the leader was cancelled but a follower still wants the result
                job.future, job.followers = live[0], live[1:]
                if job.future.set_running_or_notify_cancel():
                    return job
            if job.key is not None and self._inflight.get(job.key) is job:
                del self._inflight[job.key]
        return None

    def _dispatch(self) -> None:
        try:
            try:
                for _ in range(self.workers):
                    w = self._spawn()
                    with self._lock:
                        self._pool.append(w)
            finally:
                self._started.set()
            while True:
                with self._lock:
                    if self._closing:
                        return
                    idle = [w for w in self._pool if w.job is None and not w.retiring]
                    starts: list[tuple[_Worker, _Job]] = []
                    # While a CPU reference is timed (ktt.cpu_quiet), no job starts: asked again below.
                    held_back = bool(idle and self._heap) and not self._cpu.take()
                    for w in idle if not held_back else []:
                        job = self._next_job()
                        if job is None:
                            break
                        w.job = job
                        limit = job.timeout_s
                        w.deadline = time.monotonic() + (limit + KILL_GRACE_S if limit else 1e12)
                        starts.append((w, job))
                    pool = list(self._pool)
                for w, job in starts:
                    try:
                        w.conn.send((job.seq, job.fn, job.args))
                    except (OSError, ValueError):
                        w.job = None
                        self._requeue_or_fail(job, w)
                busy = [w for w in pool if w.job is not None]
                if not busy:
                    self._cpu.release()  # nothing in flight: a timing may take the machine
                now = time.monotonic()
                timeout = min((w.deadline - now for w in busy), default=HELD_BACK_POLL_S if held_back else 1.0)
                ready = wait([self._wake_r, *(w.conn for w in pool), *(w.process.sentinel for w in pool)],
                             max(0.0, min(timeout, 1.0)))  # fmt: skip
                if self._wake_r in ready:
                    with contextlib.suppress(OSError, BlockingIOError):
                        os.read(self._wake_r, 4096)
                for w in pool:
                    if w.conn in ready:
                        self._collect(w)
                    elif w.process.sentinel in ready and not w.process.is_alive():
                        self._died(w)
                now = time.monotonic()
                for w in pool:
                    if w.job is not None and now >= w.deadline:
                        self._timed_out(w)
        except BaseException as exc:  # pragma: no cover - fail every waiting future rather than hang
            with self._lock:
                jobs, self._heap = self._heap, []
            for job in jobs:
                self._finish(job, exc=RuntimeError(f"the compile pool failed: {exc}"))
        finally:
            self._cpu.release()

    def _collect(self, w: _Worker) -> None:
        try:
            _, (status, value), retire = w.conn.recv()
        except (EOFError, OSError):
            self._died(w)
            return
        job, w.job = w.job, None
        if job is not None:
            if status == "ok":
                self._finish(job, value)
            else:
                self._finish(job, exc=RuntimeError(value))
        if retire:
            w.retiring = True
            self._replace(w)

    def _died(self, w: _Worker) -> None:
        job, w.job = w.job, None
        w.process.join(2.0)  # its pipe may close a moment before it can be reaped
        code = w.process.exitcode
        if job is not None:
            why = f"signal {-code}" if code is not None and code < 0 else f"exit {code}"
            self.stats.crashes += 1
            req = job.args[0] if job.args else None
            said = _err_tail(w.err_path)
            oom = self.memory_limit_mb > 0 and any(word in said.lower() for word in _OOM_WORDS)
            if said.strip():
                with contextlib.suppress(OSError, ValueError):
                    os.write(2, said[-_ERR_TAIL:].encode("utf-8", errors="replace"))  # what it said, as before
            if isinstance(req, CompileRequest):
                out = out_of_memory_output(req, self.memory_limit_mb, why) if oom else crash_output(req, why)
                if oom:
                    self.stats.out_of_memory += 1
                self._finish(job, (out, cache_key(effective_request(req))), count=False)
            elif oom:
                self._finish(job, exc=MemoryError(f"a compile worker ran out of memory ({why})"))
            else:
                self._finish(job, exc=RuntimeError(f"a compile worker died ({why})"))
        self._replace(w)

    def _timed_out(self, w: _Worker) -> None:
        """Past its time limit: kill this worker (the compile cannot be stopped otherwise) and start another."""
        job, w.job = w.job, None
        self._kill(w)
        if job is not None:
            self.stats.timeouts += 1
            req = job.args[0] if job.args else None
            limit = job.timeout_s or 0.0
            if isinstance(req, CompileRequest):
                self._finish(job, (timeout_output(req, limit), cache_key(effective_request(req))), count=False)
            else:
                self._finish(job, exc=TimeoutError(f"did not finish within {limit:g} s"))
        self._replace(w)

    def _requeue_or_fail(self, job: _Job, w: _Worker) -> None:
        self._finish(job, exc=RuntimeError("a compile worker could not take the job"))
        self._replace(w)


STALE_PREFIXES = ("pch-", "ktt-pool-", "ktt-check-")  # <prefix><pid>-<random>: private dirs of one process


def remove_stale_dirs(base: str) -> None:
    """Remove the private directories (precompiled-header stores, captured stderr, ``ktt check``'s
    work directories) of processes that are gone: a tuner or a check killed with SIGKILL."""
    with contextlib.suppress(OSError):
        for e in os.scandir(base):
            prefix = next((p for p in STALE_PREFIXES if e.name.startswith(p)), None)
            if prefix is None:
                continue
            pid, sep, _ = e.name[len(prefix) :].partition("-")
            if not sep or not pid.isdigit() or len(pid) > 9:
                continue
            with contextlib.suppress(OSError):
                st = e.stat(follow_symlinks=False)
                if e.is_dir(follow_symlinks=False) and st.st_uid == os.getuid() and not pid_alive(int(pid)):
                    shutil.rmtree(e.path, ignore_errors=True)


def _resolve(fut: Future, value: Any = None, exc: BaseException | None = None) -> None:
    """Set a future's outcome unless it is done or was cancelled before it started."""
    with contextlib.suppress(Exception):  # InvalidStateError: cancelled or set meanwhile
        if fut.done():
            return
        if not fut.running() and not fut.set_running_or_notify_cancel():
            return
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(value)


def _as_duplicate(out: CompileOutput) -> CompileOutput:
    """A follower's copy of the leader's output: counted as a cache hit, not as NVRTC time."""
    return CompileOutput(out.ok, out.cubin, list(out.diagnostics), out.log, out.seconds, True, out.kernels,
                         timed_out=out.timed_out, pch=out.pch, deduplicated=True)  # fmt: skip
