"""One case's search: propose configurations, compile them ahead, validate and time them on the GPU.

A problem with ``cases:`` is tuned case by case, each with its own search of the tuning space
at that shape, its own budget and its own best (as the original tunes each case with its own
KTT run). The compile pool and the GPU worker are shared between the cases; everything that
belongs to a search (the proposals, the counts, the best, the deadline) lives here.

Three things run at once: the search proposes; the pool compiles ahead of need; one thread
feeds the GPU worker from a short queue, so the GPU never waits on the compiler.

What waits to compile, and what waits for the GPU, goes in the order the strategy wants:
most urgent first (``Strategy.urgency``), then proposal order. When the strategy changes
course (a new best, an annealing chain that moved) the waiting proposals are ranked again,
and those it no longer wants are withdrawn if their compile has not started (handed back
as unvisited, never counted); one whose compile started is measured after the rest.
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from ktt.candidates import CompileContext, geometry_problems, launch_plan, protocol_diagnostics
from ktt.compile_cache import CompileCache, compile_cached
from ktt.compile_pool import CompilePool
from ktt.expressions import ExpressionError
from ktt.launch_program import program_kernels
from ktt.nvrtc import CompileOutput
from ktt.problem.model import Problem, Shape
from ktt.protocol import EXIT_ENVIRONMENT, ConfigResult, Progress, ValidationReport
from ktt.search import Search
from ktt.space import Key, SearchSpace
from ktt.spec import Config, TuningSpec
from ktt.workdir import WorkDir
from ktt.worker_client import WorkerClient, WorkerDied

PROGRESS_INTERVAL_S = 0.5
GPU_QUEUE = 2
MAX_CONSECUTIVE_WORKER_FAILURES = 3
URGENCY_STEP = 1e9  # compile priority = proposal number - urgency * URGENCY_STEP (the pool runs the lowest first)
ABANDONED = -1  # the urgency of a proposal the strategy gave up on after its compile started


class TuneError(Exception):
    """The tuning cannot go on; ``str()`` is the one line the caller shows, ``exit_code`` its exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class SearchOptions(Protocol):
    """The tuning options a case's search reads (ktt.tune.TuneOptions has them)."""

    strategy: str
    seed: int
    config_timeout_s: float


class SearchHost(Protocol):
    """What a case's search needs from the tuner that owns it (ktt.tune.Tuner): the problem,
    the spec, the compile pool and the GPU worker, and where results and messages go. A
    Protocol, so this module does not import ktt.tune, which imports it."""

    opts: SearchOptions
    problem: Problem
    spec: TuningSpec
    ctx: CompileContext
    pool: CompilePool | None
    worker: WorkerClient | None
    work: WorkDir
    cache_dir: str
    workers: int
    compile_s_total: float

    def emit(self, obj: Any) -> None: ...
    def log(self, message: str, level: str = "info") -> None: ...
    def elapsed(self) -> float: ...
    def append_result(self, search: CaseSearch, result: ConfigResult) -> None: ...


@dataclass
class Candidate:
    key: Key
    config: Config
    shape: Shape
    launches: list[dict[str, Any]] | None = None
    scratch: list[dict[str, Any]] | None = None
    error: str | None = None
    future: Future | None = None
    compile_out: CompileOutput | None = None
    cache_key: str | None = None
    cubin_path: str | None = None
    seq: int = 0  # proposal number within the search
    urgency: int = 0  # the strategy's (``Strategy.urgency``), or ABANDONED

    @property
    def priority(self) -> float:
        """Lower first: the most urgent, then the oldest proposal."""
        return self.seq - self.urgency * URGENCY_STEP


def death_status(exc: WorkerDied, timeout_s: float) -> tuple[str, str]:
    """A configuration's status and error when the GPU worker died evaluating it: a hang cut off at
    ``timeout_s`` without progress, or a crash."""
    if exc.timed_out:
        return "timeout", f"killed after {timeout_s:g} s without progress (hang?)"
    return "runtime_error", str(exc)


