"""``ktt tune``: tune a kernel on the GPU, case by case, and report each case's fastest valid configuration.

A problem's scored shapes are its ``cases:`` in declared order (the first is the primary),
or one implicit shape. As in the original, each case is built and tuned separately, with its
own search of the tuning space at that shape, its own reference time and its own budget:

1. build (several cases only): every case's inputs.hpp and a few probe configurations are
   compiled at once. A case where no probe compiles or fits the launch limits stops the run
   here, with the case named: a build fault costs seconds, not a tuning budget.
2. references: a cpu_c or python reference produces each case's outputs, one case at a time
   and with nothing else running (so a reference that is timed is timed alone).
3. each case in order: its reference time (read from reference_time.json, else measured and
   recorded there; a null there means no baseline: never timed, no speedup, no score), then its
   search, within ``--duration`` if given, else the spec's
   ``duration_s``, else the case's ``duration_s``, else the problem's ``tuning.duration_s``.
   A case that finds no valid configuration stops the run: later cases are not run.

The score is the geometric mean of the per-case speedups; null when a case has none. With one
shape the results are OUTDIR/results.jsonl and OUTDIR/summary.json, as ever. With several,
each case has OUTDIR/case_<name>/results.jsonl and summary.json; OUTDIR/results.jsonl holds
every row (each with ``shape``) and OUTDIR/summary.json the totals, the primary's best and
the score. Progress goes to stdout as JSON lines, about twice a second.
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ktt import gpu_lock, procs, sandbox
from ktt.candidates import CompileContext, KernelSource, target_arch
from ktt.case_search import Candidate, CaseSearch, TuneError
from ktt.compile_cache import default_cache_dir
from ktt.compile_pool import CompilePool, default_workers
from ktt.mismatch import unchanged_output_warning
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
    OutputStats,
    Progress,
    TuneSummary,
)
from ktt.reference_times import (
    NO_BASELINE,
    Measurement,
    ReferenceTime,
    ReferenceTimeError,
    ReferenceTimes,
    read_reference_times,
    record_measurements,
)
from ktt.results import ResultsWriter, write_json_atomic
from ktt.space import Key, SearchSpace
from ktt.spec import TuningSpec, load_spec
from ktt.target import sm_count_for, with_sm_count
from ktt.toolkit import query_device
from ktt.workdir import WorkDir
from ktt.worker_client import WorkerClient, WorkerDied

ENUMERATION_LIMIT = 200_000
PROBES = 3  # configurations compiled per case before any tuning (several cases only)
HOST_REFERENCE_TIMEOUT_S = 1800.0
CUDA_REFERENCE_METHOD = "CUDA events around the reference launch, median (as the candidates are timed)"

Emit = Callable[[Any], None]


@dataclass
class TuneOptions:
    problem_dir: Path
    kernel: Path
    spec: Path
    output: Path
    duration_s: float | None = None  # every case's budget; 0 = none
    max_configs: int | None = None
    seed: int = 0
    device: int | None = None
    reference_time: Path | None = None
    strategy: str = "auto"
    config_timeout_s: float = 10.0
    cache_dir: Path | None = None
    compile_workers: int | None = None
    keep_work: bool = False
    # The budgets are the problem's (a case's duration_s, else tuning.duration_s), whatever the
    # spec says: a front end that lets a model write tuning.yaml keeps the budget its user's.
    problem_budget: bool = False
    timing: dict[str, Any] = field(default_factory=dict)
    # For tests and other front ends: a different worker program, and the arch to compile for
    # (given both, no GPU is queried in this process).
    worker_command: list[str] | None = None
    arch: str | None = None


@dataclass
class CaseReference:
    """One case's denominator as this run uses it."""

    ms: float | None = None
    source: str | None = None
    method: str | None = None


