"""The GPU worker: the one process that owns the CUDA context during a tuning run.

    python -m ktt.worker        (started by ktt.worker_client; JSON lines on stdin/stdout)

Commands: ``init`` (device, helper kernels, L2 flush buffer, copy bandwidth), ``shape``
(buffers, inputs, reference outputs of one shape - computing a cuda reference here),
``eval`` (validate, race-check, time, confirm one configuration), ``quit``. Before each
stage the worker sends a ``beat`` so the client's watchdog knows it is alive. A sticky
CUDA error (trap, illegal address) is reported with ``fatal: true`` and the worker exits:
its context is unusable, and the client starts a fresh one.

File descriptor 1 is pointed at stderr at start (device ``printf`` and library chatter
cannot corrupt the protocol); replies go to a private copy of the original stdout.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from ktt.buffers import ShapeBuffers, canary_slots
from ktt.capped_read import MAX_SOURCE_BYTES, read_text_capped
from ktt.compile_cache import compile_cached
from ktt.device import CudaError, Gpu, KernelParams
from ktt.gpu_checks import SOURCE as CHECKS_SOURCE
from ktt.gpu_checks import GpuChecks
from ktt.mismatch import WINDOW, first_mismatches, same_bits
from ktt.nvrtc import CompileRequest, define_pairs
from ktt.peaks import flops_peak, peak_gflops
from ktt.problem import load_problem
from ktt.problem.files import INTEGER_DTYPES
from ktt.problem.model import Buffer, Problem, Shape
from ktt.procs import exit_when_parent_dies
from ktt.sequence import LaunchRejected, PassLimit, Sequence, prepare
from ktt.timing import FLOOR_MARGIN, L2Flush, TimingSettings, floor_ms, measure, measure_bandwidth
from ktt.toolkit import cuda_include_dirs
from ktt.workdir import WorkDir, local_headers


class Channel:
    def __init__(self) -> None:
        fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self.out = os.fdopen(fd, "w", buffering=1)

    def send(self, msg: dict[str, Any]) -> None:
        self.out.write(json.dumps(msg) + "\n")
        self.out.flush()


def _explain(kind: str, label: str, r: Any, n: int | None = None, poisoned: bool = False) -> str:
    """One line for a failed check. ``poisoned``: the output started poisoned, not with its init data."""
    if kind == "oob":
        return f"out-of-bounds write: {r.bad} guard word(s) changed ({label})"
    if kind == "mutated":
        return f"input {label} was modified by the kernel ({r.bad} word(s) changed, first at word {r.first})"
    if kind == "drift":
        return f"{label}: results differ bitwise between two runs on the same input"
    left = "still poisoned" if poisoned else "still hold their init data"
    if r.unwritten and r.unwritten == r.bad:
        return f"{label}: {r.unwritten} of {n} element(s) never written ({left})"
    if r.nonfinite and r.nonfinite + r.unwritten == r.bad:
        return f"{label}: {r.nonfinite} NaN/Inf element(s)" + (f", {r.unwritten} never written" if r.unwritten else "")
    unwritten = f" ({r.unwritten} of them never written: {left})" if r.unwritten else ""
    return f"{label}: {r.bad} of {n} element(s) differ from the reference beyond the tolerance{unwritten}"


class Session:
    def __init__(self, req: dict[str, Any], chan: Channel) -> None:
        self.chan = chan
        self.problem: Problem = load_problem(req["problem_dir"])
        self.work = WorkDir(Path(req["work_dir"]))
        self.seed = int(req.get("seed", 0))
        self.cache_dir = req.get("cache_dir")
        self.settings = TimingSettings(**req.get("timing", {}))
        self.settings.flush_l2 = self.settings.flush_l2 and self.problem.flush_l2
        self.gpu = Gpu(int(req.get("device", 0)))
        props = self.gpu.props
        out, _ = compile_cached(
            CompileRequest(
                CHECKS_SOURCE,
                str(self.work.root / "ktt_checks.cu"),
                "ktt_checks.cu",
                props.arch,
                (),
                cuda_include_dirs(),
            ),
            self.cache_dir,
        )
        if not out.ok or out.cubin is None:
            raise RuntimeError(f"helper kernels failed to compile: {out.log}")
        self.checks = GpuChecks(self.gpu, out.cubin)
        self.flush = L2Flush(self.gpu) if self.settings.flush_l2 else None
        self.sink = self.gpu.alloc(64)
        bw_file = self.work.root / "bandwidth.json"
        try:
            self.bandwidth = float(json.loads(bw_file.read_text())["gbs"])
        except (OSError, ValueError, KeyError):
            self.bandwidth = measure_bandwidth(self.gpu)
            bw_file.parent.mkdir(parents=True, exist_ok=True)
            bw_file.write_text(json.dumps({"gbs": self.bandwidth}))
        self.peak = peak_gflops(props.arch, props.sm_count, props.clock_khz)
        self.bufs: ShapeBuffers | None = None
        self.spin_up()

    def spin_up(self, ms: float = 60.0) -> None:
        """Run a busy kernel for a moment so the first measurements see working clocks."""
        start = time.perf_counter()
        while (time.perf_counter() - start) * 1e3 < ms:
            self.checks.busy(self.sink, 20000)
            self.gpu.sync()

    def info(self) -> dict[str, Any]:
        p = self.gpu.props
        return {
            "ok": True,
            "device": p.name,
            "arch": p.arch,
            "bandwidth_gbs": self.bandwidth,
            "peak_gflops": self.peak,
            "l2_bytes": p.l2_bytes,
            "sm_count": p.sm_count,
        }

    # -- shapes and references ---------------------------------------------------------

    def use_shape(self, req: dict[str, Any]) -> dict[str, Any]:
        shape = self.problem.shape(req["shape"])
        sets = tuple(int(s) for s in req.get("sets", [0, 1]))
        if self.bufs is not None:
            self.bufs.free()
            self.bufs = None
        self.work.prepare_shape(self.problem, shape)
        self.bufs = ShapeBuffers.create(self.gpu, self.problem, shape, sets, self.seed, self.work.root)
        reference_ms = None
        for s in sets:
            if not self.work.has_reference(self.problem, shape.name, s):
                if self.problem.reference.type != "cuda":
                    raise RuntimeError(f"reference outputs for shape {shape.name} set {s} are missing")
                self._cuda_reference(shape, s)
            for b in self.problem.validated:
                self.bufs.set_reference(s, b.name, np.load(self.work.reference_file(shape.name, s, b.name)))
        if req.get("time_reference") and self.problem.reference.type == "cuda":
            reference_ms = self._cuda_reference(shape, 0, time_it=True)
        self.gpu.sync()
        return {"ok": True, "reference_ms": reference_ms, "unchanged_outputs": self._unchanged(sets),
                "reference_stats": self._reference_stats(shape, sets[0]), **self.floor(shape)}  # fmt: skip

    def _reference_stats(self, shape: Shape, set_index: int) -> list[dict[str, Any]]:
        """Min, max and mean |x| of each validated reference output (the prompts state the tolerance against them)."""
        out = []
        for b in self.problem.validated:
            try:
                values = np.load(self.work.reference_file(shape.name, set_index, b.name)).astype(np.float64).ravel()
            except (OSError, ValueError):
                continue
            finite = values[np.isfinite(values)]
            stats: dict[str, Any] = {"buffer": b.name, "count": int(values.size)}
            stats["nonfinite"] = int(values.size - finite.size)
            if finite.size:
                stats.update(min=float(finite.min()), max=float(finite.max()), mean_abs=float(np.abs(finite).mean()))
            out.append(stats)
        return out

    def _unchanged(self, sets: tuple[int, ...]) -> list[dict[str, str]]:
        """The validated outputs (not poisoned) whose reference result equals their init data in
        every set: there validation cannot catch a kernel that writes nothing."""
        assert self.bufs is not None
        found = []
        for b in self.problem.validated:
            if not b.writable or self.problem.poisoned(b):
                continue
            pairs = [(self.bufs.ref_host.get((s, b.name)), self.bufs.host.get((s, b.name))) for s in sets]
            if pairs and all(r is not None and i is not None and same_bits(r, i) for r, i in pairs):
                found.append({"name": b.name, "access": b.access})
        return found

    def floor(self, shape: Shape) -> dict[str, Any]:
        """The shape's physical floor: bytes at the measured bandwidth, flops at the peak of the
        problem's flops_dtype on this device (ktt.peaks)."""
        nbytes, flops = self.problem.floor(shape)
        p = self.gpu.props
        peak = flops_peak(self.problem.floor_flops_dtype, p.name, p.arch, p.sm_count, p.clock_khz)
        return {
            "floor_ms": floor_ms(nbytes, flops, self.bandwidth, peak.gflops),
            "floor_bytes": nbytes,
            "floor_flops": flops,
            "peak_gflops": peak.gflops,
            "flops_dtype": peak.dtype,
            "peak_from": peak.source,
        }

    def _cuda_reference(self, shape: Shape, set_index: int, time_it: bool = False) -> float | None:
        """Compile and run the cuda reference into its own buffers; store the outputs as .npy."""
        assert self.bufs is not None
        problem, gpu = self.problem, self.gpu
        ref = problem.reference
        req = CompileRequest(
            source=read_text_capped(ref.file, MAX_SOURCE_BYTES),  # a regular file, capped
            program_path=str(self.work.program_path(shape.name, ref.file.name)),
            display_name=ref.file.name,
            arch=gpu.props.arch,
            defines=define_pairs(problem.defines(shape)),
            include_dirs=(str(self.work.shape_dir(shape.name)), str(problem.directory), *cuda_include_dirs()),
            header_texts=(
                ("inputs.hpp", (self.work.shape_dir(shape.name) / "inputs.hpp").read_text()),
                *local_headers(problem),
            ),
        )
        out, _ = compile_cached(req, self.cache_dir)
        if not out.ok or out.cubin is None:
            raise RuntimeError(f"the cuda reference does not compile: {out.first_error() or out.log}")
        module = gpu.load_module(out.cubin)
        func = gpu.function(module, ref.function or "")
        block = ref.block.as_tuple()
        grid = shape.grid.as_tuple()
        if problem.global_size_type == "opencl":
            grid = tuple((g + b - 1) // b for g, b in zip(grid, block, strict=True))  # type: ignore[assignment]
        own: dict[str, int] = {}
        values: list[tuple[str, Any]] = []
        self.bufs.restore(set_index)
        for a in problem.boundary:
            if isinstance(a, Buffer):
                if a.writable:
                    # The reference's outputs start as the candidates' do: with their init data
                    # (zeros for a poisoned write buffer).
                    nbytes = shape.bytes_of(a)
                    own[a.name] = gpu.alloc(nbytes)
                    if problem.poisoned(a):
                        gpu.memset32(own[a.name], 0, (nbytes + 3) // 4)
                    else:
                        gpu.d2d(own[a.name], self.bufs.pristine[(set_index, a.name)], nbytes)
                    values.append(("ptr", own[a.name]))
                else:
                    values.append(("ptr", self.bufs.argument(a.name)))
            else:
                value = shape.scalars[a.name]
                values.append((a.dtype, int(value) if a.dtype in INTEGER_DTYPES else float(value)))
        params = KernelParams(values)
        try:
            gpu.launch(func, grid, block, 0, None, params)  # type: ignore[arg-type]
            gpu.sync()
            d = self.work.reference_dir(shape.name, set_index)
            d.mkdir(parents=True, exist_ok=True)
            for b in problem.validated:
                host = np.empty(shape.sizes[b.name], b.numpy_dtype)
                gpu.d2h(host, own[b.name])
                gpu.sync()
                np.save(d / f"{b.name}.npy", host)
            result = None
            if time_it:
                t = measure(
                    gpu,
                    lambda _ev: gpu.launch(func, grid, block, 0, None, params),
                    self.settings,  # type: ignore[arg-type]
                    flush=self.flush,
                )
                result = t.median_ms
        finally:
            for p in own.values():
                gpu.free(p)
            gpu.unload_module(module)
        return result

    # -- one configuration -------------------------------------------------------------

    def _check(
        self, set_index: int, compare: bool = True, drift: bool = False, seq: Sequence | None = None
    ) -> tuple[str | None, dict | None, bool]:
        """Run the queued checks; returns (failure reason, validation report, drifted)."""
        assert self.bufs is not None
        self.checks.begin()
        items = self.bufs.queue_checks(self.checks, set_index, compare)
        if seq is not None:
            for g, _ in seq.scratch:
                items += [(slot, "oob", label) for slot, label in canary_slots(self.checks, g)]
        if drift:
            items += self.bufs.queue_drift(self.checks)
        self.checks.collect()
        report: dict[str, Any] | None = None
        reason = None
        drifted = False
        sizes = self.bufs.shape.sizes
        for slot, kind, label in items:
            r = self.checks.result(slot)
            if kind == "compare":
                rep = {
                    "buffer": label,
                    "max_abs_error": r.max_abs_error,
                    "first_bad_index": r.first,
                    "bad_count": r.bad,
                    "checked": sizes[label],
                    "input_set": set_index,
                }
                if r.bad:
                    rep["samples"] = self._mismatches(set_index, label, r.first)
                if report is None or (r.bad and not report.get("bad_count")):
                    report = rep
            if not r.bad:
                continue
            if kind == "drift":
                drifted = True
                continue
            if reason is None:
                poisoned = kind == "compare" and self.problem.poisoned(self._buffer(label))
                reason = _explain(kind, label, r, sizes.get(label), poisoned)
        if report is not None:
            report["reason"] = reason
        elif reason is not None:
            report = {"reason": reason}
        return reason, report, drifted

    def _buffer(self, name: str) -> Buffer:
        return next(b for b in self.problem.buffers if b.name == name)

    def _mismatches(self, set_index: int, name: str, first: int | None) -> list[dict]:
        """The first few bad elements, read back from a bounded window at the first bad index."""
        assert self.bufs is not None
        b = self._buffer(name)
        expected = self.bufs.ref_host.get((set_index, name))
        n = self.bufs.shape.sizes[name]
        start = min(max(0, first or 0), max(0, n - 1))
        count = min(WINDOW, n - start)
        if expected is None or count <= 0:
            return []
        got = np.empty(count, b.numpy_dtype)
        self.gpu.sync()
        self.gpu.d2h(got, self.bufs.argument(name) + start * got.itemsize)
        self.gpu.sync()
        found = first_mismatches(
            expected[start : start + count], got, start, self.problem.tolerance, rtol=self.problem.rtol
        )
        return [m.model_dump(mode="json") for m in found]

    def _run_once(self, seq: Sequence, set_index: int) -> None:
        assert self.bufs is not None
        self.bufs.restore(set_index)
        seq.reset_scratch()
        seq.run(None)
        self.gpu.sync()

    def evaluate(self, req: dict[str, Any]) -> dict[str, Any]:
        assert self.bufs is not None
        gpu = self.gpu
        result: dict[str, Any] = {"type": "result", "status": "ok", "flags": [], "confirmed": False}
        cubin = Path(req["cubin"]).read_bytes() if "cubin" in req else bytes.fromhex(req["cubin_hex"])
        span_start, span_end = gpu.events("span", 2)
        gpu.record(span_start)
        try:
            seq = prepare(gpu, self.bufs, cubin, req["launches"], req.get("scratch", []))
        except LaunchRejected as exc:
            return {**result, "status": "launch_failed", "error": str(exc)}
        try:
            return self._evaluate(seq, req, result, span_start, span_end)
        except PassLimit as exc:
            # An until loop that never finished: the context is fine (every pass was synchronised).
            return {**result, "status": "runtime_error", "error": str(exc), "flags": ["max_passes"]}
        finally:
            with contextlib.suppress(CudaError):
                seq.free()

    def _evaluate(self, seq: Sequence, req: dict, result: dict, span_start: Any, span_end: Any) -> dict[str, Any]:
        gpu, bufs = self.gpu, self.bufs
        assert bufs is not None
        beat = lambda: self.chan.send({"type": "beat"})  # noqa: E731
        # 1. validation on input set 0
        self._run_once(seq, 0)
        reason, report, _ = self._check(0, seq=seq)
        if reason:
            return {**result, "status": "validation_failed", "error": reason, "validation": report}
        bufs.save_outputs()
        beat()
        # 2. the same input again: a moving result is a race
        if req.get("race", True):
            self._run_once(seq, 0)
            reason, report2, drifted = self._check(0, drift=True, seq=seq)
            if reason:
                msg = f"race: the second run on the same input fails ({reason})"
                return {
                    **result,
                    "status": "validation_failed",
                    "error": msg,
                    "validation": {**(report2 or {}), "reason": msg},
                }
            if drifted:
                result["flags"].append("nondeterministic")
            beat()
        result["validation"] = report
        # 3. timing
        if req.get("time", True):
            bufs.restore(0)
            seq.reset_scratch()
            # Writable buffers start every repetition with their init data (outside the timed span),
            # so a kernel that accumulates into its output is still right after the timed runs.
            restore = bufs.restores_between_runs
            timing = measure(
                gpu,
                seq.run,
                self.settings,
                flush=self.flush,
                best_ms=req.get("best_ms"),
                launch_events=seq.launch_events(),
                before_rep=(lambda: bufs.restore_writable(0)) if restore else None,
                beat=beat,
                warmed=bool(req.get("race", True)),  # the race re-run just ran it
            )
            result.update(
                time_ms=timing.median_ms,
                min_ms=timing.min_ms,
                max_ms=timing.max_ms,
                repeats=len(timing.samples),
                launch_ms=timing.launch_ms,
            )
            if timing.early_stop:
                result["flags"].append("early_stop")
            reason, _, _ = self._check(0, seq=seq)
            if reason:
                msg = f"after the timed runs: {reason}"
                return {**result, "status": "validation_failed", "error": msg, "validation": {"reason": msg}}
            floor = req.get("floor_ms")
            if floor and timing.median_ms < FLOOR_MARGIN * floor:
                result["flags"].append("below_floor")
                return {
                    **result,
                    "status": "suspect",
                    "error": f"{timing.median_ms:.4g} ms is below the physical floor of {floor:.4g} ms",
                }
            beat()
        # 4. the fresh input sets (validation.input_sets - 1 of them) before this configuration may become the best
        best = req.get("best_ms")
        t = result.get("time_ms")
        fresh = [s for s in bufs.sets if s != 0]
        if req.get("confirm", True) and fresh and (best is None or (t is not None and t < best)):
            for s in fresh:
                bufs.reupload_reference(s)
                self._run_once(seq, s)
                reason, report, _ = self._check(s, seq=seq)
                if reason:
                    which = "a fresh input set" if len(fresh) == 1 else f"fresh input set {s} of {len(fresh)}"
                    msg = f"wrong on {which}: {reason}"
                    return {
                        **result,
                        "status": "validation_failed",
                        "error": msg,
                        "validation": {**(report or {}), "reason": msg},
                    }
            result["confirmed"] = True
        gpu.record(span_end)
        gpu.sync()
        result["gpu_ms"] = gpu.elapsed_ms(span_start, span_end)
        return result


def _status_for(exc: CudaError) -> str:
    return "launch_failed" if exc.launch_limit else "runtime_error"


def main() -> int:
    exit_when_parent_dies()
    chan = Channel()
    session: Session | None = None
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        cmd = req.get("cmd")
        try:
            if cmd == "init":
                session = Session(req, chan)
                chan.send({"type": "reply", **session.info()})
            elif cmd == "shape":
                assert session is not None
                chan.send({"type": "reply", **session.use_shape(req)})
            elif cmd == "eval":
                assert session is not None
                chan.send(session.evaluate(req))
            elif cmd == "quit":
                chan.send({"type": "reply", "ok": True})
                return 0
            else:
                chan.send({"type": "reply", "ok": False, "error": f"unknown command {cmd!r}"})
        except CudaError as exc:
            # Only a launch that does not fit the device leaves the context trustworthy.
            fatal = exc.sticky or not exc.launch_limit or cmd != "eval"
            chan.send(
                {
                    "type": "result" if cmd == "eval" else "reply",
                    "ok": False,
                    "status": _status_for(exc),
                    "error": str(exc),
                    "fatal": fatal,
                    "cuda_error": exc.name,
                }
            )
            if fatal:
                return 3
        except Exception as exc:
            chan.send(
                {
                    "type": "result" if cmd == "eval" else "reply",
                    "ok": False,
                    "status": "runtime_error",
                    "error": f"{type(exc).__name__}: {exc}",
                    "fatal": True,
                    "traceback": traceback.format_exc(limit=8),
                }
            )
            return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
