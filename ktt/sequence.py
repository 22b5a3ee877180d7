"""One configuration on the GPU: its module, its launch program with packed arguments, its scratch buffers.

The program comes evaluated from ktt.launch_program: launches, and loops whose passes run
in order on the main stream, exchanging buffer bindings after each pass (``swap``) and,
for an ``until`` loop, reading a flag back after each pass.

A tensor-map argument is encoded for the address its buffer name is bound to when the
arguments are packed, and packed arguments are kept per binding: a map is encoded again
exactly when the address changes (a swap partner's memory, a re-allocated buffer), never per
launch. A cluster launch gets its CUlaunchConfig once, here, after the driver said that one
cluster of that shape fits the device; plain launches keep cuLaunchKernel.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ktt.buffers import Guarded, ShapeBuffers, alloc_guarded
from ktt.device import CudaError, F, Gpu, KernelParams
from ktt.gpu_checks import POISON32
from ktt.tensor_map import TensorMapGeometry, address_problem

ARG_KINDS = {"int": "int", "float": "float", "double": "double", "char": "char", "short": "short", "long": "long"}
INTEGER_KINDS = frozenset({"int", "char", "short", "long"})


class LaunchRejected(Exception):
    """The launch does not fit the device; the status is launch_failed."""


class PassLimit(Exception):
    """An ``until`` loop ran max_passes passes and its flag stayed zero: the configuration fails."""


@dataclass
class PreparedLaunch:
    kernel: str
    func: Any
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    stream: int
    # ("bind", buffer or scratch name), ("tmap", (name, TensorMapGeometry, arg index)) or (scalar kind, value)
    args: list[tuple[str, Any]]
    label: str = ""
    config: Any = None  # a cluster launch's CUlaunchConfig (None: a plain cuLaunchKernel)
    encode: Any = None  # (TensorMapGeometry, address) -> 128 bytes, for launches with tensor maps
    _packed: dict[tuple[int, ...], KernelParams] = field(default_factory=dict)
    _bound: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self._bound = tuple(v if k == "bind" else v[0] for k, v in self.args if k in ("bind", "tmap"))

    def params(self, bindings: dict[str, int]) -> KernelParams:
        """The packed arguments for the current buffer bindings (packed once per binding, then reused)."""
        key = tuple(bindings[name] for name in self._bound)
        packed = self._packed.get(key)
        if packed is None:
            packed = self._packed[key] = self._pack(key)
        return packed

    def _pack(self, key: tuple[int, ...]) -> KernelParams:
        ptrs = iter(key)
        values: list[tuple[str, Any]] = []
        for kind, v in self.args:
            if kind == "bind":
                values.append(("ptr", next(ptrs)))
            elif kind == "tmap":
                _, geometry, j = v
                address = next(ptrs)
                why = address_problem(address)
                if why is not None:
                    raise CudaError("CUDA_ERROR_INVALID_VALUE", f"{self.label}.args[{j}]: {why}")
                try:
                    values.append(("tmap", self.encode(geometry, address)))
                except CudaError as exc:
                    if exc.sticky:
                        raise
                    where = f"{self.label}.args[{j}]: cuTensorMapEncodeTiled refused the map"
                    raise CudaError(exc.name, where) from None
            else:
                values.append((kind, v))
        return KernelParams(values)


@dataclass
class PreparedRepeat:
    label: str
    passes: int  # count, or max_passes of an until loop
    until: str | None
    swaps: list[tuple[str, str]]
    bodies: list[list[Step]]  # one body for every pass, or one per pass


Step = PreparedLaunch | PreparedRepeat


@dataclass
class Sequence:
    gpu: Gpu
    module: Any
    launches: list[PreparedLaunch]  # every prepared launch (each pass's, for per-pass bodies)
    scratch: list[tuple[Guarded, bool]] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)  # the program: launches and loops, in order
    home: dict[str, int] = field(default_factory=dict)  # buffer and scratch name -> its own memory
    nbytes: dict[str, int] = field(default_factory=dict)
    copy_back: list[str] = field(default_factory=list)  # swapped boundary buffers
    passes: dict[str, int] = field(default_factory=dict)  # loop label -> passes in the last run (last entry)
    # The shape's buffers (ShapeBuffers.dev): read at every run, so a buffer re-allocated between
    # runs is bound (and its tensor maps encoded) at its new address.
    boundary: dict[str, Guarded] = field(default_factory=dict)
    _flag_host: Any = None
    _fork: Any = None
    _joins: dict[int, Any] = field(default_factory=dict)

    @property
    def streams(self) -> list[int]:
        return sorted({launch.stream for launch in self.launches} - {0})

    @property
    def flat(self) -> bool:
        return all(isinstance(step, PreparedLaunch) for step in self.steps)

    def launch_events(self) -> int:
        """Launches to time one by one: a flat, single-stream program only (0 otherwise)."""
        return len(self.steps) if self.flat and not self.streams else 0

    def reset_scratch(self) -> None:
        for g, zero in self.scratch:
            self.gpu.memset32(g.ptr, 0 if zero else POISON32, g.words)

    def run(self, events: list | None = None) -> None:
        """Queue the whole program on the main stream (side streams fork and join around it).

        Every run starts from the declared bindings (a swap of an earlier run is undone), and a
        boundary buffer that a swap left pointing at other memory gets that memory copied back
        into its own at the end, inside the timed span. An ``until`` loop reads its flag back
        after every pass (a 4-byte copy and a device synchronisation): that round trip is part
        of the algorithm and is timed with it. Raises PassLimit when a flag stays zero.
        """
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
        for name, g in self.boundary.items():
            if self.home[name] != g.ptr:
                self.home[name], self.nbytes[name] = g.ptr, g.nbytes
        bindings = dict(self.home)
        self.passes = {}
        if events is not None and self.launch_events():
            for i, step in enumerate(self.steps):
                assert isinstance(step, PreparedLaunch)
                gpu.record(events[i])
                self._launch(step, bindings)
            gpu.record(events[len(self.steps)])
        else:
            self._steps(self.steps, bindings)
        for s in side:
            gpu.record(self._joins[s], gpu.side_stream(s))
            gpu.wait_event(gpu.stream, self._joins[s])
        for name in self.copy_back:
            if bindings[name] != self.home[name]:
                gpu.d2d(self.home[name], bindings[name], self.nbytes[name])

    def _launch(self, launch: PreparedLaunch, bindings: dict[str, int]) -> None:
        if launch.config is not None:
            try:
                self.gpu.launch_ex(launch.config, launch.func, launch.params(bindings))
            except CudaError as exc:
                if exc.sticky or not exc.launch_limit:
                    raise
                raise CudaError(exc.name, f"{launch.label} ({launch.kernel}): cluster launch refused") from None
            return
        self.gpu.launch(
            launch.func,
            launch.grid,
            launch.block,
            launch.smem,
            self.gpu.side_stream(launch.stream),
            launch.params(bindings),
        )

    def _steps(self, steps: list[Step], bindings: dict[str, int]) -> None:
        for step in steps:
            if isinstance(step, PreparedLaunch):
                self._launch(step, bindings)
            else:
                self._loop(step, bindings)

    def _loop(self, rep: PreparedRepeat, bindings: dict[str, int]) -> None:
        gpu = self.gpu
        for p in range(rep.passes):
            self._steps(rep.bodies[p] if len(rep.bodies) > 1 else rep.bodies[0], bindings)
            for a, b in rep.swaps:  # after every pass, the last one included
                bindings[a], bindings[b] = bindings[b], bindings[a]
            if rep.until is not None:
                gpu.d2h(self._flag_host, bindings[rep.until])
                gpu.sync()
                if int(self._flag_host[0]) != 0:
                    self.passes[rep.label] = p + 1
                    return
        self.passes[rep.label] = rep.passes
        if rep.until is not None:
            raise PassLimit(
                f"{rep.label}: until flag {rep.until!r} was still 0 after max_passes = {rep.passes} passes "
                "(the loop did not finish)"
            )

    def free(self) -> None:
        for g, _ in self.scratch:
            self.gpu.free(g.base)
        self.scratch.clear()
        if self._flag_host is not None:
            self.gpu.free_pinned(self._flag_host)
            self._flag_host = None
        if self.module is not None:
            self.gpu.unload_module(self.module)
            self.module = None


@dataclass
class _KernelInfo:
    func: Any
    max_threads: int
    regs: int
    static_smem: int
    dynamic_smem: int = 0  # the largest dynamic shared memory already allowed (attribute raised)
    non_portable: bool = False  # non-portable cluster sizes already allowed


def prepare(gpu: Gpu, bufs: ShapeBuffers, cubin: bytes, launches: list[dict], scratch: list[dict]) -> Sequence:
    """Load the cubin, check each launch of the program against the device's limits, pack the arguments."""
    try:
        module = gpu.load_module(cubin)
    except CudaError as exc:
        if exc.sticky:
            raise
        raise LaunchRejected(f"the module does not load on this device: {exc.name}") from None
    seq = Sequence(gpu, module, [], boundary=bufs.dev)
    try:
        for name, g in bufs.dev.items():
            seq.home[name] = g.ptr
            seq.nbytes[name] = g.nbytes
        for s in scratch:
            g = alloc_guarded(gpu, int(s["bytes"]), f"scratch {s['name']}")
            seq.scratch.append((g, bool(s.get("zero", True))))
            seq.home[s["name"]] = g.ptr
            seq.nbytes[s["name"]] = g.nbytes
        builder = _Builder(gpu, bufs, module, seq)
        seq.steps = builder.steps(launches)
        boundary = set(bufs.dev)
        seq.copy_back = sorted(builder.swapped & boundary)
        if builder.has_until:
            seq._flag_host = gpu.pinned(4, np.int32)
        for launch in seq.launches:  # maps for the declared bindings now: a refusal names its argument
            if launch.encode is not None:
                try:
                    launch.params(seq.home)
                except CudaError as exc:
                    if exc.sticky:
                        raise
                    raise LaunchRejected(f"{exc.call}: {exc.name}") from None
    except BaseException:
        with contextlib.suppress(CudaError):
            seq.free()
        raise
    return seq