class Tuner:
    def __init__(self, opts: TuneOptions, emit: Emit) -> None:
        self.opts = opts
        self.emit = emit
        self.t0 = time.monotonic()
        self.searches: list[CaseSearch] = []
        self.outcomes: dict[str, CaseResult] = {}
        self.references: dict[str, CaseReference] = {}
        self.warnings: list[str] = []
        self.reference_stats: list[OutputStats] = []
        self.compile_s_total = 0.0
        self.gpu_ms_total = 0.0
        self.worker: WorkerClient | None = None
        self.pool: CompilePool | None = None
        self.writers: dict[str, ResultsWriter] = {}
        self.device_name: str | None = None
        self.arch: str | None = None
        self.floor = FloorReport()
        self._index = 0

    # -- helpers -------------------------------------------------------------------------

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def log(self, message: str, level: str = "info") -> None:
        self.emit(LogLine(level=level, message=message))  # type: ignore[arg-type]

    @property
    def multi(self) -> bool:
        return len(self.problem.shapes) > 1

    def label(self, shape: Shape) -> str:
        """' [case NAME]' with several cases, '' with one: every message that is about one case says so."""
        return f" [case {shape.name}]" if self.multi else ""

    def stage(self, phase: str, search: CaseSearch | None = None) -> None:
        best = search.best if search else None
        self.emit(
            Progress(
                evaluated=search.evaluated if search else 0,
                valid=search.valid if search else 0,
                space_size=search.space_total if search else 0,
                by_status=dict(search.by_status) if search else {},
                best_ms=best.time_ms if best else None,
                best_config=best.config if best else None,
                elapsed_s=round(self.elapsed(), 3),
                phase=phase,
                case=search.name if search else None,
                case_index=search.index if search else 0,
                cases_total=len(self.problem.shapes),
            )
        )

    def case_dir(self, name: str) -> Path:
        """Where a case's results live: the output root with one shape, case_<name>/ with several."""
        return self.output / f"case_{name}" if self.multi else self.output

    def append_result(self, search: CaseSearch, result: ConfigResult) -> None:
        result.index = self._index
        self._index += 1
        result.finished_at = time.time()
        result.elapsed_s = round(self.elapsed(), 4)
        if result.gpu_ms:
            self.gpu_ms_total += result.gpu_ms
        for key in ("", search.name) if self.multi else ("",):
            self.writers[key].append(result)

    # -- setup ---------------------------------------------------------------------------

    def load(self) -> None:
        o = self.opts
        try:
            loaded = load_problem(o.problem_dir)
            ordinal = o.device if o.device is not None else loaded.gpu_indices[0]
            self.problem: Problem = with_sm_count(loaded, sm_count_for(None, ordinal, loaded.compute_capability))
        except ProblemError as exc:
            raise TuneError(str(exc), EXIT_BAD_INPUT) from None
        try:
            self.kernel = KernelSource.read(o.kernel)
        except OSError as exc:
            raise TuneError(f"{o.kernel}: cannot read the kernel source ({exc.strerror})", EXIT_BAD_INPUT) from None
        try:
            self.spec: TuningSpec = load_spec(o.spec, self.problem)
            chosen = self.spec.arch or self.problem.arch
            if chosen:  # what needs no GPU: tensor maps and clusters with a chosen target below sm_90
                target_arch(chosen, self.spec, self.problem)
        except ProblemError as exc:
            raise TuneError(str(exc), EXIT_BAD_INPUT) from None
        self.max_configs = o.max_configs or self.spec.max_configs
        self.reference_file = o.reference_time or (self.problem.directory / "output" / "reference_time.json")
        try:
            self.ref_times: ReferenceTimes = read_reference_times(self.reference_file, self.problem.primary.name)
        except ReferenceTimeError as exc:
            raise TuneError(str(exc), EXIT_BAD_INPUT) from None
        self.cache_dir = str(o.cache_dir or default_cache_dir())
        self.output = o.output
        self.output.mkdir(parents=True, exist_ok=True)
        self.work = WorkDir(self.output / "work")
        self.work.root.mkdir(parents=True, exist_ok=True)
        self.results_path = self.output / "results.jsonl"
        for name in ["", *([s.name for s in self.problem.shapes] if self.multi else [])]:
            path = (self.case_dir(name) if name else self.output) / "results.jsonl"
            if path.exists():
                path.unlink()  # one run per output directory; the engine archives old ones
            self.writers[name] = ResultsWriter(path)
        for shape in self.problem.shapes:
            space = SearchSpace(self.spec.tune_params, self.spec.restrictions, shape.scalars)
            budget, _ = self.case_budget(shape)
            self.searches.append(
                CaseSearch(
                    self,
                    shape,
                    len(self.searches),
                    space,
                    space.enumerate(ENUMERATION_LIMIT),
                    budget,
                    self.max_configs,
                )
            )

    def case_budget(self, shape: Shape) -> tuple[float | None, str]:
        """(seconds or None for no time limit, where it came from). As the original: the user's
        override first, then the case's own ``duration_s``, then the problem's ``tuning.duration_s``."""
        o = self.opts
        if o.duration_s is not None:
            return (o.duration_s if o.duration_s > 0 else None), "--duration"
        if not o.problem_budget:
            if self.spec.duration_s is not None:
                return self.spec.duration_s, "the spec's duration_s"
            if self.max_configs:
                return None, "none (a count budget)"
        return shape.duration_s, "problem.yaml"

    # -- build: every case before any tuning ----------------------------------------------

    def _probe_keys(self, search: CaseSearch) -> list[Key]:
        rng = random.Random(self.opts.seed)
        if search.keys is not None:
            rest = search.keys[1:]
            return search.keys[:1] + rng.sample(rest, min(PROBES - 1, len(rest)))
        picked: set[Key] = set()
        for _ in range(PROBES):
            key = search.space.sample(rng, picked)
            if key is not None:
                picked.add(key)
        return sorted(picked)

    def submit_probes(self) -> dict[str, list[Candidate]]:
        return {s.name: [s.make_candidate(k) for k in self._probe_keys(s)] for s in self.searches if s.restricted != 0}

    def check_builds(self, probes: dict[str, list[Candidate]]) -> CaseSearch | None:
        """The first case (in declared order) where no probe builds; its failures are recorded."""
        for search in self.searches:
            self.stage("build", search)
            if search.restricted == 0:
                note = f" ({search.space.note})" if search.space.note else ""
                self.outcomes[search.name] = CaseResult(
                    name=search.name,
                    status="build_failed",
                    error=f"no configuration satisfies the restrictions at this shape{note}",
                    budget_s=search.budget_s,
                    space_size=0,
                    results_file=str(self.case_dir(search.name) / "results.jsonl"),
                )
                return search
            failures: list[ConfigResult] = []
            for cand in probes[search.name]:
                why = search.finish_compile(cand)
                if why is None:
                    break
                failures.append(search.failure_result(cand, why))
            else:
                for result in failures:
                    search.record(result)
                first = failures[0] if failures else None
                self.outcomes[search.name] = CaseResult(
                    name=search.name,
                    status="build_failed",
                    error=f"none of {len(failures)} probe configurations builds; first: "
                    + (first.error or "?" if first else "?"),
                    budget_s=search.budget_s,
                    evaluated=search.evaluated,
                    by_status=dict(search.by_status),
                    space_size=search.restricted,
                    results_file=str(self.case_dir(search.name) / "results.jsonl"),
                )
                return search
        return None

    # -- references ----------------------------------------------------------------------

    def _host_references(self) -> None:
        """cpu_c / python: each case's outputs (and time, where the file lacks it), one case at a time."""
        problem = self.problem
        for search in self.searches:
            shape = search.shape
            known = self.ref_times.get(shape.name)
            self._no_baseline(shape, known)
            need_time = known.to_measure
            need_outputs = not all(self.work.has_reference(problem, shape.name, s) for s in problem.set_indices)
            if not (need_time or need_outputs):
                continue
            self.stage("reference", search)
            info = self._run_host_reference(shape, need_outputs, need_time)
            if info.get("warning"):
                self.warnings.append(f"{shape.name}: {info['warning']}" if self.multi else info["warning"])
                self.log(f"reference timing{self.label(shape)}: {info['warning']}", "warning")
            if need_time and info.get("ms") is not None:
                calls = _calls(info)
                self._measured(shape, float(info["ms"]), str(info.get("method") or "wall clock"), calls)

    def _run_host_reference(self, shape: Shape, outputs: bool, time_it: bool) -> dict[str, Any]:
        """ktt.host_reference for one shape in its own process: every input set's outputs (``outputs``)
        and/or its time; its JSON line, or TuneError (bad input) when it fails."""
        cmd = [
            sys.executable, "-m", "ktt.host_reference",
            "--problem", str(self.problem.directory), "--work", str(self.work.root),
            "--shape", shape.name, "--sets", self._sets_arg() if outputs else "", "--seed", str(self.opts.seed),
        ] + (["--time"] if time_it else [])  # fmt: skip
        res = procs.run(cmd, timeout_s=HOST_REFERENCE_TIMEOUT_S)
        info: dict[str, Any] = {}
        if res.returncode == 0 and not res.timed_out:
            with contextlib.suppress(ValueError, IndexError):
                info = json.loads(res.stdout.strip().splitlines()[-1])
        if not info:
            why = "timed out" if res.timed_out else res.stderr.strip()[-2000:] or f"exit {res.returncode}"
            what = f"the {self.problem.reference.type} reference failed{self.label(shape)}"
            raise TuneError(f"{what}:\n{why}", EXIT_BAD_INPUT)
        return info

    def _sets_arg(self) -> str:
        return ",".join(str(s) for s in self.problem.set_indices)

    def _measured(
        self, shape: Shape, ms: float, method: str, calls: tuple[int, float, float] | None = None
    ) -> None:
        """A fresh measurement: used for this run and recorded where reference_time.json has no value.
        ``calls``: (samples, fastest ms, slowest ms) of a wall-clock timing, for its provenance."""
        self.references[shape.name] = CaseReference(ms, "measured", method)
        samples, low, high = calls if calls is not None else (None, None, None)
        measurement = Measurement(ms, self.device_name, method, self.problem.reference.type, samples, low, high)
        try:
            self.ref_times = record_measurements(
                self.reference_file, self.problem.primary.name, {shape.name: measurement}
            )
        except ReferenceTimeError as exc:
            raise TuneError(str(exc), EXIT_BAD_INPUT) from None
        except OSError as exc:
            self.log(
                f"{self.reference_file}: not written ({exc.strerror or exc}); the time is used for this run", "warning"
            )
            return
        kept = self.ref_times.get(shape.name)
        if kept.ms is not None and kept.source != "measured":  # someone seeded it meanwhile: the seed wins
            self.references[shape.name] = CaseReference(kept.ms, kept.source, kept.method)
        counted = f", median of {calls[0]} calls, {calls[1]:.4g} to {calls[2]:.4g} ms" if calls else ""
        self.log(f"reference time{self.label(shape)}: {ms:.4g} ms ({method}{counted})")

    def _no_baseline(self, shape: Shape, known: ReferenceTime) -> None:
        """A null in reference_time.json: this shape is never timed and has no speedup (the original's rule)."""
        if known.no_baseline and shape.name not in self.references:
            self.references[shape.name] = CaseReference(None, NO_BASELINE)
            self.log(f"reference time{self.label(shape)}: no baseline (null in {self.reference_file.name}): "
                     "not timed; no speedup, and no score")  # fmt: skip

    def _shape_reply(self, shape: Shape, time_reference: bool) -> dict[str, Any]:
        """The worker brought to ``shape`` (every input set, its references); TuneError when it cannot be."""
        assert self.worker is not None
        try:
            reply = self.worker.use_shape(
                {"shape": shape.name, "sets": self.problem.set_indices, "time_reference": time_reference}
            )
        except WorkerDied as exc:
            raise TuneError(
                f"the GPU worker failed while preparing{self.label(shape) or ' the shape'}: {exc}", EXIT_ENVIRONMENT
            ) from None
        if not reply.get("ok"):
            raise TuneError(
                f"preparing{self.label(shape) or ' the shape'} failed: {reply.get('error')}", EXIT_BAD_INPUT
            )
        return reply

    def _use_shape(self, search: CaseSearch) -> None:
        """Bring the worker to this case's shape; a cuda reference is computed (and timed) there."""
        assert self.worker is not None
        shape = search.shape
        known = self.ref_times.get(shape.name)
        if known.ms is not None and shape.name not in self.references:
            self.references[shape.name] = CaseReference(known.ms, known.source, known.method)
        self._no_baseline(shape, known)
        cuda = self.problem.reference.type == "cuda"
        need_time = cuda and shape.name not in self.references
        self.stage("reference", search)
        reply = self._shape_reply(shape, need_time)
        if need_time and reply.get("reference_ms") is not None:
            self._measured(shape, float(reply["reference_ms"]), CUDA_REFERENCE_METHOD)
        search.floor_ms = reply.get("floor_ms")
        if search.index == 0 and reply.get("reference_stats"):
            self.reference_stats = [OutputStats.model_validate(x) for x in reply["reference_stats"]]
        for out in reply.get("unchanged_outputs") or []:
            warning = unchanged_output_warning(str(out.get("name")), str(out.get("access")))
            self.warnings.append(f"{shape.name}: {warning}" if self.multi else warning)
            self.log(f"validation{self.label(shape)}: {warning}", "warning")
        if search.index == 0:
            peak = reply.get("peak_gflops", self.peak)  # without one (an older worker): the FP32 peak
            self.floor = FloorReport(
                bytes=reply.get("floor_bytes"),
                flops=reply.get("floor_flops"),
                bandwidth_gbs=self.bandwidth,
                peak_gflops=peak,
                flops_dtype=reply.get("flops_dtype"),
                peak_from=reply.get("peak_from"),
                floor_ms=reply.get("floor_ms"),
            )
            if reply.get("floor_flops") and reply.get("flops_dtype"):
                against = f"{peak:,.0f} GFLOP/s" if peak else "none"
                self.log(
                    f"physical floor: flops at the {reply['flops_dtype']} peak, {against} ({reply.get('peak_from')})",
                    "info" if peak else "warning",
                )

    # -- the run -------------------------------------------------------------------------

    def _start_worker(self, ordinal: int) -> None:
        log_dir = self.work.log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self.worker = WorkerClient(
            {
                "problem_dir": str(self.problem.directory),
                "work_dir": str(self.work.root),
                "seed": self.opts.seed,
                "device": ordinal,
                "cache_dir": self.cache_dir,
                "timing": dict(self.opts.timing),
            },
            log_path=log_dir / "worker.log",
            command=self.opts.worker_command,
        )
        self.stage("setup")
        try:
            winfo = self.worker.ensure_started()
        except WorkerDied as exc:
            raise TuneError(f"the GPU worker failed to start: {exc}", EXIT_ENVIRONMENT) from None
        self.bandwidth = winfo.get("bandwidth_gbs")
        self.peak = winfo.get("peak_gflops")

    def run(self) -> tuple[TuneSummary, int]:
        self.load()
        problem = self.problem
        hits = problem.forbid_hits(self.kernel.text)
        if hits:
            msg = "; ".join(str(h) for h in hits)
            return self.summary(f"forbidden by the problem's rules: {msg}"), EXIT_NOTHING_VALID
        if not self.multi and self.searches[0].restricted == 0:
            space = self.searches[0].space
            note = f" ({space.note})" if space.note else ""
            return self.summary(f"no configuration satisfies the restrictions{note}"), EXIT_NOTHING_VALID

        ordinal = self.opts.device if self.opts.device is not None else problem.gpu_indices[0]
        uuid = None
        if self.opts.arch and self.opts.worker_command:
            self.device_name, device_arch = "(not queried)", self.opts.arch
        else:
            info = query_device(ordinal)
            if info is None:
                raise TuneError(f"no CUDA device {ordinal} (no driver, or no such GPU)", EXIT_ENVIRONMENT)
            self.device_name, device_arch, uuid = info.name, info.arch, info.uuid
        try:
            self.arch = target_arch(device_arch, self.spec, problem)  # sm_90 -> sm_90a unless chosen
        except ProblemError as exc:
            raise TuneError(str(exc), EXIT_BAD_INPUT) from None
        if self.spec.arch or problem.arch:
            why = "tuning.yaml arch" if self.spec.arch else "problem.yaml gpu.arch"
        else:
            why = "the GPU's arch-specific variant" if self.arch != device_arch else "the GPU's arch"
        self.log(f"compiling for {self.arch} on a {device_arch} GPU ({why})")
        self.ctx = CompileContext(problem, self.spec, self.kernel, self.work, self.arch)
        for shape in problem.shapes:
            self.ctx._inputs_hpp(shape)
        self.workers = self.opts.compile_workers if self.opts.compile_workers is not None else default_workers()
        self.pool = CompilePool(self.workers, self.cache_dir)
        warming = self.pool.warm(self.arch)  # NVRTC loads in every compile process while the GPU worker starts

        probes = self.submit_probes() if self.multi else {}
        # One GPU job per device across processes (ktt.gpu_lock); compiles go on while we wait.
        self.gpu_lock = gpu_lock.acquire(ordinal, f"ktt tune of problem {problem.name}", uuid=uuid, on_wait=self.log)
        if not sandbox.landlock_abi():
            self.log(sandbox.status(), "warning")  # docs/SECURITY.md: what degrades without Landlock
        self._start_worker(ordinal)
        wait(warming, timeout=60)  # before any reference is timed
        if self.multi:
            failed = self.check_builds(probes)
            if failed is not None:
                error = self.outcomes[failed.name].error
                write_json_atomic(self.case_dir(failed.name) / "summary.json", self.case_summary(failed))
                self.log(f"case {failed.name} does not build: {error}", "error")
                return self.summary(f"case {failed.name} does not build: {error}"), EXIT_NOTHING_VALID
            # No probe may still be compiling while a reference is timed.
            wait([c.future for cands in probes.values() for c in cands if c.future is not None])
        if problem.reference.type != "cuda":
            self._host_references()

        for search in self.searches:
            budget, source = self.case_budget(search.shape)
            if self.multi:
                what = f"{budget:g} s" if budget is not None else "no time limit"
                self.log(f"case {search.name} ({search.index + 1}/{len(self.searches)}): budget {what} ({source})")
            self._use_shape(search)
            search.run()
            self.outcomes[search.name] = self._case_result(search)
            if self.multi:
                write_json_atomic(self.case_dir(search.name) / "summary.json", self.case_summary(search))
            if search.best is None:
                if self.multi and search is not self.searches[-1]:
                    self.log(f"case {search.name} has no valid configuration: the later cases are not run", "error")
                break
        self.log(self.pool.stats.line())
        self.pool.shutdown()
        self.pool = None
        summary = self.summary()
        return summary, EXIT_OK if summary.ok else EXIT_NOTHING_VALID

    # -- results -------------------------------------------------------------------------

    def _case_result(self, search: CaseSearch) -> CaseResult:
        ref = self.references.get(search.name, CaseReference())
        best = search.best
        speedup = ref.ms / best.time_ms if (best and best.time_ms and ref.ms) else None
        return CaseResult(
            name=search.name,
            status="ok" if best else "no_valid",
            time_ms=best.time_ms if best else None,
            reference_ms=ref.ms,
            reference_source=ref.source if ref.ms is not None or ref.source == NO_BASELINE else None,
            reference_method=ref.method if ref.ms is not None else None,
            speedup=speedup,
            error=None if best else "no configuration passed validation",
            config=best.config if best else None,
            budget_s=search.budget_s,
            evaluated=search.evaluated,
            valid=search.valid,
            by_status=dict(search.by_status),
            space_size=search.restricted,
            search_s=round(search.search_s, 3),
            results_file=str(self.case_dir(search.name) / "results.jsonl"),
        )

    def cases(self) -> list[CaseResult]:
        return [
            self.outcomes.get(s.name) or CaseResult(name=s.name, status="not_run", budget_s=s.budget_s)
            for s in self.searches
        ]

    def _message(self, cases: list[CaseResult]) -> str | None:
        if all(c.status == "ok" for c in cases):
            return None
        if not self.multi:
            return "no configuration passed validation"
        parts = [f"case {c.name}: {c.error or c.status}" for c in cases if c.status not in ("ok", "not_run")]
        skipped = [c.name for c in cases if c.status == "not_run"]
        if skipped:
            parts.append(f"not run: {', '.join(skipped)}")
        return "; ".join(parts)

    def _base(self, ok: bool, message: str | None) -> dict[str, Any]:
        searches = self.searches
        by_status: dict[str, int] = {}
        for s in searches:
            for k, v in s.by_status.items():
                by_status[k] = by_status.get(k, 0) + v
        evaluated = sum(s.evaluated for s in searches)
        search_s = sum(s.search_s for s in searches)
        primary = searches[0] if searches else None
        return {
            "ok": ok,
            "problem": self.problem.name,
            "kernel_file": str(self.opts.kernel),
            "spec_file": str(self.opts.spec),
            "device": self.device_name,
            "arch": self.arch,
            "space_size": primary.space.product_size() if primary else 0,
            "restricted_size": primary.restricted if primary else None,
            "evaluated": evaluated,
            "valid": sum(s.valid for s in searches),
            "by_status": by_status,
            "strategy": (primary.strategy_name if primary else "") or self.opts.strategy,
            "seed": self.opts.seed,
            "wall_s": round(self.elapsed(), 3),
            "gpu_busy_s": round(self.gpu_ms_total / 1e3, 3),
            "compile_s_total": round(self.compile_s_total, 3),
            "results_file": str(self.results_path),
            "message": message,
            "reference_file": str(self.reference_file),
            "search_s": round(search_s, 3),
            "configs_per_s": round(evaluated / search_s, 3) if search_s > 0 else None,
            "worker_restarts": self.worker.restarts if self.worker else 0,
            "warnings": list(self.warnings),
            "reference_stats": list(self.reference_stats),
        }

    def summary(self, message: str | None = None) -> TuneSummary:
        """The whole run: ``message`` given, it did not complete (forbidden, a build failure, an error)."""
        cases = self.cases()
        ok = message is None and bool(cases) and all(c.status == "ok" for c in cases)
        primary = self.searches[0] if self.searches else None
        first = cases[0] if cases else CaseResult(name="", status="not_run")
        best = primary.best if primary else None
        speedups = [c.speedup for c in cases]
        score = geometric_mean([s for s in speedups if s]) if cases and all(speedups) else None
        floor = self.floor.model_copy(
            update={
                "fraction_of_floor": (self.floor.floor_ms / best.time_ms)
                if (self.floor.floor_ms and best and best.time_ms)
                else None
            }
        )
        return TuneSummary(
            **self._base(ok, message if message is not None else self._message(cases)),
            best=best,
            confirmed_on_fresh_input=bool(best and best.confirmed),
            reference_ms=first.reference_ms,
            reference_source=first.reference_source,
            reference_method=first.reference_method,
            speedup=first.speedup,
            cases=cases,
            score=score,
            floor=floor,
            time_to_best_s=round(primary.best_at, 3) if primary and primary.best_at is not None else None,
        )

    def case_summary(self, search: CaseSearch) -> TuneSummary:
        """OUTDIR/case_<name>/summary.json: one case as if it were the whole problem."""
        case = self.outcomes[search.name]
        base = self._base(case.status == "ok", case.error)
        base.update(
            space_size=search.space.product_size(),
            restricted_size=search.restricted,
            evaluated=search.evaluated,
            valid=search.valid,
            by_status=dict(search.by_status),
            strategy=search.strategy_name or self.opts.strategy,
            results_file=case.results_file or str(self.case_dir(search.name) / "results.jsonl"),
            search_s=case.search_s,
            configs_per_s=round(search.evaluated / search.search_s, 3) if search.search_s > 0 else None,
        )
        return TuneSummary(
            **base,
            best=search.best,
            confirmed_on_fresh_input=bool(search.best and search.best.confirmed),
            reference_ms=case.reference_ms,
            reference_source=case.reference_source,
            reference_method=case.reference_method,
            speedup=case.speedup,
            cases=[case],
            score=case.speedup,
            time_to_best_s=round(search.best_at, 3) if search.best_at is not None else None,
        )

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
        if self.worker is not None:
            self.worker.close()
        if getattr(self, "gpu_lock", None) is not None:
            self.gpu_lock.release()  # after the worker: the GPU is free only once it has exited
        for writer in self.writers.values():
            writer.close()
        if not self.opts.keep_work and hasattr(self, "work"):
            shutil.rmtree(self.work.root / "reference", ignore_errors=True)
            shutil.rmtree(self.work.root / "cubins", ignore_errors=True)


def tune(opts: TuneOptions, emit: Emit) -> int:
    """Run one tuning; emits protocol lines, writes the results files and summary.json; returns the exit code."""
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
            if hasattr(tuner, "output") and hasattr(tuner, "problem"):
                write_json_atomic(opts.output / "summary.json", tuner.summary(str(exc)))
            return exc.exit_code
        tuner.stage("done", tuner.searches[0] if tuner.searches else None)
        write_json_atomic(opts.output / "summary.json", summary)
        emit(summary)
        return code
    finally:
        tuner.close()
        if old is not None:
            signal.signal(signal.SIGTERM, old)


__all__ = ["TuneError", "TuneOptions", "tune"]


def _calls(info: dict[str, Any]) -> tuple[int, float, float] | None:
    """(samples, fastest ms, slowest ms) from ktt.host_reference's line, where it gives them."""
    try:
        samples, low, high = int(info["samples"]), float(info["min_ms"]), float(info["max_ms"])
    except (KeyError, TypeError, ValueError):
        return None
    return (samples, low, high) if samples >= 1 and 0 < low <= high else None
