"""The input data of one shape: deterministic host arrays for each buffer of inputs.yaml.

Input set 0 depends only on each buffer's seed (its ``seed:``, else a hash of its name),
so every run of a problem sees the same primary inputs. Set 1 and later are the fresh
inputs a configuration must also pass before it may be reported as best; they also mix
in the run's ``--seed``. Buffers read from files, or filled by a custom C++ body, are the
same in every set.
"""

from __future__ import annotations

import ctypes
import zlib
from pathlib import Path

import numpy as np

from ktt.host_compiler import build_shared_library
from ktt.problem.model import Buffer, Problem, Shape


def buffer_seed(buffer: Buffer) -> int:
    return buffer.seed if buffer.seed is not None else zlib.crc32(buffer.name.encode())


def rng_for(buffer: Buffer, set_index: int, run_seed: int) -> np.random.Generator:
    base = buffer_seed(buffer)
    if set_index == 0:
        return np.random.default_rng([base, 0])
    return np.random.default_rng([base, set_index, run_seed])


def make_buffer(
    problem: Problem, shape: Shape, buffer: Buffer, set_index: int, run_seed: int, work_dir: Path
) -> np.ndarray:
    n = shape.sizes[buffer.name]
    dtype = np.dtype(buffer.numpy_dtype)
    if buffer.access == "write":
        return np.zeros(n, dtype)  # poisoned on the device before every run
    if buffer.init == "zeros":
        return np.zeros(n, dtype)
    if buffer.init == "file":
        path = shape.files[buffer.name]
        return np.fromfile(path, dtype=dtype, count=n)
    if buffer.init == "custom":
        return _custom(problem, shape, buffer, work_dir)
    rng = rng_for(buffer, set_index, run_seed)
    low, high = buffer.value_range
    if dtype.kind == "f":
        values = rng.random(n, dtype=np.float64 if dtype.itemsize == 8 else np.float32)
        return (values * dtype.type(high - low) + dtype.type(low)).astype(dtype, copy=False)
    return rng.integers(int(low), int(high) + 1, n, dtype=dtype)


def make_inputs(problem: Problem, shape: Shape, set_index: int, run_seed: int, work_dir: Path) -> dict[str, np.ndarray]:
    return {b.name: make_buffer(problem, shape, b, set_index, run_seed, work_dir) for b in problem.buffers}


def _custom(problem: Problem, shape: Shape, buffer: Buffer, work_dir: Path) -> np.ndarray:
    body = buffer.body or ""
    if "for" not in body:
        body = f"for (size_t i = 0; i < n; ++i) {{ {body} }}"
    source = (
        "#include <cstddef>\n#include <cstdint>\n#include <cmath>\n#include <cstdlib>\n"
        f'extern "C" void ktt_init({buffer.ctype}* {buffer.name}, size_t n) {{\n{body}\n}}\n'
    )
    lib_path = build_shared_library(
        source,
        work_dir / "host",
        cxx=True,
        defines=dict(shape.scalars),
        include_dirs=[problem.directory],
        source_name=f"init_{buffer.name}.cpp",
    )
    lib = ctypes.CDLL(str(lib_path))
    n = shape.sizes[buffer.name]
    arr = np.zeros(n, np.dtype(buffer.numpy_dtype))
    lib.ktt_init.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.ktt_init(arr.ctypes.data, n)
    return arr