@dataclass
class CaseSearch:
    """The search of one shape. ``run`` fills ``results`` and ``best``; the Tuner owns the rest."""

    tuner: SearchHost
    shape: Shape
    index: int  # in declared order, from 0
    space: SearchSpace
    keys: list[Key] | None
    budget_s: float | None  # None: no time limit (a count budget, or --duration 0)
    max_configs: int | None
    results: list[ConfigResult] = field(default_factory=list)
    evaluated: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    best: ConfigResult | None = None
    best_at: float | None = None  # seconds since the run started
    floor_ms: float | None = None
    search_s: float = 0.0
    strategy_name: str = ""

    def __post_init__(self) -> None:
        self.restricted = len(self.keys) if self.keys is not None else None
        self.space_total = self.restricted if self.restricted is not None else self.space.product_size()
        self._last_progress = 0.0
        self._refine_checked = 0.0
        self.search_start = time.monotonic()
        self.deadline = math.inf
        self.phase = "search"

    @property
    def name(self) -> str:
        return self.shape.name

    @property
    def valid(self) -> int:
        return self.by_status.get("ok", 0)

    # -- reporting -------------------------------------------------------------------------

    def progress(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_progress < PROGRESS_INTERVAL_S:
            return
        self._last_progress = now
        searching = self.phase == "search"
        self.tuner.emit(
            Progress(
                evaluated=self.evaluated,
                valid=self.valid,
                space_size=self.space_total,
                by_status=dict(self.by_status),
                best_ms=self.best.time_ms if self.best else None,
                best_config=self.best.config if self.best else None,
                elapsed_s=round(now - self.search_start if searching else self.tuner.elapsed(), 3),
                budget_s=self.budget_s if searching else None,
                phase=self.phase,
                case=self.name,
                case_index=self.index,
                cases_total=len(self.tuner.problem.shapes),
            )
        )

    def record(self, result: ConfigResult, counted: bool = True) -> None:
        """Append to the results files; ``counted`` False for the build probes' failures."""
        self.tuner.append_result(self, result)
        self.results.append(result)
        if counted:
            self.evaluated += 1
            self.by_status[result.status] = self.by_status.get(result.status, 0) + 1
        if (
            result.status == "ok"
            and result.confirmed
            and result.time_ms is not None
            and (self.best is None or result.time_ms < (self.best.time_ms or math.inf))
        ):
            self.best = result
            self.best_at = self.tuner.elapsed()
        self.progress()

    # -- candidates ------------------------------------------------------------------------

    def make_candidate(
        self, key: Key, compile_here: bool = False, seq: int | None = None, urgency: int = 0
    ) -> Candidate:
        """A proposal, its compile submitted; ``seq`` (the proposal number) ranks it, else submission order."""
        config = self.space.config(key)
        cand = Candidate(key, config, self.shape, seq=seq or 0, urgency=urgency)
        try:
            cand.launches, cand.scratch = launch_plan(self.tuner.spec, config, self.shape)
            cand.error = geometry_problems(cand.launches)
        except ExpressionError as exc:
            cand.error = f"launch geometry: {exc}"
        if cand.error is None:
            req = self.tuner.ctx.request(config, self.shape)
            if compile_here or self.tuner.pool is None:
                cand.future = Future()
                cand.future.set_result(compile_cached(req, self.tuner.cache_dir))
            else:
                cand.future = self.tuner.pool.submit(req, priority=cand.priority if seq is not None else None)
        return cand

    def finish_compile(self, cand: Candidate) -> str | None:
        """Collect a finished compile: None when the candidate can go to the GPU, else why not."""
        if cand.error is not None:
            return cand.error
        assert cand.future is not None
        out, key = cand.future.result()
        cand.compile_out, cand.cache_key = out, key
        if not out.cached:
            self.tuner.compile_s_total += out.seconds
        if not out.ok:
            return out.first_error() or "compilation failed"
        missing = [k for k in program_kernels(cand.launches or []) if k not in out.kernels]
        if missing:
            return f'no kernel {missing[0]!r} in the compiled source (declare it extern "C" __global__)'
        path = CompileCache(self.tuner.cache_dir).cubin_path(key)
        if path is None:
            path = self.tuner.work.root / "cubins" / f"{key}.cubin"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(out.cubin or b"")
        cand.cubin_path = str(path)
        return None

    def failure_result(self, cand: Candidate, error: str) -> ConfigResult:
        out = cand.compile_out
        status = "launch_failed" if cand.error is not None else "compile_failed"
        return ConfigResult(
            index=0,
            config=cand.config,
            status=status,  # type: ignore[arg-type]
            error=error,
            diagnostics=protocol_diagnostics(out) if out else [],
            compile_s=round(out.seconds, 4) if out else None,
            shape=self.name,
        )

    def _evaluate(self, cand: Candidate, best_ms: float | None) -> ConfigResult:
        """One configuration on the GPU worker (called from the GPU thread)."""
        worker = self.tuner.worker
        assert worker is not None
        timeout = self.tuner.opts.config_timeout_s
        out = cand.compile_out
        base = ConfigResult(
            index=0,
            config=cand.config,
            status="ok",
            shape=self.name,
            compile_s=round(out.seconds, 4) if out else None,
        )
        msg = {
            "config": cand.config,
            "cubin": cand.cubin_path,
            "launches": cand.launches,
            "scratch": cand.scratch,
            "best_ms": best_ms,
            "floor_ms": self.floor_ms,
            "confirm": True,
            "time": True,
            "race": True,
        }
        try:
            reply = worker.evaluate(msg, timeout_s=timeout)
        except WorkerDied as exc:
            status, detail = death_status(exc, timeout)
            return base.model_copy(update={"status": status, "error": detail, "flags": ["worker_restarted"]})
        flags = list(reply.get("flags", []))
        if reply.get("fatal"):
            flags.append("worker_restarted")
        validation = reply.get("validation")
        return base.model_copy(
            update={
                "status": reply.get("status", "runtime_error"),
                "time_ms": reply.get("time_ms"),
                "min_ms": reply.get("min_ms"),
                "max_ms": reply.get("max_ms"),
                "repeats": reply.get("repeats", 0),
                "launch_ms": reply.get("launch_ms"),
                "error": reply.get("error"),
                "flags": flags,
                "confirmed": bool(reply.get("confirmed")),
                "gpu_ms": reply.get("gpu_ms"),
                "validation": ValidationReport.model_validate(validation) if validation else None,
            }
        )

    # -- the search loop -------------------------------------------------------------------

    def _budget_open(self) -> bool:
        if time.monotonic() >= self.deadline:
            return False
        if self.max_configs is not None and self.proposed >= self.max_configs:
            return False
        return not self.search.exhausted()

    def run(self) -> None:
        """Search until the budget is spent or the space is exhausted."""
        t = self.tuner
        self.search = Search(self.space, self.keys, t.opts.strategy, t.opts.seed)
        self.compiling: deque[Candidate] = deque()
        self.ready: deque[Candidate] = deque()
        self.proposed = 0  # in flight or measured (withdrawn proposals are not counted)
        self.withdrawn = 0
        self._seq = 0
        self._course = self.search.course()
        self.lookahead = max(4, 2 * max(1, t.workers))
        self.phase = "search"
        self.search_start = time.monotonic()
        self.deadline = self.search_start + self.budget_s if self.budget_s is not None else math.inf
        self.progress(force=True)
        try:
            self._loop()
        finally:
            self.search_s = time.monotonic() - self.search_start
            self.strategy_name = self.search.strategy_name()
            self.phase = "done"
        if self.withdrawn:
            label = f" [case {self.name}]" if len(t.problem.shapes) > 1 else ""
            t.log(f"{self.withdrawn} proposals withdrawn before compiling (the strategy changed course){label}")

    def _fill_compile_queue(self) -> None:
        while len(self.compiling) + len(self.ready) < self.lookahead and self._budget_open():
            key = self.search.propose()
            if key is None:
                break
            self.proposed += 1
            self._seq += 1
            urgency = max(0, self.search.urgency(key) or 0)
            self.compiling.append(self.make_candidate(key, seq=self._seq, urgency=urgency))

    def _follow_course(self) -> None:
        """The strategy changed course: rank what waits again, withdraw what it no longer wants."""
        course = self.search.course()
        if course == self._course:
            return
        self._course = course
        pool = self.tuner.pool
        for cand in list(self.compiling):
            future = cand.future
            if future is None or future.done():
                continue
            urgency = self.search.urgency(cand.key)
            if urgency is None:
                if future.cancel():  # not started: nothing was spent on it
                    self.compiling.remove(cand)
                    self.proposed -= 1
                    self.withdrawn += 1
                    self.search.withdraw(cand.key)
                    continue
                urgency = ABANDONED
            if urgency != cand.urgency:
                cand.urgency = urgency
                if pool is not None:
                    pool.reprioritize(future, cand.priority)
        for cand in self.ready:
            urgency = self.search.urgency(cand.key)
            cand.urgency = ABANDONED if urgency is None else urgency

    def _next_ready(self) -> Candidate:
        """The compiled candidate the search wants measured first."""
        ready = self.ready
        i = 0 if len(ready) == 1 else min(range(len(ready)), key=lambda j: ready[j].priority)
        cand = ready[i]
        del ready[i]
        return cand

    def _loop(self) -> None:
        t = self.tuner
        inbox: queue.Queue[Candidate | None] = queue.Queue()
        outbox: queue.Queue[tuple[Candidate, ConfigResult] | BaseException] = queue.Queue()
        gpu_best: list[float | None] = [None]
        failures = [0]

        def gpu_thread() -> None:
            while True:
                cand = inbox.get()
                if cand is None:
                    return
                try:
                    result = self._evaluate(cand, gpu_best[0])
                    ms = result.time_ms
                    if result.status == "ok" and result.confirmed and ms is not None and (gpu_best[0] or math.inf) > ms:
                        gpu_best[0] = ms
                    if "worker_restarted" in result.flags:
                        failures[0] += 1
                        try:
                            assert t.worker is not None
                            t.worker.ensure_started()
                            failures[0] = 0
                        except WorkerDied as exc:
                            if failures[0] >= MAX_CONSECUTIVE_WORKER_FAILURES:
                                outbox.put((cand, result))
                                outbox.put(RuntimeError(f"the GPU worker cannot be restarted: {exc}"))
                                return
                    outbox.put((cand, result))
                except BaseException as exc:  # pragma: no cover - surfaced in the main thread
                    outbox.put(exc)
                    return

        thread = threading.Thread(target=gpu_thread, daemon=True, name="ktt-gpu")
        thread.start()
        in_gpu = 0
        try:
            while True:
                if self._budget_open():
                    self._fill_compile_queue()
                for cand in list(self.compiling):  # finished compiles, in proposal order where possible
                    if cand.error is not None or (cand.future is not None and cand.future.done()):
                        self.compiling.remove(cand)
                        why = self.finish_compile(cand)
                        if why is None:
                            self.ready.append(cand)
                        else:
                            self.search.report(cand.key, None)
                            self.record(self.failure_result(cand, why))
                if time.monotonic() >= self.deadline:
                    # Out of time: abandon what is compiling or queued; the configuration in flight finishes.
                    for cand in self.compiling:
                        if cand.future is not None:
                            cand.future.cancel()
                    self.compiling.clear()
                    self.ready.clear()
                    with contextlib.suppress(queue.Empty):
                        while True:
                            if inbox.get_nowait() is not None:
                                in_gpu -= 1
                while self.ready and in_gpu < GPU_QUEUE:
                    inbox.put(self._next_ready())
                    in_gpu += 1
                try:
                    item = outbox.get(timeout=0.005)
                except queue.Empty:
                    item = None
                while item is not None:
                    if isinstance(item, BaseException):
                        raise TuneError(str(item), EXIT_ENVIRONMENT)
                    cand, result = item
                    in_gpu -= 1
                    self.search.report(cand.key, result.time_ms if result.status == "ok" else None)
                    self.record(result)
                    try:
                        item = outbox.get_nowait()
                    except queue.Empty:
                        item = None
                self._maybe_refine()
                self._follow_course()
                self.progress()
                if not self._budget_open() and not self.compiling and not self.ready and in_gpu == 0:
                    break
        finally:
            inbox.put(None)
            thread.join(timeout=t.opts.config_timeout_s + 30)

    def _maybe_refine(self) -> None:
        """Tell the strategy the measured rate and the budget left, once a second (auto may change course)."""
        now = time.monotonic()
        if now - self._refine_checked < 1.0 or self.evaluated < 8:
            return
        self._refine_checked = now
        time_left = None if self.budget_s is None else self.deadline - now
        count_left = None if self.max_configs is None else self.max_configs - self.proposed
        message = self.search.pace(self.evaluated, now - self.search_start, time_left, count_left)
        if message:
            label = f" [case {self.name}]" if len(self.tuner.problem.shapes) > 1 else ""
            self.tuner.log(f"{message}{label}")
