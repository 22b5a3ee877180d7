"""A thin layer over the CUDA driver API (``cuda.bindings.driver``) for the GPU worker.

Only the worker process imports this with a GPU present: it owns the one CUDA context.
Every call is checked; a failure raises ``CudaError``, whose ``sticky`` flag says that the
context is corrupted (trap, illegal address...) and the process must be replaced.
"""

from __future__ import annotations

import contextlib
import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np
from cuda.bindings import driver as cu

from ktt.tensor_map import TENSOR_MAP_BYTES, TensorMapGeometry

# Errors after which the context is unusable: the worker reports and exits.
STICKY_ERRORS = {
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_LAUNCH_TIMEOUT",
    "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_ASSERT",
    "CUDA_ERROR_ECC_UNCORRECTABLE",
    "CUDA_ERROR_TENSOR_MEMORY_LEAK",
    "CUDA_ERROR_CONTEXT_IS_DESTROYED",
    "CUDA_ERROR_UNKNOWN",
}
# Errors that mean the launch does not fit the device (threads, shared memory, registers).
LAUNCH_LIMIT_ERRORS = {
    "CUDA_ERROR_INVALID_VALUE",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
    "CUDA_ERROR_INVALID_CONFIGURATION",
    "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
    "CUDA_ERROR_INVALID_CLUSTER_SIZE",
}


class CudaError(RuntimeError):
    def __init__(self, name: str, call: str) -> None:
        self.name = name
        self.call = call
        super().__init__(f"{call}: {name}")

    @property
    def sticky(self) -> bool:
        return self.name in STICKY_ERRORS

    @property
    def launch_limit(self) -> bool:
        return self.name in LAUNCH_LIMIT_ERRORS


def _name(err: Any) -> str:
    try:
        return cu.CUresult(err).name
    except Exception:
        return str(err)


def check(result: Any, call: str = "cuda") -> Any:
    """Unpack a (CUresult, values...) tuple, raising CudaError on failure."""
    if isinstance(result, tuple):
        err, rest = result[0], result[1:]
    else:
        err, rest = result, ()
    if int(err) != 0:
        raise CudaError(_name(err), call)
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


A = cu.CUdevice_attribute
F = cu.CUfunction_attribute


@dataclass(frozen=True)
class DeviceProps:
    name: str
    arch: str
    sm_count: int
    clock_khz: int
    l2_bytes: int
    max_threads_per_block: int
    max_smem_optin: int
    max_smem_per_block: int
    max_grid: tuple[int, int, int]
    max_block: tuple[int, int, int]
    total_memory: int
    cluster_launch: bool = False  # thread-block clusters (compute capability 9.0 and newer)


