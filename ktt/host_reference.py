"""Run a cpu_c or python reference in its own process, store its outputs as .npy files, and time it.

    python -m ktt.host_reference --problem DIR --work WORK --shape NAME --sets 0,1 --seed S [--time]

cpu_c: ref_cpu.c is built into a shared library with the shape's scalars as -D macros and
called through ctypes with the buffers in args order.

python: ref.py is imported here (as the original imports it: module name ``ref``). The
reference is ``reference.function``, else the first public callable defined in ref.py in
name order (``prepare_input`` excepted). With ``prepare_input(scalars, buffers)`` that runs
first, untimed, and the reference gets what it returned; without it the reference gets
``(scalars, buffers)``. Every call gets fresh copies of the inputs. A reference with a
``target`` parameter is called once per validated buffer, with that buffer's name, and
returns that buffer (the original's runner asks for one target at a time); any other
reference is called once and returns a dict by buffer name, a tuple or list in args order,
or, with one validated buffer, one array. torch tensors and cupy arrays come back to the host.
A bf16 or half buffer reaches the reference as a float32 array of its values (numpy has no
bfloat16) and what it returns for one is rounded to that dtype (ktt.half_types); cpu_c gets the
16-bit patterns, as inputs.hpp's uint16_t.

Timing (``--time``, input set 0): a reference that computes on the GPU (it returns torch or
cupy device arrays, or imports torch and has ``prepare_input``) is timed with CUDA events
around the reference call alone, ``prepare_input`` untimed: 5 warm-up calls, then 5 single
timed calls, the minimum (the original's torch timer does the same). Without
``prepare_input`` or without a CUDA device it falls back to wall clock, with a warning.
cpu_c and numpy references are timed by wall clock around the call, after the call that
produced the outputs: at least ``MIN_SAMPLES`` calls (more, up to ``MAX_REPEATS``, while they add
up to less than ``QUICK_S``), each on fresh copies of the inputs; the median is the time, and the
fastest, the slowest and the count are reported with it. For a reference slower than ``QUICK_S``,
a spread ((slowest - fastest) / median) over ``SPREAD_WARN`` is a warning that names the reference
and the figures. While the calls are
timed no CPU-heavy job of ktt runs on the machine (``ktt.cpu_quiet``: compile pools hold back,
other references wait); building a reference and computing its outputs count as such jobs
themselves. Prints one JSON line: {"shape", "ms", "method", "warning", "samples", "min_ms",
"max_ms"}.
"""

from __future__ import annotations

import argparse
import ctypes
import inspect
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ktt import cpu_quiet, half_types
from ktt.capped_read import (
    MAX_SOURCE_BYTES,
    ReadRefused,
    describe_read_error,
    module_from_file,
    read_text_capped,
)
from ktt.host_compiler import build_shared_library
from ktt.inputs import make_inputs
from ktt.problem import load_problem
from ktt.problem.model import Problem, Shape
from ktt.procs import exit_when_parent_dies
from ktt.reference_times import SPREAD_WARN  # (slowest - fastest) / median above it: a warning
from ktt.workdir import WorkDir

QUICK_S = 0.25  # wall-clock samples are added while they sum to less than this (a quick reference)
MIN_SAMPLES = 3  # every wall-clock reference, however slow, is timed over at least this many calls
MAX_REPEATS = 5
EVENT_WARMUP = 5
EVENT_REPEATS = 5
MODULE_NAME = "ref"

WALL_CLOCK = "wall clock around the call"
CUDA_EVENTS = "CUDA events around the reference call ({fw}), min of {n} after {w} warm-up calls"


class ReferenceFailure(Exception):
    """The reference cannot be run as written; ``str()`` says why, naming ref.py."""


@dataclass(frozen=True)
class Timing:
    ms: float  # the median of the samples
    method: str
    warning: str | None = None
    samples: int = 1
    min_ms: float | None = None
    max_ms: float | None = None


def spread_warning(name: str, samples: int, min_ms: float, max_ms: float, median_ms: float) -> str | None:
    """The warning for a reference slower than QUICK_S whose samples spread over SPREAD_WARN of their
    median (None otherwise: a quick reference's calls scatter by microseconds; its median of more
    calls is the figure)."""
    spread = (max_ms - min_ms) / median_ms if median_ms > 0 else 0.0
    if spread <= SPREAD_WARN or median_ms < QUICK_S * 1e3:
        return None
    return (
        f"{name}: its {samples} timed calls took {min_ms:.4g} to {max_ms:.4g} ms, a {spread:.0%} spread "
        f"(over {SPREAD_WARN:.0%}): other work on the machine or a varying clock; the speedups use their "
        f"median, {median_ms:.4g} ms"
    )


