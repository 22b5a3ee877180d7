"""A FAKE GPU for CPU tests of launch programs: host memory instead of a device, Python "kernels".

``FakeGpu`` offers the part of ``ktt.device.Gpu`` that ``ktt.sequence`` and ``ktt.buffers``
use. Memory is one numpy heap addressed by fake pointers; a launch calls the Python
function registered under the kernel's name with the decoded arguments and records it,
so a test sees the exact launch order, every pass's scalar values and which memory each
buffer name was bound to. Nothing here touches CUDA.

Tensor maps and clusters: ``encode_tensor_map`` returns a FAKE 128-byte map (the address
and the dims, readable with ``decode_map``) and logs ("encode", address, dims); a cluster
launch (``launch_ex``) is recorded with its cluster shape; ``clusters_fit`` is what the
occupancy query answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ktt import half_types
from ktt.device import DeviceProps, F, KernelParams
from ktt.gpu_checks import poison_word
from ktt.tensor_map import TENSOR_MAP_BYTES, TensorMapGeometry

BASE = 0x10000


@dataclass
class LaunchRecord:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: list[Any]  # pointers as ints, scalars as numbers, tensor maps as their 128 bytes
    cluster: tuple[int, int, int] | None = None


def decode_map(data: bytes) -> tuple[int, tuple[int, ...]]:
    """(address, dims) of a FAKE map made by FakeGpu.encode_tensor_map."""
    words = np.frombuffer(data, np.uint64)
    rank = int(words[1])
    return int(words[0]), tuple(int(w) for w in words[2 : 2 + rank])


@dataclass
class FakeGpu:
    kernels: dict[str, Callable[..., None]]  # name -> fn(gpu, grid, block, *args)
    heap_bytes: int = 64 * 1024 * 1024
    heap: np.ndarray = field(init=False)
    top: int = BASE
    log: list[Any] = field(default_factory=list)  # LaunchRecord, ("d2h", ptr), ("d2d", dst, src, n), ("sync",)
    stream: Any = "main"
    clusters_fit: int = 4  # what max_active_clusters answers
    cluster_launch: bool = True
    non_portable: list[Any] = field(default_factory=list)  # functions allowed non-portable cluster sizes

    def __post_init__(self) -> None:
        self.heap = np.zeros(self.heap_bytes, np.uint8)
        self.props = DeviceProps(
            name="fake",
            arch="sm_90",
            sm_count=1,
            clock_khz=1,
            l2_bytes=1024,
            max_threads_per_block=1024,
            max_smem_optin=227 * 1024,
            max_smem_per_block=48 * 1024,
            max_grid=(2**31 - 1, 65535, 65535),
            max_block=(1024, 1024, 64),
            total_memory=self.heap_bytes,
            cluster_launch=self.cluster_launch,
        )

    # -- memory ------------------------------------------------------------------------

    def view(self, ptr: int, nbytes: int, dtype: Any = np.uint8) -> np.ndarray:
        off = ptr - BASE
        assert off >= 0 and off + nbytes <= self.heap_bytes, "fake pointer out of the heap"
        return self.heap[off : off + nbytes].view(dtype)

    def alloc(self, nbytes: int) -> int:
        ptr = self.top
        self.top += (max(int(nbytes), 4) + 255) // 256 * 256
        assert self.top - BASE <= self.heap_bytes, "fake heap exhausted"
        return ptr

    def free(self, ptr: int) -> None:
        pass

    def memset32(self, ptr: int, value: int, count: int, stream: Any = None) -> None:
        self.view(ptr, count * 4, np.uint32)[:] = value & 0xFFFFFFFF

    def h2d(self, dst: int, src: np.ndarray, stream: Any = None) -> None:
        self.view(dst, src.nbytes)[:] = src.view(np.uint8).ravel()

    def d2h(self, dst: np.ndarray, src: int, stream: Any = None) -> None:
        self.log.append(("d2h", src))
        dst.view(np.uint8)[:] = self.view(src, dst.nbytes)

    def d2d(self, dst: int, src: int, nbytes: int, stream: Any = None) -> None:
        self.log.append(("d2d", dst, src, nbytes))
        self.view(dst, nbytes)[:] = self.view(src, nbytes).copy()

    def pinned(self, nbytes: int, dtype: Any = np.uint8) -> np.ndarray:
        return np.zeros(nbytes, np.uint8).view(dtype)

    def free_pinned(self, arr: np.ndarray) -> None:
        pass

    # -- execution ---------------------------------------------------------------------

    def sync(self) -> None:
        self.log.append(("sync",))

    def events(self, purpose: str, n: int) -> list[Any]:
        return [f"{purpose}{i}" for i in range(n)]

    def record(self, event: Any, stream: Any = None) -> None:
        pass

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return 1.0  # every timed span takes a made-up millisecond

    def wait_event(self, stream: Any, event: Any) -> None:
        pass

    def side_stream(self, index: int) -> Any:
        return self.stream if index == 0 else f"side{index}"

    def load_module(self, image: bytes) -> Any:
        return "module"

    def unload_module(self, module: Any) -> None:
        pass

    def function(self, module: Any, name: str) -> Any:
        if name not in self.kernels:
            from ktt.device import CudaError

            raise CudaError("CUDA_ERROR_NOT_FOUND", "cuModuleGetFunction")
        return name

    def func_attr(self, func: Any, attribute: Any) -> int:
        return {
            F.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: 1024,
            F.CU_FUNC_ATTRIBUTE_NUM_REGS: 32,
            F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: 0,
        }[attribute]

    def set_max_dynamic_smem(self, func: Any, nbytes: int) -> None:
        pass

    def launch(self, func: str, grid: Any, block: Any, smem: int, stream: Any, params: KernelParams) -> None:
        args = [h.value for h in params._holders]
        self.log.append(LaunchRecord(func, tuple(grid), tuple(block), args))
        self.kernels[func](self, tuple(grid), tuple(block), *args)

    # -- tensor maps and clusters -------------------------------------------------------

    def encode_tensor_map(self, geometry: TensorMapGeometry, address: int) -> bytes:
        self.log.append(("encode", address, geometry.dims))
        words = np.zeros(TENSOR_MAP_BYTES // 8, np.uint64)
        words[0], words[1] = address, len(geometry.dims)
        words[2 : 2 + len(geometry.dims)] = geometry.dims
        return words.tobytes()

    def allow_non_portable_clusters(self, func: Any) -> None:
        self.non_portable.append(func)

    def cluster_config(self, grid: Any, block: Any, smem: int, stream: Any, cluster: tuple[int, ...]) -> Any:
        return ("config", tuple(grid), tuple(block), smem, stream, tuple(cluster))

    def max_active_clusters(self, func: Any, config: Any) -> int:
        return self.clusters_fit

    def launch_ex(self, config: Any, func: str, params: KernelParams) -> None:
        _, grid, block, _, _, cluster = config
        args = [h.value for h in params._holders]
        self.log.append(LaunchRecord(func, grid, block, args, cluster))
        self.kernels[func](self, grid, block, *args)

    def launches(self) -> list[LaunchRecord]:
        return [x for x in self.log if isinstance(x, LaunchRecord)]


@dataclass
class FakeBuffers:
    """What ktt.sequence.prepare reads of ktt.buffers.ShapeBuffers: the boundary buffers by name."""

    dev: dict[str, Any]

    def argument(self, name: str) -> int:
        return self.dev[name].ptr


@dataclass
class _Result:
    bad: int
    first: int | None
    max_abs_error: float | None
    unwritten: int
    nonfinite: int


_NUMPY = {"float": np.float32, "double": np.float64, "int": np.int32, "char": np.int8, "short": np.int16,
          "long": np.int64, "bf16": np.uint16, "half": np.float16}  # fmt: skip
_BITS = {"float": np.uint32, "double": np.uint64, "int": np.uint32, "char": np.uint8, "short": np.uint16,
         "long": np.uint64, "bf16": np.uint16, "half": np.uint16}  # fmt: skip


def _poison_bits(dtype: str, n: int) -> np.ndarray:
    """What a poisoned buffer of ``n`` elements holds: the dtype's 32-bit poison word repeated."""
    words = np.full((n * np.dtype(_BITS[dtype]).itemsize + 3) // 4, poison_word(dtype), np.uint32)
    return words.view(np.uint8)[: n * np.dtype(_BITS[dtype]).itemsize].view(_BITS[dtype])


def _values(stored: np.ndarray, dtype: str) -> np.ndarray:
    """The elements as float64, a 16-bit float decoded (the CUDA helpers' ktt_value)."""
    return (half_types.decode(stored, dtype) if dtype in half_types.HALF_DTYPES else stored).astype(np.float64)


class FakeChecks:
    """A FAKE of ``ktt.gpu_checks.GpuChecks`` on a FakeGpu: the same counters, computed in numpy
    by the rules the CUDA helpers follow (kept in step with ktt/gpu_checks.py's SOURCE)."""

    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu = gpu
        self.results: list[_Result] = []

    def begin(self) -> None:
        self.results = []

    def collect(self) -> None:
        pass

    def result(self, slot: int) -> _Result:
        return self.results[slot]

    def _add(self, result: _Result) -> int:
        self.results.append(result)
        return len(self.results) - 1

    def compare(
        self, dtype: str, out: int, ref: int, n: int, tol: float, init: int | None = None, rtol: float = 0.0
    ) -> int:
        t = _NUMPY[dtype]
        size = np.dtype(t).itemsize * n
        o, r = self.gpu.view(out, size, t), self.gpu.view(ref, size, t)
        bits = self.gpu.view(out, size, _BITS[dtype])
        poisoned = (bits == _poison_bits(dtype, n)) if init is None else np.zeros(n, bool)
        finite = np.isfinite(_values(o, dtype))
        err = np.abs(_values(o, dtype) - _values(r, dtype))
        bad = poisoned | ~finite | ~(err <= tol + rtol * np.abs(_values(r, dtype)))
        unwritten = poisoned.copy()
        if init is not None:
            unwritten |= bad & (bits == self.gpu.view(init, size, _BITS[dtype]))
        compared = ~poisoned & finite
        max_err = float(err[compared].max()) if compared.any() else 0.0
        idx = np.flatnonzero(bad)
        return self._add(
            _Result(
                int(bad.sum()),
                int(idx[0]) if idx.size else None,
                max_err,
                int(unwritten.sum()),
                int((~poisoned & ~finite).sum()),
            )
        )

    def diff_words(self, a: int, b: int, nwords: int) -> int:
        diff = np.flatnonzero(self.gpu.view(a, 4 * nwords, np.uint32) != self.gpu.view(b, 4 * nwords, np.uint32))
        return self._add(_Result(int(diff.size), int(diff[0]) if diff.size else None, None, 0, 0))

    def not_value(self, a: int, nwords: int, value: int) -> int:
        diff = np.flatnonzero(self.gpu.view(a, 4 * nwords, np.uint32) != np.uint32(value))
        return self._add(_Result(int(diff.size), int(diff[0]) if diff.size else None, None, 0, 0))


def fake_session(
    problem: Any,
    kernels: dict[str, Callable[..., None]],
    work: Any,
    references: dict[str, Callable[[dict], Any]],
    gpu: FakeGpu | None = None,
) -> Any:
    """A ``ktt.worker.Session`` on a FakeGpu (no CUDA context, no helper compile): FakeChecks, three
    timed repetitions, the problem's input sets (0 and 1 unless validation.input_sets says more), each
    validated buffer's reference ``references[name](inputs)``."""
    from types import SimpleNamespace

    from ktt.buffers import ShapeBuffers
    from ktt.inputs import make_inputs
    from ktt.timing import TimingSettings
    from ktt.worker import Session

    gpu = gpu or FakeGpu(kernels)
    s = Session.__new__(Session)
    s.chan = SimpleNamespace(send=lambda msg: None)
    s.problem, s.gpu, s.checks, s.flush, s.bandwidth = problem, gpu, FakeChecks(gpu), None, 4000.0
    s.settings = TimingSettings(min_reps=3, max_reps=3, target_ms=0.0, warmup_ms=0.0, flush_l2=False)
    sets = tuple(getattr(problem, "set_indices", (0, 1)))
    s.bufs = ShapeBuffers.create(gpu, problem, problem.primary, sets, 0, work)
    for k in sets:
        inputs = make_inputs(problem, problem.primary, k, 0, work)
        for name, expected in references.items():
            s.bufs.set_reference(k, name, expected(inputs))
    return s
