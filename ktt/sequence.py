"""One configuration on the GPU: its module, its launches with packed arguments, its scratch buffers."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from ktt.buffers import Guarded, ShapeBuffers, alloc_guarded
from ktt.device import CudaError, F, Gpu, KernelParams
from ktt.gpu_checks import POISON32

ARG_KINDS = {"int": "int", "float": "float", "double": "double"}


class LaunchRejected(Exception):
    """The launch does not fit the device; the status is launch_failed."""


@dataclass
class PreparedLaunch:
    kernel: str
    func: Any
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    stream: int
    params: KernelParams


@dataclass
class Sequence:
    gpu: Gpu
    module: Any
    launches: list[PreparedLaunch]
    scratch: list[tuple[Guarded, bool]] = field(default_factory=list)
    _fork: Any = None
    _joins: dict[int, Any] = field(default_factory=dict)

    @property
    def streams(self) -> list[int]:
        return sorted({launch.stream for launch in self.launches} - {0})

    def reset_scratch(self) -> None:
        for g, zero in self.scratch:
            self.gpu.memset32(g.ptr, 0 if zero else POISON32, g.words)

    def run(self, events: list | None = None) -> None:
        """Queue the whole sequence on the main stream (side streams fork and join around it)."""
        gpu = self.gpu
        for g, zero in self.scratch:
            if zero:
                gpu.memset32(g.ptr, 0, g.words)
        side = self.streams
        if side:
            if self._fork is None:
                self._fork = gpu.events("fork", 1)[0]
                joins = gpu.events("join", len(side))
                self._joins = dict(zip(side, joins, strict=True))
            gpu.record(self._fork)
            for s in side:
                gpu.wait_event(gpu.side_stream(s), self._fork)
        for i, launch in enumerate(self.launches):
            if events is not None:
                gpu.record(events[i])
            gpu.launch(
                launch.func, launch.grid, launch.block, launch.smem, gpu.side_stream(launch.stream), launch.params
            )
        if events is not None:
            gpu.record(events[len(self.launches)])
        for s in side:
            gpu.record(self._joins[s], gpu.side_stream(s))
            gpu.wait_event(gpu.stream, self._joins[s])

    def free(self) -> None:
        for g, _ in self.scratch:
            self.gpu.free(g.base)
        self.scratch.clear()
        if self.module is not None:
            self.gpu.unload_module(self.module)
            self.module = None


def prepare(gpu: Gpu, bufs: ShapeBuffers, cubin: bytes, launches: list[dict], scratch: list[dict]) -> Sequence:
    """Load the cubin, check each launch against the device's limits, pack the arguments."""
    try:
        module = gpu.load_module(cubin)
    except CudaError as exc:
        if exc.sticky:
            raise
        raise LaunchRejected(f"the module does not load on this device: {exc.name}") from None
    seq = Sequence(gpu, module, [])
    try:
        scratch_ptrs: dict[str, int] = {}
        for s in scratch:
            g = alloc_guarded(gpu, int(s["bytes"]), f"scratch {s['name']}")
            seq.scratch.append((g, bool(s.get("zero", True))))
            scratch_ptrs[s["name"]] = g.ptr
        props = gpu.props
        for i, launch in enumerate(launches):
            name = launch["kernel"]
            try:
                func = gpu.function(module, name)
            except CudaError:
                raise LaunchRejected(
                    f'launches[{i}]: no kernel {name!r} in the compiled source (declare it extern "C" __global__)'
                ) from None
            grid = tuple(int(v) for v in launch["grid"])
            block = tuple(int(v) for v in launch["block"])
            smem = int(launch.get("smem", 0))
            threads = block[0] * block[1] * block[2]
            if min(grid) < 1 or min(block) < 1:
                raise LaunchRejected(f"launches[{i}] ({name}): grid {grid} / block {block} has an axis below 1")
            if any(g > m for g, m in zip(grid, props.max_grid, strict=True)):
                raise LaunchRejected(f"launches[{i}] ({name}): grid {grid} exceeds the device limit {props.max_grid}")
            if any(b > m for b, m in zip(block, props.max_block, strict=True)):
                raise LaunchRejected(
                    f"launches[{i}] ({name}): block {block} exceeds the device limit {props.max_block}"
                )
            max_threads = gpu.func_attr(func, F.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
            if threads > max_threads:
                regs = gpu.func_attr(func, F.CU_FUNC_ATTRIBUTE_NUM_REGS)
                raise LaunchRejected(
                    f"launches[{i}] ({name}): {threads} threads per block, but this kernel allows at most "
                    f"{max_threads} ({regs} registers per thread)"
                )
            static = gpu.func_attr(func, F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
            if static + smem > props.max_smem_optin:
                raise LaunchRejected(
                    f"launches[{i}] ({name}): {static} B static + {smem} B dynamic shared memory exceeds the "
                    f"device's {props.max_smem_optin} B per block"
                )
            if smem + static > props.max_smem_per_block:
                try:
                    gpu.set_max_dynamic_smem(func, smem)
                except CudaError as exc:
                    if exc.sticky:
                        raise
                    raise LaunchRejected(
                        f"launches[{i}] ({name}): {smem} B dynamic shared memory refused: {exc.name}"
                    ) from None
            values: list[tuple[str, Any]] = []
            for arg in launch["args"]:
                if arg["kind"] == "buffer":
                    values.append(("ptr", bufs.argument(arg["name"])))
                elif arg["kind"] == "scratch":
                    values.append(("ptr", scratch_ptrs[arg["name"]]))
                else:
                    kind = ARG_KINDS[arg["dtype"]]
                    value = arg["value"]
                    values.append((kind, int(value) if kind == "int" else float(value)))
            seq.launches.append(
                PreparedLaunch(name, func, grid, block, smem, int(launch.get("stream", 0)), KernelParams(values))  # type: ignore[arg-type]
            )
    except BaseException:
        with contextlib.suppress(CudaError):
            seq.free()
        raise
    return seq