def _reference_source(problem: Problem) -> str:
    """The reference's text: a regular file within MAX_SOURCE_BYTES (ktt.capped_read), else one line."""
    ref = problem.reference
    try:
        return read_text_capped(ref.file, MAX_SOURCE_BYTES)
    except (OSError, UnicodeDecodeError) as exc:
        raise ReferenceFailure(f"{ref.file}: {describe_read_error(exc)}") from None


def _cpu_function(problem: Problem, shape: Shape, work: WorkDir) -> Any:
    ref = problem.reference
    lib_path = build_shared_library(
        _reference_source(problem),
        work.host_dir,
        cxx=False,
        defines=dict(shape.scalars),
        include_dirs=[work.shape_dir(shape.name), problem.directory],
        source_name=ref.file.name,
    )
    lib = ctypes.CDLL(str(lib_path))
    fn = getattr(lib, ref.function or "")
    fn.argtypes = [ctypes.c_void_p] * len(problem.buffers)
    fn.restype = None
    return fn


def _host_array(value: Any) -> np.ndarray:
    """numpy from numpy, a torch tensor (any device; bf16 and half ones as float32) or a cupy array."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = half_types.host_values(value.detach().cpu()).numpy()
    elif hasattr(value, "get") and type(value).__module__.split(".")[0] == "cupy":
        value = value.get()
    return np.asarray(value)


def _framework_of(value: Any) -> str | None:
    """'torch' or 'cupy' when a returned value lives in that framework (device or not)."""
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
    for v in items:
        root = type(v).__module__.split(".")[0]
        if root in ("torch", "cupy"):
            return root
    return None


class PythonReference:
    """ref.py, loaded once; calls it the way the original's runner does."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        ref = problem.reference
        sys.path.insert(0, str(problem.directory))
        module = module_from_file(MODULE_NAME, ref.file)  # ref.py is read capped, a regular file only
        sys.modules[MODULE_NAME] = module
        assert module.__spec__ is not None and module.__spec__.loader is not None
        try:
            module.__spec__.loader.exec_module(module)
        except ReadRefused as exc:
            raise ReferenceFailure(f"{ref.file}: {describe_read_error(exc)}") from None
        self.module = module
        self.fn = self._function(ref.function)
        prepare = getattr(module, "prepare_input", None)
        self.prepare: Callable[..., Any] | None = prepare if callable(prepare) else None
        self.targeted = _takes_target(self.fn)

    def _function(self, name: str | None) -> Callable[..., Any]:
        path = self.problem.reference.file
        if name:
            fn = getattr(self.module, name, None)
            if not callable(fn):
                raise ReferenceFailure(f"{path}: no function {name!r} (reference.function in problem.yaml)")
            return fn
        for attr in sorted(dir(self.module)):
            if attr.startswith("_") or attr == "prepare_input":
                continue
            obj = getattr(self.module, attr)
            if callable(obj) and getattr(obj, "__module__", None) == MODULE_NAME:
                return obj
        raise ReferenceFailure(f"{path}: defines no public function to use as the reference (set reference.function)")

    @property
    def uses_torch(self) -> bool:
        return any(getattr(v, "__name__", "") == "torch" for v in vars(self.module).values())

    def arguments(self, shape: Shape, inputs: dict[str, np.ndarray]) -> tuple[Any, ...]:
        """Fresh copies of the inputs, through prepare_input when there is one (untimed)."""
        scalars = dict(shape.scalars)
        fresh = {k: v.copy() for k, v in inputs.items()}
        for b in self.problem.buffers:  # numpy has no bfloat16: 16-bit floats arrive as their float32 values
            if b.dtype in half_types.HALF_DTYPES:
                fresh[b.name] = half_types.decode(fresh[b.name], b.dtype)
        if self.prepare is not None:
            return (self.prepare(scalars, fresh),)
        return (scalars, fresh)

    def call(self, args: tuple[Any, ...], target: str | None = None) -> Any:
        return self.fn(*args, target=target) if target is not None else self.fn(*args)

    def outputs(self, shape: Shape, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], Any]:
        """Every validated buffer's reference values, and the first raw result (to see its framework)."""
        validated = self.problem.validated
        if self.targeted:
            out: dict[str, np.ndarray] = {}
            first = None
            for b in validated:
                result = self.call(self.arguments(shape, inputs), b.name)
                first = result if first is None else first
                if isinstance(result, dict):
                    result = result.get(b.name)
                out[b.name] = self._array(shape, b.name, result)
            return out, first
        result = self.call(self.arguments(shape, inputs))
        return self._unpack(shape, result), result

    def _unpack(self, shape: Shape, result: Any) -> dict[str, np.ndarray]:
        names = [b.name for b in self.problem.validated]
        path = self.problem.reference.file
        if isinstance(result, dict):
            missing = [n for n in names if n not in result]
            if missing:
                raise ReferenceFailure(f"{path}: the reference returned a dict without {missing[0]!r}")
            values = [result[n] for n in names]
        elif isinstance(result, (list, tuple)) and len(names) > 1:
            values = list(result)
        else:
            values = [result]
        if len(values) != len(names):
            raise ReferenceFailure(
                f"{path}: the reference returned {len(values)} array(s) for {len(names)} validated buffers "
                f"({', '.join(names)}): return a dict by buffer name, a tuple in args order, "
                "or accept a target argument and return the named buffer"
            )
        return {n: self._array(shape, n, v) for n, v in zip(names, values, strict=True)}

    def _array(self, shape: Shape, name: str, value: Any) -> np.ndarray:
        if value is None:
            raise ReferenceFailure(f"{self.problem.reference.file}: the reference returned nothing for {name!r}")
        buffer = next(b for b in self.problem.validated if b.name == name)
        if buffer.dtype in half_types.HALF_DTYPES:  # values, rounded to the 16-bit float
            arr = half_types.encode(_host_array(value), buffer.dtype)
        else:
            arr = _host_array(value).astype(buffer.numpy_dtype, copy=False).ravel()
        if arr.size != shape.sizes[name]:
            raise ReferenceFailure(
                f"{self.problem.reference.file}: the reference returned {arr.size} values for {name}, "
                f"expected {shape.sizes[name]}"
            )
        return arr

    def timed_target(self) -> str | None:
        """The target a timing call asks for: none when it has a default (the original calls it bare)."""
        if not self.targeted:
            return None
        param = inspect.signature(self.fn).parameters["target"]
        return None if param.default is not inspect.Parameter.empty else self.problem.validated[0].name