class _Builder:
    """Program nodes (ktt.launch_program) -> prepared steps, checking each launch once."""

    def __init__(self, gpu: Gpu, bufs: ShapeBuffers, module: Any, seq: Sequence) -> None:
        self.gpu = gpu
        self.bufs = bufs
        self.module = module
        self.seq = seq
        self.kernels: dict[str, _KernelInfo] = {}
        self.swapped: set[str] = set()
        self.has_until = False
        self.count = 0

    def steps(self, nodes: list[dict]) -> list[Step]:
        out: list[Step] = []
        for node in nodes:
            rep = node.get("repeat")
            if rep is None:
                out.append(self.launch(node))
                continue
            label = rep.get("label", "repeat")
            for pair in rep.get("swap", []):
                a, b = pair
                for n in (a, b):
                    if n not in self.seq.home:
                        raise LaunchRejected(f"{label}.swap: no buffer or scratch {n!r}")
                if self.seq.nbytes[a] != self.seq.nbytes[b]:
                    raise LaunchRejected(
                        f"{label}.swap: {a!r} has {self.seq.nbytes[a]} bytes but {b!r} has {self.seq.nbytes[b]}"
                    )
                self.swapped |= {a, b}
            until = rep.get("until")
            if until is not None:
                if until not in {s for s in self.seq.home if s not in self.bufs.dev}:
                    raise LaunchRejected(f"{label}.until: no scratch {until!r}")
                self.has_until = True
            raw = rep["bodies"] if "bodies" in rep else [rep["body"]]
            out.append(
                PreparedRepeat(
                    label,
                    int(rep["passes"]),
                    until,
                    [(str(a), str(b)) for a, b in rep.get("swap", [])],
                    [self.steps(body) for body in raw],
                )
            )
        return out

    def kernel(self, name: str, label: str) -> _KernelInfo:
        info = self.kernels.get(name)
        if info is None:
            gpu = self.gpu
            try:
                func = gpu.function(self.module, name)
            except CudaError:
                raise LaunchRejected(
                    f'{label}: no kernel {name!r} in the compiled source (declare it extern "C" __global__)'
                ) from None
            info = _KernelInfo(
                func,
                gpu.func_attr(func, F.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
                gpu.func_attr(func, F.CU_FUNC_ATTRIBUTE_NUM_REGS),
                gpu.func_attr(func, F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
            )
            self.kernels[name] = info
        return info

    def launch(self, launch: dict) -> PreparedLaunch:
        gpu, props = self.gpu, self.gpu.props
        i = self.count
        self.count += 1
        name = launch["kernel"]
        label = launch.get("label") or f"launches[{i}]"
        where = f"{label} ({name})"
        info = self.kernel(name, label)
        grid = tuple(int(v) for v in launch["grid"])
        block = tuple(int(v) for v in launch["block"])
        smem = int(launch.get("smem", 0))
        threads = block[0] * block[1] * block[2]
        if min(grid) < 1 or min(block) < 1:
            raise LaunchRejected(f"{where}: grid {grid} / block {block} has an axis below 1")
        if any(g > m for g, m in zip(grid, props.max_grid, strict=True)):
            raise LaunchRejected(f"{where}: grid {grid} exceeds the device limit {props.max_grid}")
        if any(b > m for b, m in zip(block, props.max_block, strict=True)):
            raise LaunchRejected(f"{where}: block {block} exceeds the device limit {props.max_block}")
        if threads > info.max_threads:
            raise LaunchRejected(
                f"{where}: {threads} threads per block, but this kernel allows at most "
                f"{info.max_threads} ({info.regs} registers per thread)"
            )
        static = info.static_smem
        if static + smem > props.max_smem_optin:
            raise LaunchRejected(
                f"{where}: {static} B static + {smem} B dynamic shared memory exceeds the "
                f"device's {props.max_smem_optin} B per block"
            )
        if smem + static > props.max_smem_per_block and smem > info.dynamic_smem:
            try:
                gpu.set_max_dynamic_smem(info.func, smem)
            except CudaError as exc:
                if exc.sticky:
                    raise
                raise LaunchRejected(f"{where}: {smem} B dynamic shared memory refused: {exc.name}") from None
            info.dynamic_smem = smem
        values: list[tuple[str, Any]] = []
        for j, arg in enumerate(launch["args"]):
            if arg["kind"] in ("buffer", "scratch", "tensor_map"):
                if arg["name"] not in self.seq.home:
                    raise LaunchRejected(f"{where}: no buffer or scratch {arg['name']!r}")
                if arg["kind"] == "tensor_map":
                    values.append(("tmap", (arg["name"], TensorMapGeometry.from_json(arg), j)))
                else:
                    values.append(("bind", arg["name"]))
            else:
                kind = ARG_KINDS[arg["dtype"]]
                value = arg["value"]
                values.append((kind, int(value) if kind in INTEGER_KINDS else float(value)))
        stream = int(launch.get("stream", 0))
        config = None
        if launch.get("cluster") is not None:
            config = self.cluster(launch, info, where, grid, block, smem, stream)  # type: ignore[arg-type]
        prepared = PreparedLaunch(
            name,
            info.func,
            grid,  # type: ignore[arg-type]
            block,  # type: ignore[arg-type]
            smem,
            stream,
            values,
            label,
            config,
            gpu.encode_tensor_map if any(k == "tmap" for k, _ in values) else None,
        )
        self.seq.launches.append(prepared)
        return prepared

    def cluster(
        self,
        launch: dict,
        info: _KernelInfo,
        where: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        smem: int,
        stream: int,
    ) -> Any:
        """The launch config of a cluster launch, once the driver says one cluster fits the device."""
        gpu = self.gpu
        cluster = tuple(int(v) for v in launch["cluster"])
        shape = "x".join(map(str, cluster))
        if not gpu.props.cluster_launch:
            raise LaunchRejected(f"{where}: this device cannot launch thread-block clusters")
        try:
            if launch.get("non_portable") and not info.non_portable:
                gpu.allow_non_portable_clusters(info.func)
                info.non_portable = True
            config = gpu.cluster_config(grid, block, smem, gpu.side_stream(stream), cluster)
            fits = gpu.max_active_clusters(info.func, config)
        except CudaError as exc:
            if exc.sticky:
                raise
            raise LaunchRejected(f"{where}: cluster {shape} refused by the driver ({exc.call}: {exc.name})") from None
        if fits < 1:
            threads = block[0] * block[1] * block[2]
            raise LaunchRejected(
                f"{where}: not one cluster of {shape} blocks fits this device ({threads} threads, "
                f"{info.static_smem + smem} B shared memory and {info.regs} registers per thread in each block)"
            )
        return config
