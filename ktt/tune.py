"""``ktt tune``: search a kernel's tuning space on the GPU and report the fastest valid configuration.

Three things run at once. The search proposes configurations; a pool of processes
compiles them ahead of need (all CPU cores but one); one GPU worker process validates
and times them, one at a time, fed from a short queue so it never waits on the compiler.
Each finished configuration is appended to results.jsonl; progress goes to stdout as
JSON lines, about twice a second. After the search the best configuration is validated
and timed on every case of the problem, and summary.json is written.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import queue
import shutil
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ktt import procs
from ktt.candidates import CompileContext, KernelSource, geometry_problems, launch_plan, protocol_diagnostics
from ktt.compile_cache import CompileCache, compile_cached, default_cache_dir
from ktt.compile_pool import CompilePool, default_workers
from ktt.expressions import ExpressionError
from ktt.nvrtc import CompileOutput
from ktt.problem import ProblemError, load_problem
from ktt.problem.model import Problem, Shape, geometric_mean
from ktt.protocol import (
    EXIT_BAD_INPUT,
    EXIT_ENVIRONMENT,
    EXIT_NOTHING_VALID,
    EXIT_OK,
    CaseResult,
    ConfigResult,
    ErrorLine,
    FloorReport,
    LogLine,
    Progress,
    ReferenceTimeFile,
    TuneSummary,
    ValidationReport,
)
from ktt.results import ResultsWriter, write_json_atomic
from ktt.search import Search
from ktt.space import Key, SearchSpace
from ktt.spec import Config, TuningSpec, load_spec
from ktt.toolkit import query_device
from ktt.workdir import WorkDir
from ktt.worker_client import WorkerClient, WorkerDied

ENUMERATION_LIMIT = 200_000
PROGRESS_INTERVAL_S = 0.5
GPU_QUEUE = 2
CASE_RESERVE_S = 3.0
MAX_CONSECUTIVE_WORKER_FAILURES = 3

Emit = Callable[[Any], None]


@dataclass
class TuneOptions:
    problem_dir: Path
    kernel: Path
    spec: Path
    output: Path
    duration_s: float | None = None
    max_configs: int | None = None
    seed: int = 0
    device: int | None = None
    reference_time: Path | None = None
    strategy: str = "auto"
    config_timeout_s: float = 10.0
    cache_dir: Path | None = None
    compile_workers: int | None = None
    keep_work: bool = False
    timing: dict[str, Any] = field(default_factory=dict)
    # For tests and other front ends: a different worker program, and the arch to compile for
    # (given both, no GPU is queried in this process).
    worker_command: list[str] | None = None
    arch: str | None = None


class TuneError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


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


class Tuner:
    def __init__(self, opts: TuneOptions, emit: Emit) -> None:
        self.opts = opts
        self.emit = emit
        self.t0 = time.monotonic()
        self.results: list[ConfigResult] = []
        self.evaluated = 0  # configurations evaluated by the search (base shape)
        self.by_status: dict[str, int] = {}
        self.best: ConfigResult | None = None
        self.best_at: float | None = None
        self.gpu_ms_total = 0.0
        self.compile_s_total = 0.0
        self._last_progress = 0.0
        self._refine_checked = 0.0
        self.phase = "setup"
        self.worker: WorkerClient | None = None
        self.pool: CompilePool | None = None
        self.writer: ResultsWriter | None = None

    # -- helpers -------------------------------------------------------------------

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def log(self, message: str, level: str = "info") -> None:
        self.emit(LogLine(level=level, message=message))  # type: ignore[arg-type]

    def progress(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_progress < PROGRESS_INTERVAL_S:
            return
        self._last_progress = now
        self.emit(
            Progress(
                evaluated=self.evaluated,
                valid=self.by_status.get("ok", 0),
                space_size=self.space_total,
                by_status=dict(self.by_status),
                best_ms=self.best.time_ms if self.best else None,
                best_config=self.best.config if self.best else None,
                elapsed_s=round(self.elapsed(), 3),
                budget_s=self.duration,
                phase=self.phase,
            )
        )

    def record(self, result: ConfigResult) -> None:
        result.index = len(self.results)
        result.finished_at = time.time()
        result.elapsed_s = round(self.elapsed(), 4)
        assert self.writer is not None
        self.writer.append(result)
        self.results.append(result)
        if result.shape == self.problem.primary.name:  # case runs of the best are reported under cases
            self.evaluated += 1
            self.by_status[result.status] = self.by_status.get(result.status, 0) + 1
        if result.gpu_ms:
            self.gpu_ms_total += result.gpu_ms
        if (
            result.status == "ok"
            and result.confirmed
            and result.time_ms is not None
            and result.shape == self.problem.primary.name
            and (self.best is None or result.time_ms < (self.best.time_ms or math.inf))
        ):
            self.best = result
            self.best_at = self.elapsed()
        self.progress()

    # -- setup ---------------------------------------------------------------------

    def load(self) -> None:
        o = self.opts
        try:
            self.problem: Problem = load_problem(o.problem_dir)
        except ProblemError as exc:
            raise TuneError(str(exc), EXIT_BAD_INPUT) from None
        try:
            self.kernel = KernelSource.read(o.kernel)
        except OSError as exc:
            raise TuneError(f"{o.kernel}: cannot read the kernel source ({exc.strerror})", EXIT_BAD_INPUT) from None
        try:
            self.spec: TuningSpec = load_spec(o.spec, self.problem)
        except ProblemError as exc:
            raise TuneError(str(exc), EXIT_BAD_INPUT) from None
        spec, problem = self.spec, self.problem
        self.max_configs = o.max_configs or spec.max_configs
        if o.duration_s is not None:
            self.duration: float | None = o.duration_s if o.duration_s > 0 else None
        elif spec.duration_s is not None:
            self.duration = spec.duration_s
        else:
            self.duration = None if self.max_configs else problem.primary.duration_s
        self.space = SearchSpace(spec.tune_params, spec.restrictions, problem.primary.scalars)
        self.keys = self.space.enumerate(ENUMERATION_LIMIT)
        self.restricted = len(self.keys) if self.keys is not None else None
        self.space_total = self.restricted if self.restricted is not None else self.space.product_size()
        self.output = o.output
        self.output.mkdir(parents=True, exist_ok=True)
        self.work = WorkDir(self.output / "work")
        self.work.root.mkdir(parents=True, exist_ok=True)
        self.results_path = self.output / "results.jsonl"
        if self.results_path.exists():
            self.results_path.unlink()  # one run per output directory; the engine archives old ones
        self.writer = ResultsWriter(self.results_path)
        self.reference_file = o.reference_time or (problem.directory / "output" / "reference_time.json")
        self.cache_dir = str(o.cache_dir or default_cache_dir())

    def summary(self, ok: bool, message: str | None = None, **extra: Any) -> TuneSummary:
        wall = self.elapsed()
        return TuneSummary(
            ok=ok,
            problem=self.problem.name,
            kernel_file=str(self.opts.kernel),
            spec_file=str(self.opts.spec),
            space_size=self.space.product_size(),
            restricted_size=self.restricted,
            evaluated=self.evaluated,
            valid=self.by_status.get("ok", 0),
            by_status=dict(self.by_status),
            strategy=getattr(self, "strategy_name", self.opts.strategy),
            seed=self.opts.seed,
            best=self.best,
            confirmed_on_fresh_input=bool(self.best and self.best.confirmed),
            wall_s=round(wall, 3),
            gpu_busy_s=round(self.gpu_ms_total / 1e3, 3),
            compile_s_total=round(self.compile_s_total, 3),
            results_file=str(self.results_path),
            message=message,
            reference_file=str(self.reference_file),
            time_to_best_s=round(self.best_at, 3) if self.best_at is not None else None,
            worker_restarts=self.worker.restarts if self.worker else 0,
            **extra,
        )

    # -- references ----------------------------------------------------------------

    def _read_reference_times(self) -> ReferenceTimeFile | None:
        try:
            return ReferenceTimeFile.model_validate_json(self.reference_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            self.log(f"{self.reference_file}: unreadable ({exc}); the reference time is measured again", "warning")
            return None

    def _start_host_references(self) -> None:
        """cpu_c / python references: one subprocess per shape, in the background."""
        self.host_refs: dict[str, threading.Thread] = {}
        self.host_ref_results: dict[str, dict[str, Any]] = {}
        if self.problem.reference.type == "cuda":
            return
        for shape in self.problem.shapes:
            need_time = self.ref_times_known.get(shape.name) is None
            if all(self.work.has_reference(self.problem, shape.name, s) for s in (0, 1)) and not need_time:
                continue
            cmd = [
                sys.executable,
                "-m",
                "ktt.host_reference",
                "--problem",
                str(self.problem.directory),
                "--work",
                str(self.work.root),
                "--shape",
                shape.name,
                "--sets",
                "0,1",
                "--seed",
                str(self.opts.seed),
            ] + (["--time"] if need_time else [])

            def run(cmd: list[str] = cmd, name: str = shape.name) -> None:
                res = procs.run(cmd, timeout_s=1800.0)
                info: dict[str, Any] = {"ok": res.returncode == 0 and not res.timed_out, "stderr": res.stderr[-4000:]}
                if info["ok"]:
                    with contextlib.suppress(ValueError, IndexError):
                        info.update(json.loads(res.stdout.strip().splitlines()[-1]))
                self.host_ref_results[name] = info

            t = threading.Thread(target=run, daemon=True)
            t.start()
            self.host_refs[shape.name] = t

    def _wait_host_reference(self, shape: str) -> float | None:
        t = self.host_refs.get(shape)
        if t is None:
            return None
        t.join()
        info = self.host_ref_results.get(shape, {})
        if not info.get("ok"):
            raise TuneError(
                f"the {self.problem.reference.type} reference failed on shape {shape}:\n"
                f"{info.get('stderr', '').strip()[-2000:]}",
                EXIT_BAD_INPUT,
            )
        return info.get("ms")

    def _use_shape(self, shape: Shape) -> dict[str, Any]:
        assert self.worker is not None
        host_ms = self._wait_host_reference(shape.name)
        need_time = self.ref_times_known.get(shape.name) is None
        try:
            reply = self.worker.use_shape({"shape": shape.name, "sets": [0, 1], "time_reference": need_time})
        except WorkerDied as exc:
            raise TuneError(
                f"the GPU worker failed while preparing shape {shape.name}: {exc}", EXIT_ENVIRONMENT
            ) from None
        if not reply.get("ok"):
            raise TuneError(f"preparing shape {shape.name} failed: {reply.get('error')}", EXIT_BAD_INPUT)
        measured = reply.get("reference_ms") if self.problem.reference.type == "cuda" else host_ms
        if need_time and measured is not None:
            self.ref_times_known[shape.name] = float(measured)
            self.ref_measured[shape.name] = float(measured)
        return reply

    def _write_reference_times(self, device: str | None) -> None:
        if not self.ref_measured:
            return
        existing = self._read_reference_times()
        data = existing or ReferenceTimeFile(
            source="measured",
            reference_type=self.problem.reference.type,
            device=device,
            measured_at=dt.datetime.now(dt.UTC).isoformat(),
        )
        base = self.problem.primary.name
        if data.ms is None and base in self.ref_measured:
            data.ms = self.ref_measured[base]
        for name, ms in self.ref_measured.items():
            if name != base and name not in data.cases:
                data.cases[name] = ms
        write_json_atomic(self.reference_file, data)

    # -- the run -------------------------------------------------------------------

    def run(self) -> tuple[TuneSummary, int]:
        self.load()
        problem, spec = self.problem, self.spec
        hits = problem.forbid_hits(self.kernel.text)
        if hits:
            msg = "; ".join(str(h) for h in hits)
            return self.summary(False, f"forbidden by the problem's rules: {msg}"), EXIT_NOTHING_VALID
        if self.restricted == 0:
            return self.summary(False, "no configuration satisfies the restrictions"), EXIT_NOTHING_VALID

        ordinal = self.opts.device if self.opts.device is not None else problem.gpu_indices[0]
        if self.opts.arch and self.opts.worker_command:
            self.device_name, self.arch = "(not queried)", self.opts.arch
        else:
            info = query_device(ordinal)
            if info is None:
                raise TuneError(f"no CUDA device {ordinal} (no driver, or no such GPU)", EXIT_ENVIRONMENT)
            self.device_name, self.arch = info.name, info.arch
        self.ctx = CompileContext(problem, spec, self.kernel, self.work, self.arch)
        for shape in problem.shapes:
            self.ctx._inputs_hpp(shape)

        existing = self._read_reference_times()
        self.ref_times_known: dict[str, float | None] = {}
        if existing is not None:
            self.ref_times_known[problem.primary.name] = existing.ms
            self.ref_times_known.update(existing.cases)
        self.ref_source = existing.source if existing is not None else "measured"
        self.ref_measured: dict[str, float] = {}

        workers = self.opts.compile_workers if self.opts.compile_workers is not None else default_workers()
        self.pool = CompilePool(workers, self.cache_dir)
        self.search = Search(self.space, self.keys, self.opts.strategy, self.opts.seed)
        self.compiling: deque[Candidate] = deque()
        self.ready: deque[Candidate] = deque()
        self.proposed = 0
        self.lookahead = max(4, 2 * max(1, workers))
        # Compile ahead while the worker starts and the reference runs (the budget clock starts now).
        # Time kept back for validating and timing the best on every case, at most a quarter of the budget.
        if self.duration is not None:
            reserve = min(CASE_RESERVE_S * (len(problem.shapes) - 1) + 1.0, 0.25 * self.duration)
            self.deadline = self.t0 + self.duration - reserve
        else:
            self.deadline = math.inf

        self._start_host_references()
        log_dir = self.work.log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        timing = dict(self.opts.timing)
        self.worker = WorkerClient(
            {
                "problem_dir": str(problem.directory),
                "work_dir": str(self.work.root),
                "seed": self.opts.seed,
                "device": ordinal,
                "cache_dir": self.cache_dir,
                "timing": timing,
            },
            log_path=log_dir / "worker.log",
            command=self.opts.worker_command,
        )
        self.phase = "reference"
        self.progress(force=True)
        try:
            winfo = self.worker.ensure_started()
        except WorkerDied as exc:
            raise TuneError(f"the GPU worker failed to start: {exc}", EXIT_ENVIRONMENT) from None
        self.bandwidth = winfo.get("bandwidth_gbs")
        self.peak = winfo.get("peak_gflops")
        base_reply = self._use_shape(problem.primary)
        self.floor_ms = base_reply.get("floor_ms")
        self.floor_bytes = base_reply.get("floor_bytes")
        self.floor_flops = base_reply.get("floor_flops")

        # The search.
        self.phase = "search"
        self.search_start = time.monotonic()
        if self.duration is not None:
            self.deadline = max(time.monotonic() + 1.0, self.deadline)
        self._search_loop()
        self.search_s = time.monotonic() - self.search_start
        self.strategy_name = self.search.strategy_name()
        self.pool.shutdown()
        self.pool = None

        # Cases.
        cases = self._run_cases()
        self._write_reference_times(self.device_name)
        base_ref = self.ref_times_known.get(problem.primary.name)
        speedup = base_ref / self.best.time_ms if (self.best and base_ref and self.best.time_ms) else None
        score = None
        if cases and all(c.speedup for c in cases):
            score = geometric_mean([c.speedup for c in cases if c.speedup])
        floor = FloorReport(
            bytes=self.floor_bytes,
            flops=self.floor_flops,
            bandwidth_gbs=self.bandwidth,
            peak_gflops=self.peak,
            floor_ms=self.floor_ms,
            fraction_of_floor=(self.floor_ms / self.best.time_ms)
            if (self.floor_ms and self.best and self.best.time_ms)
            else None,
        )
        ok = self.best is not None
        message = None if ok else "no configuration passed validation"
        self.phase = "done"
        self.progress(force=True)
        summary = self.summary(
            ok,
            message,
            device=self.device_name,
            arch=self.arch,
            reference_ms=base_ref,
            reference_source=self.ref_source if base_ref is not None else None,
            speedup=speedup,
            cases=cases,
            score=score,
            floor=floor,
            search_s=round(self.search_s, 3),
            configs_per_s=round(self.evaluated / self.search_s, 3) if self.search_s > 0 else None,
        )
        return summary, EXIT_OK if ok else EXIT_NOTHING_VALID

    # -- search loop ---------------------------------------------------------------

    def _budget_open(self) -> bool:
        if time.monotonic() >= self.deadline:
            return False
        if self.max_configs is not None and self.proposed >= self.max_configs:
            return False
        return not self.search.exhausted()

    def _make_candidate(self, key: Key, shape: Shape) -> Candidate:
        config = self.space.config(key)
        cand = Candidate(key, config, shape)
        try:
            cand.launches, cand.scratch = launch_plan(self.spec, config, shape)
            cand.error = geometry_problems(cand.launches)
        except ExpressionError as exc:
            cand.error = f"launch geometry: {exc}"
        if cand.error is None:
            req = self.ctx.request(config, shape)
            if self.pool is not None:
                cand.future = self.pool.submit(req)
            else:  # after the search (the cases): compile here
                cand.future = Future()
                cand.future.set_result(compile_cached(req, self.cache_dir))
        return cand

    def _fill_compile_queue(self, search_open: bool) -> None:
        while search_open and len(self.compiling) + len(self.ready) < self.lookahead and self._budget_open():
            key = self.search.propose()
            if key is None:
                break
            self.proposed += 1
            self.compiling.append(self._make_candidate(key, self.problem.primary))

    def _finish_compile(self, cand: Candidate) -> bool:
        """Collect a finished compile; True when the candidate goes on to the GPU."""
        if cand.error is not None:
            self._record_failure(cand, "launch_failed", cand.error)
            return False
        assert cand.future is not None
        out, key = cand.future.result()
        cand.compile_out, cand.cache_key = out, key
        if not out.cached:
            self.compile_s_total += out.seconds
        if not out.ok:
            self._record_failure(cand, "compile_failed", out.first_error() or "compilation failed", out)
            return False
        missing = [launch["kernel"] for launch in cand.launches or [] if launch["kernel"] not in out.kernels]
        if missing:
            self._record_failure(
                cand,
                "compile_failed",
                f'no kernel {missing[0]!r} in the compiled source (declare it extern "C" __global__)',
                out,
            )
            return False
        path = CompileCache(self.cache_dir).cubin_path(key)
        if path is None:
            path = self.work.root / "cubins" / f"{key}.cubin"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(out.cubin or b"")
        cand.cubin_path = str(path)
        return True

    def _record_failure(self, cand: Candidate, status: str, error: str, out: CompileOutput | None = None) -> None:
        self.search.report(cand.key, None)
        self.record(
            ConfigResult(
                index=0,
                config=cand.config,
                status=status,
                error=error,  # type: ignore[arg-type]
                diagnostics=protocol_diagnostics(out) if out else [],
                compile_s=round(out.seconds, 4) if out else None,
                shape=cand.shape.name,
            )
        )

    def _evaluate(self, cand: Candidate, best_ms: float | None, floor_ms: float | None) -> ConfigResult:
        """One configuration on the GPU worker (called from the GPU thread)."""
        assert self.worker is not None
        out = cand.compile_out
        base = ConfigResult(
            index=0,
            config=cand.config,
            status="ok",
            shape=cand.shape.name,
            compile_s=round(out.seconds, 4) if out else None,
        )
        msg = {
            "config": cand.config,
            "cubin": cand.cubin_path,
            "launches": cand.launches,
            "scratch": cand.scratch,
            "best_ms": best_ms,
            "floor_ms": floor_ms,
            "confirm": True,
            "time": True,
            "race": True,
        }
        try:
            reply = self.worker.evaluate(msg, timeout_s=self.opts.config_timeout_s)
        except WorkerDied as exc:
            status = "timeout" if exc.timed_out else "runtime_error"
            detail = (
                f"killed after {self.opts.config_timeout_s:g} s without progress (hang?)" if exc.timed_out else str(exc)
            )
            return base.model_copy(update={"status": status, "error": detail, "flags": ["worker_restarted"]})
        status = reply.get("status", "runtime_error")
        flags = list(reply.get("flags", []))
        if reply.get("fatal"):
            flags.append("worker_restarted")
        validation = reply.get("validation")
        return base.model_copy(
            update={
                "status": status,
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

    def _search_loop(self) -> None:
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
                    result = self._evaluate(cand, gpu_best[0], self.floor_ms)
                    t = result.time_ms
                    if result.status == "ok" and result.confirmed and t is not None and (gpu_best[0] or math.inf) > t:
                        gpu_best[0] = t
                    if "worker_restarted" in result.flags:
                        failures[0] += 1
                        try:
                            assert self.worker is not None
                            self.worker.ensure_started()
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
                open_ = self._budget_open()
                if open_:
                    self._fill_compile_queue(True)
                # Finished compiles, in proposal order where possible.
                for cand in list(self.compiling):
                    if cand.error is not None or (cand.future is not None and cand.future.done()):
                        self.compiling.remove(cand)
                        if self._finish_compile(cand):
                            self.ready.append(cand)
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
                    inbox.put(self.ready.popleft())
                    in_gpu += 1
                # Results from the GPU.
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
                self.progress()
                if not self._budget_open() and not self.compiling and not self.ready and in_gpu == 0:
                    break
        finally:
            inbox.put(None)
            thread.join(timeout=self.opts.config_timeout_s + 30)

    def _maybe_refine(self) -> None:
        """auto: switch on local refinement once the measured rate says the space will not fit the budget."""
        if self.search.refine or self.search.mode != "auto" or self.duration is None:
            return
        now = time.monotonic()
        if now - self._refine_checked < 1.0 or self.evaluated < 8:
            return
        self._refine_checked = now
        rate = self.evaluated / max(1e-3, now - self.search_start)
        remaining = self.search.remaining()
        if remaining is not None and remaining / rate > (self.deadline - now):
            self.search.enable_refinement()
            self.log(f"the space will not fit the budget at {rate:.1f} configs/s; refining around the best")

    # -- cases ---------------------------------------------------------------------

    def _run_cases(self) -> list[CaseResult]:
        problem = self.problem
        base_ref = self.ref_times_known.get(problem.primary.name)
        if self.best is None:
            return [CaseResult(name=s.name, status="not_run") for s in problem.shapes]
        best = self.best
        out = [
            CaseResult(
                name=problem.primary.name,
                status="ok",
                time_ms=best.time_ms,
                reference_ms=base_ref,
                speedup=(base_ref / best.time_ms) if (base_ref and best.time_ms) else None,
            )
        ]
        if len(problem.shapes) == 1:
            return out
        self.phase = "cases"
        self.progress(force=True)
        key = self.space.key(best.config)
        for shape in problem.shapes[1:]:  # the search tuned the primary; the others run its best
            try:
                out.append(self._run_case(key, shape))
            except TuneError as exc:
                out.append(CaseResult(name=shape.name, status="runtime_error", error=str(exc)))
        return out

    def _run_case(self, key: Key, shape: Shape) -> CaseResult:
        cand = self._make_candidate(key, shape)
        if not self._finish_compile(cand):  # recorded as launch_failed or compile_failed
            failed = self.results[-1]
            return CaseResult(name=shape.name, status=failed.status, error=failed.error)
        reply = self._use_shape(shape)
        result = self._evaluate(cand, best_ms=None, floor_ms=reply.get("floor_ms"))  # best_ms None: always confirm
        self.record(result)
        if "worker_restarted" in result.flags and self.worker is not None:
            with contextlib.suppress(WorkerDied):
                self.worker.ensure_started()
        ref = self.ref_times_known.get(shape.name)
        ok = result.status == "ok" and result.confirmed
        return CaseResult(
            name=shape.name,
            status=result.status if not (result.status == "ok" and not ok) else "validation_failed",
            time_ms=result.time_ms,
            reference_ms=ref,
            speedup=(ref / result.time_ms) if (ok and ref and result.time_ms) else None,
            error=result.error,
        )

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
        if self.worker is not None:
            self.worker.close()
        if self.writer is not None:
            self.writer.close()
        if not self.opts.keep_work and hasattr(self, "work"):
            shutil.rmtree(self.work.root / "reference", ignore_errors=True)
            shutil.rmtree(self.work.root / "cubins", ignore_errors=True)


def tune(opts: TuneOptions, emit: Emit) -> int:
    """Run one tuning; emits protocol lines, writes results.jsonl and summary.json; returns the exit code."""
    tuner = Tuner(opts, emit)

    def on_term(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    old = None
    if threading.current_thread() is threading.main_thread():
        old = signal.signal(signal.SIGTERM, on_term)
    try:
        try:
            summary, code = tuner.run()
        except TuneError as exc:
            emit(ErrorLine(message=str(exc), exit_code=exc.exit_code))
            if hasattr(tuner, "space"):
                write_json_atomic(opts.output / "summary.json", tuner.summary(False, str(exc)))
            return exc.exit_code
        write_json_atomic(opts.output / "summary.json", summary)
        emit(summary)
        return code
    finally:
        tuner.close()
        if old is not None:
            signal.signal(signal.SIGTERM, old)


__all__ = ["TuneError", "TuneOptions", "tune"]