def _takes_target(fn: Callable[..., Any]) -> bool:
    try:
        return "target" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _wall_clock_samples(
    call: Callable[[Any], Any], prepare: Callable[[], Any], sync: Callable[[], None] | None = None
) -> list[float]:
    """Seconds of MIN_SAMPLES calls, and more while a quick reference's calls add up to under QUICK_S.
    ``prepare()`` makes each call's arguments (fresh copies of the inputs) before its clock starts."""
    samples: list[float] = []
    while len(samples) < MIN_SAMPLES or (sum(samples) < QUICK_S and len(samples) < MAX_REPEATS):
        args = prepare()
        start = time.perf_counter()
        call(args)
        if sync is not None:
            sync()
        samples.append(time.perf_counter() - start)
    return samples


def wall_clock_timing(
    name: str,
    call: Callable[[Any], Any],
    prepare: Callable[[], Any],
    sync: Callable[[], None] | None = None,
    warning: str | None = None,
) -> Timing:
    """The median of wall-clock samples taken while no CPU-heavy job of ktt runs (ktt.cpu_quiet),
    with the fastest, the slowest and the count; warnings: ``warning``, a wide spread, a machine that
    did not become quiet."""
    with cpu_quiet.quiet() as was_quiet:
        samples = [s * 1e3 for s in _wall_clock_samples(call, prepare, sync)]
    median, low, high = statistics.median(samples), min(samples), max(samples)
    notes = [warning] if warning else []
    if not was_quiet:
        notes.append(f"{name}: timed while other CPU work may have run (the machine was not quiet within "
                     f"{cpu_quiet.QUIET_WAIT_S:g} s)")  # fmt: skip
    spread = spread_warning(name, len(samples), low, high, median)
    if spread is not None:
        notes.append(spread)
    return Timing(median, WALL_CLOCK, "; ".join(notes) or None, len(samples), low, high)


def _event_timing(framework: str, call: Callable[[], Any]) -> float:
    """Minimum of single calls bracketed by CUDA events of the reference's own framework (ms)."""
    if framework == "torch":
        import torch

        sync = torch.cuda.synchronize

        def event() -> Any:
            return torch.cuda.Event(enable_timing=True)

        def elapsed(a: Any, b: Any) -> float:
            return float(a.elapsed_time(b))
    else:
        import cupy

        sync = cupy.cuda.Device().synchronize

        def event() -> Any:
            return cupy.cuda.Event()

        def elapsed(a: Any, b: Any) -> float:
            return float(cupy.cuda.get_elapsed_time(a, b))

    sync()
    for _ in range(EVENT_WARMUP):
        call()
    sync()
    times = []
    for _ in range(EVENT_REPEATS):
        start, end = event(), event()
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(elapsed(start, end))
    return min(times)


def _cuda_available(framework: str) -> bool:
    try:
        if framework == "torch":
            import torch

            return bool(torch.cuda.is_available())
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # a framework without a working CUDA is simply "no device"
        return False


