"""Run a cpu_c or python reference in its own process and store its outputs as .npy files.

    python -m ktt.host_reference --problem DIR --work WORK --shape NAME --sets 0,1 --seed S [--time]

cpu_c: ref_cpu.c is built into a shared library with the shape's scalars as -D macros and
called through ctypes with the buffers in args order. python: ref.py is imported here,
``prepare_input(scalars, buffers)`` (if defined) runs untimed, then the function. Prints one
JSON line: {"shape": ..., "ms": time of the set-0 call or null}.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ktt.host_compiler import build_shared_library
from ktt.inputs import make_inputs
from ktt.problem import load_problem
from ktt.problem.model import Problem, Shape
from ktt.procs import exit_when_parent_dies
from ktt.workdir import WorkDir

QUICK_S = 0.25  # a reference faster than this is timed over a few calls
MAX_REPEATS = 5


def _cpu_function(problem: Problem, shape: Shape, work: WorkDir) -> Any:
    ref = problem.reference
    lib_path = build_shared_library(
        ref.file.read_text(encoding="utf-8"),
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


def _python_module(problem: Problem) -> Any:
    ref = problem.reference
    sys.path.insert(0, str(problem.directory))
    spec = importlib.util.spec_from_file_location(f"ktt_reference_{problem.name}", ref.file)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _outputs_from_python(problem: Problem, shape: Shape, result: Any) -> dict[str, np.ndarray]:
    names = [b.name for b in problem.validated]
    if isinstance(result, dict):
        missing = [n for n in names if n not in result]
        if missing:
            raise ValueError(f"the reference returned a dict without {missing[0]!r}")
        values = [result[n] for n in names]
    elif isinstance(result, (list, tuple)) and len(names) > 1:
        values = list(result)
    else:
        values = [result]
    if len(values) != len(names):
        raise ValueError(f"the reference returned {len(values)} arrays for {len(names)} validated buffers")
    out = {}
    for b, v in zip(problem.validated, values, strict=True):
        arr = np.asarray(v.get() if hasattr(v, "get") else (v.cpu().numpy() if hasattr(v, "cpu") else v))
        arr = arr.astype(b.numpy_dtype, copy=False).ravel()
        if arr.size != shape.sizes[b.name]:
            raise ValueError(f"the reference returned {arr.size} values for {b.name}, expected {shape.sizes[b.name]}")
        out[b.name] = arr
    return out


def run_reference(problem: Problem, shape: Shape, set_index: int, seed: int, work: WorkDir) -> tuple[dict, float]:
    """(validated outputs, seconds of the timed call) for one input set."""
    inputs = make_inputs(problem, shape, set_index, seed, work.root)
    if problem.reference.type == "cpu_c":
        fn = _cpu_function(problem, shape, work)
        arrays = {k: np.ascontiguousarray(v) for k, v in inputs.items()}
        start = time.perf_counter()
        fn(*[arrays[b.name].ctypes.data for b in problem.buffers])
        seconds = time.perf_counter() - start
        return {b.name: arrays[b.name] for b in problem.validated}, seconds
    module = _python_module(problem)
    fn = getattr(module, problem.reference.function or "")
    scalars = dict(shape.scalars)
    prepare = getattr(module, "prepare_input", None)
    if prepare is not None:
        arg = prepare(scalars, inputs)
        start = time.perf_counter()
        result = fn(arg)
    else:
        start = time.perf_counter()
        result = fn(scalars, inputs)
    seconds = time.perf_counter() - start
    return _outputs_from_python(problem, shape, result), seconds


def time_reference(problem: Problem, shape: Shape, seed: int, work: WorkDir, first_s: float) -> float:
    """Median of a few calls when the reference is quick; the single call otherwise."""
    samples = [first_s]
    while sum(samples) < QUICK_S and len(samples) < MAX_REPEATS:
        samples.append(run_reference(problem, shape, 0, seed, work)[1])
    return statistics.median(samples)


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
    ms = None
    for set_index in [int(s) for s in args.sets.split(",") if s]:
        outputs, seconds = run_reference(problem, shape, set_index, args.seed, work)
        d = work.reference_dir(shape.name, set_index)
        d.mkdir(parents=True, exist_ok=True)
        for name, arr in outputs.items():
            np.save(d / f"{name}.npy", arr)
        if set_index == 0 and args.time:
            ms = time_reference(problem, shape, args.seed, work, seconds) * 1e3
    print(json.dumps({"shape": shape.name, "ms": ms}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