class Gpu:
    """The worker's device: context, one main stream, side streams on demand."""

    def __init__(self, ordinal: int) -> None:
        check(cu.cuInit(0), "cuInit")
        count = check(cu.cuDeviceGetCount(), "cuDeviceGetCount")
        if ordinal >= count:
            raise CudaError("CUDA_ERROR_INVALID_DEVICE", f"device {ordinal} (found {count})")
        self.device = check(cu.cuDeviceGet(ordinal), "cuDeviceGet")
        # Wait for the GPU asleep, not spinning: the compile processes need every core, and
        # timing is read from CUDA events, so the wake-up latency is not in any measured time.
        with contextlib.suppress(Exception):
            cu.cuDevicePrimaryCtxSetFlags(self.device, cu.CUctx_flags.CU_CTX_SCHED_BLOCKING_SYNC)
        self.context = check(cu.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        check(cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.props = self._props()
        self.stream = check(cu.cuStreamCreate(0), "cuStreamCreate")
        self._side: dict[int, Any] = {}
        self._events: dict[str, list[Any]] = {}

    def attr(self, a: Any) -> int:
        return int(check(cu.cuDeviceGetAttribute(a, self.device), "cuDeviceGetAttribute"))

    def _props(self) -> DeviceProps:
        raw = check(cu.cuDeviceGetName(256, self.device), "cuDeviceGetName")
        name = bytes(raw).split(b"\0", 1)[0].decode(errors="replace")
        major = self.attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        minor = self.attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        total = int(check(cu.cuDeviceTotalMem(self.device), "cuDeviceTotalMem"))
        return DeviceProps(
            name=name,
            arch=f"sm_{major}{minor}",
            sm_count=self.attr(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            clock_khz=self.attr(A.CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
            l2_bytes=self.attr(A.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
            max_threads_per_block=self.attr(A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            max_smem_optin=self.attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
            max_smem_per_block=self.attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
            max_grid=(
                self.attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X),
                self.attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                self.attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z),
            ),
            max_block=(
                self.attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X),
                self.attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                self.attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z),
            ),
            total_memory=total,
            cluster_launch=bool(self.attr(A.CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)),
        )

    def side_stream(self, index: int) -> Any:
        if index == 0:
            return self.stream
        if index not in self._side:
            self._side[index] = check(cu.cuStreamCreate(0), "cuStreamCreate")
        return self._side[index]

    # -- memory --------------------------------------------------------------------

    def alloc(self, nbytes: int) -> int:
        return int(check(cu.cuMemAlloc(max(int(nbytes), 4)), "cuMemAlloc"))

    def free(self, ptr: int) -> None:
        if ptr:
            check(cu.cuMemFree(ptr), "cuMemFree")

    def memset32(self, ptr: int, value: int, count: int, stream: Any = None) -> None:
        if count > 0:
            check(cu.cuMemsetD32Async(ptr, value & 0xFFFFFFFF, count, stream or self.stream), "cuMemsetD32Async")

    def h2d(self, dst: int, src: np.ndarray, stream: Any = None) -> None:
        if src.nbytes:
            check(cu.cuMemcpyHtoDAsync(dst, src.ctypes.data, src.nbytes, stream or self.stream), "cuMemcpyHtoDAsync")

    def d2h(self, dst: np.ndarray, src: int, stream: Any = None) -> None:
        if dst.nbytes:
            check(cu.cuMemcpyDtoHAsync(dst.ctypes.data, src, dst.nbytes, stream or self.stream), "cuMemcpyDtoHAsync")

    def d2d(self, dst: int, src: int, nbytes: int, stream: Any = None) -> None:
        if nbytes:
            check(cu.cuMemcpyDtoDAsync(dst, src, nbytes, stream or self.stream), "cuMemcpyDtoDAsync")

    def pinned(self, nbytes: int, dtype: Any = np.uint8) -> np.ndarray:
        """Page-locked host memory as a numpy array (freed by ``free_pinned``)."""
        ptr = int(check(cu.cuMemHostAlloc(max(int(nbytes), 1), 0), "cuMemHostAlloc"))
        raw = (ctypes.c_ubyte * max(int(nbytes), 1)).from_address(ptr)
        arr = np.frombuffer(raw, dtype=np.uint8, count=int(nbytes)).view(dtype)
        return arr

    def free_pinned(self, arr: np.ndarray) -> None:
        check(cu.cuMemFreeHost(arr.ctypes.data), "cuMemFreeHost")

    def mem_info(self) -> tuple[int, int]:
        free, total = check(cu.cuMemGetInfo(), "cuMemGetInfo")
        return int(free), int(total)

    # -- execution -----------------------------------------------------------------

    def sync(self) -> None:
        """Wait for the whole device (every stream), surfacing any asynchronous error."""
        check(cu.cuCtxSynchronize(), "cuCtxSynchronize")

    def event(self) -> Any:
        return check(cu.cuEventCreate(0), "cuEventCreate")

    def events(self, purpose: str, n: int) -> list[Any]:
        """``n`` events reserved for one purpose, created once and reused (configurations come and go)."""
        pool = self._events.setdefault(purpose, [])
        while len(pool) < n:
            pool.append(self.event())
        return pool[:n]

    def record(self, event: Any, stream: Any = None) -> None:
        check(cu.cuEventRecord(event, stream or self.stream), "cuEventRecord")

    def wait_event(self, stream: Any, event: Any) -> None:
        check(cu.cuStreamWaitEvent(stream, event, 0), "cuStreamWaitEvent")

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(check(cu.cuEventElapsedTime(start, end), "cuEventElapsedTime"))

    def load_module(self, image: bytes) -> Any:
        return check(cu.cuModuleLoadData(image), "cuModuleLoadData")

    def unload_module(self, module: Any) -> None:
        check(cu.cuModuleUnload(module), "cuModuleUnload")

    def function(self, module: Any, name: str) -> Any:
        return check(cu.cuModuleGetFunction(module, name.encode()), "cuModuleGetFunction")

    def func_attr(self, func: Any, attribute: Any) -> int:
        return int(check(cu.cuFuncGetAttribute(attribute, func), "cuFuncGetAttribute"))

    def set_max_dynamic_smem(self, func: Any, nbytes: int) -> None:
        check(
            cu.cuFuncSetAttribute(func, F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(nbytes)),
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
        )

    def launch(
        self,
        func: Any,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        smem: int,
        stream: Any,
        params: KernelParams,
    ) -> None:
        check(
            cu.cuLaunchKernel(func, *grid, *block, int(smem), stream or self.stream, params.address, 0),
            "cuLaunchKernel",
        )

    # -- Hopper: tensor maps and clusters -------------------------------------------

    def encode_tensor_map(self, geometry: TensorMapGeometry, address: int) -> bytes:
        return encode_tensor_map(geometry, address)

    def allow_non_portable_clusters(self, func: Any) -> None:
        check(
            cu.cuFuncSetAttribute(func, F.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
            "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)",
        )

    def cluster_config(
        self, grid: tuple[int, int, int], block: tuple[int, int, int], smem: int, stream: Any, cluster: tuple[int, ...]
    ) -> Any:
        return cluster_launch_config(grid, block, smem, stream or self.stream, cluster)

    def max_active_clusters(self, func: Any, config: Any) -> int:
        """How many clusters of the launch's shape the device can hold at once (0: it cannot launch)."""
        return int(check(cu.cuOccupancyMaxActiveClusters(func, config), "cuOccupancyMaxActiveClusters"))

    def launch_ex(self, config: Any, func: Any, params: KernelParams) -> None:
        """A launch with attributes (a cluster shape), its config built once by ``cluster_config``."""
        check(cu.cuLaunchKernelEx(config, func, params.address, 0), "cuLaunchKernelEx")


# The driver's enums by the names tuning.yaml uses (ktt.tensor_map).
_TMA_DTYPE = {
    "uint8": "UINT8",
    "uint16": "UINT16",
    "uint32": "UINT32",
    "int32": "INT32",
    "uint64": "UINT64",
    "int64": "INT64",
    "float16": "FLOAT16",
    "float32": "FLOAT32",
    "float64": "FLOAT64",
    "bfloat16": "BFLOAT16",
    "float32_ftz": "FLOAT32_FTZ",
    "tfloat32": "TFLOAT32",
    "tfloat32_ftz": "TFLOAT32_FTZ",
}
_SWIZZLE = {"none": "NONE", "32B": "32B", "64B": "64B", "128B": "128B"}
_L2 = {"none": "NONE", "64B": "L2_64B", "128B": "L2_128B", "256B": "L2_256B"}
_OOB = {"none": "NONE", "nan": "NAN_REQUEST_ZERO_FMA"}


def tensor_map_call_args(g: TensorMapGeometry, address: int) -> tuple[Any, ...]:
    """The arguments of cuTensorMapEncodeTiled for a map at ``address`` (interleave none, element strides 1)."""
    rank = len(g.dims)
    return (
        getattr(cu.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{_TMA_DTYPE[g.dtype]}"),
        rank,
        int(address),
        [cu.cuuint64_t(d) for d in g.dims],
        [cu.cuuint64_t(s) for s in g.strides],
        [cu.cuuint32_t(b) for b in g.box],
        [cu.cuuint32_t(1) for _ in range(rank)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(cu.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{_SWIZZLE[g.swizzle]}"),
        getattr(cu.CUtensorMapL2promotion, f"CU_TENSOR_MAP_L2_PROMOTION_{_L2[g.l2_promotion]}"),
        getattr(cu.CUtensorMapFloatOOBfill, f"CU_TENSOR_MAP_FLOAT_OOB_FILL_{_OOB[g.oob_fill]}"),
    )


def encode_tensor_map(g: TensorMapGeometry, address: int) -> bytes:
    """The 128 bytes of a CUtensorMap for ``g`` at ``address`` (no context needed, only the driver)."""
    tmap = check(cu.cuTensorMapEncodeTiled(*tensor_map_call_args(g, address)), "cuTensorMapEncodeTiled")
    return ctypes.string_at(int(tmap.getPtr()), TENSOR_MAP_BYTES)


def cluster_launch_config(
    grid: tuple[int, int, int], block: tuple[int, int, int], smem: int, stream: Any, cluster: tuple[int, ...]
) -> Any:
    """A CUlaunchConfig with the cluster-dimension attribute; built once per prepared launch."""
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = (int(v) for v in grid)
    config.blockDimX, config.blockDimY, config.blockDimZ = (int(v) for v in block)
    config.sharedMemBytes = int(smem)
    config.hStream = stream
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = (int(v) for v in cluster)
    config.attrs = [attr]
    config.numAttrs = 1
    return config


_CTYPES: dict[str, type] = {
    "ptr": ctypes.c_uint64,
    "int": ctypes.c_int32,
    "char": ctypes.c_int8,
    "short": ctypes.c_int16,
    "long": ctypes.c_int64,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "u64": ctypes.c_uint64,
    "u32": ctypes.c_uint32,
}


class TensorMapHolder:
    """A CUtensorMap's 128 bytes, 64-byte aligned as the driver's type is, for passing by value."""

    def __init__(self, data: bytes) -> None:
        if len(data) != TENSOR_MAP_BYTES:
            raise ValueError(f"a tensor map is {TENSOR_MAP_BYTES} bytes, got {len(data)}")
        self.value = bytes(data)
        self._raw = (ctypes.c_ubyte * (TENSOR_MAP_BYTES + 63))()
        self.address = (ctypes.addressof(self._raw) + 63) // 64 * 64
        ctypes.memmove(self.address, self.value, TENSOR_MAP_BYTES)


class KernelParams:
    """Kernel arguments packed as the ``void**`` array cuLaunchKernel reads (kept alive here).

    Kind ``tmap`` takes the 128 bytes of an encoded tensor map (a by-value struct parameter)."""

    def __init__(self, values: list[tuple[str, Any]]) -> None:
        self._holders: list[Any] = [
            TensorMapHolder(value) if kind == "tmap" else _CTYPES[kind](value) for kind, value in values
        ]
        addresses = [h.address if isinstance(h, TensorMapHolder) else ctypes.addressof(h) for h in self._holders]
        self._array = (ctypes.c_void_p * max(1, len(self._holders)))(*addresses)
        self.address = ctypes.addressof(self._array)