def time_python(ref: PythonReference, shape: Shape, inputs: dict[str, np.ndarray], first_result: Any) -> Timing:
    """How long the reference's own computation takes, by the best method its framework allows.
    Every wall-clock call gets fresh copies of the inputs, made before its clock starts."""
    framework = _framework_of(first_result) or ("torch" if ref.uses_torch and ref.prepare is not None else None)
    target = ref.timed_target()
    name = ref.problem.reference.file.name

    def call(args: tuple[Any, ...]) -> Any:
        return ref.call(args, target)

    def fresh() -> tuple[Any, ...]:
        return ref.arguments(shape, inputs)

    if framework is None:
        return wall_clock_timing(name, call, fresh)
    if not _cuda_available(framework):
        return wall_clock_timing(name, call, fresh, warning=f"{name}: {framework} has no CUDA device here; the "
                                 "reference ran on the CPU, timed by wall clock")  # fmt: skip
    if ref.prepare is None:  # the copies to the device are part of the call: arguments made inside it
        return wall_clock_timing(
            name, lambda _: ref.call(fresh(), target), lambda: None, _sync_of(framework),
            warning=f"{name}: a {framework} reference without prepare_input is timed by wall clock, host-to-device "
            "copies included; define prepare_input for CUDA-event timing",
        )  # fmt: skip
    args = ref.arguments(shape, inputs)
    ms = _event_timing(framework, lambda: ref.call(args, target))
    return Timing(ms, CUDA_EVENTS.format(fw=framework, n=EVENT_REPEATS, w=EVENT_WARMUP))


def _sync_of(framework: str) -> Callable[[], None]:
    if framework == "torch":
        import torch

        return torch.cuda.synchronize
    import cupy

    return cupy.cuda.Device().synchronize


def _cpu_arrays(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: np.ascontiguousarray(v.copy()) for k, v in inputs.items()}


def _call_cpu(problem: Problem, fn: Any, arrays: dict[str, np.ndarray]) -> None:
    fn(*[arrays[b.name].ctypes.data for b in problem.buffers])


def run_cpu(problem: Problem, fn: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The validated outputs of the cpu_c reference, called on fresh copies of one input set."""
    arrays = _cpu_arrays(inputs)
    _call_cpu(problem, fn, arrays)
    return {b.name: arrays[b.name] for b in problem.validated}


def produce(
    problem: Problem, shape: Shape, sets: list[int], seed: int, work: WorkDir, want_time: bool
) -> Timing | None:
    """Write each set's reference outputs under the work dir; with ``want_time``, time set 0.

    Building the reference and computing its outputs are CPU-heavy work (``cpu_quiet.heavy``:
    they wait while another reference is timed); the timing itself is taken on a quiet machine."""
    first: tuple[dict[str, np.ndarray], Any] | None = None  # set 0's inputs and raw result, for the timing
    with cpu_quiet.heavy():
        python = PythonReference(problem) if problem.reference.type == "python" else None
        cpu_fn = _cpu_function(problem, shape, work) if python is None else None
        for set_index in sorted(set(sets) | ({0} if want_time else set())):
            inputs = make_inputs(problem, shape, set_index, seed, work.root)
            raw: Any = None
            if python is not None:
                outputs, raw = python.outputs(shape, inputs)
            else:
                outputs = run_cpu(problem, cpu_fn, inputs)
            if set_index == 0:
                first = (inputs, raw)
            if set_index in sets:
                d = work.reference_dir(shape.name, set_index)
                d.mkdir(parents=True, exist_ok=True)
                for name, arr in outputs.items():
                    np.save(d / f"{name}.npy", arr)
    if not want_time or first is None:
        return None
    inputs, raw = first
    if python is not None:
        return time_python(python, shape, inputs, raw)
    return wall_clock_timing(
        problem.reference.file.name, lambda arrays: _call_cpu(problem, cpu_fn, arrays), lambda: _cpu_arrays(inputs)
    )


def main(argv: list[str] | None = None) -> int:
    exit_when_parent_dies()
    ap = argparse.ArgumentParser(prog="python -m ktt.host_reference")
    ap.add_argument("--problem", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--shape", default="default")
    ap.add_argument("--sets", default="0,1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time", action="store_true")
    args = ap.parse_args(argv)
    problem = load_problem(args.problem)
    shape = problem.shape(args.shape)
    work = WorkDir(Path(args.work))
    work.prepare_shape(problem, shape)
    sets = [int(s) for s in args.sets.split(",") if s]
    try:
        timing = produce(problem, shape, sets, args.seed, work, args.time)
    except ReferenceFailure as exc:
        print(str(exc), file=sys.stderr, flush=True)
        return 2
    line = {"shape": shape.name, "ms": None, "method": None, "warning": None}
    if timing is not None:
        line.update(ms=timing.ms, method=timing.method, warning=timing.warning, samples=timing.samples,
                    min_ms=timing.min_ms, max_ms=timing.max_ms)  # fmt: skip
    print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
