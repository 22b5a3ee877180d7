"""``ktt device``: the device table of one GPU — its limits, its measured copy bandwidth, its peaks.

Read once per run by the agent and shown in every prompt, so a model plans for the GPU at
hand and not for the one it read about most. The limits are the driver's attributes; the
copy bandwidth is measured (a device-to-device copy, best of five, read plus written bytes,
under the machine-wide GPU lock); the peak arithmetic rates are derived: SM count times the
maximum SM clock times the architecture's dense rate per SM and cycle (ktt.peaks, the table the
tuner's floor reads).
They are upper bounds: sustained clocks under load are lower.
"""

from __future__ import annotations

import time

from ktt import peaks
from ktt.gpu_catalog import rate_line
from ktt.protocol import DeviceReport, PeakRate


def peak_rates(arch: str, sm_count: int, clock_mhz: float) -> list[PeakRate]:
    """The derived dense peaks, in TFLOP/s (TOP/s for int8), from ktt.peaks' one table of rates."""
    return [PeakRate(dtype=d, unit=u, tflops=t) for d, u, t in peaks.peak_rates(arch, sm_count, clock_mhz)]


def describe(ordinal: int) -> DeviceReport:
    """Query and measure device ``ordinal`` (needs the GPU: call it under the GPU lock)."""
    from ktt.device import A, Gpu
    from ktt.timing import measure_bandwidth

    gpu = Gpu(ordinal)
    p = gpu.props

    def attr(name: str) -> int | None:
        try:
            return gpu.attr(getattr(A, name))
        except Exception:
            return None

    clock_mhz = p.clock_khz / 1e3
    mem_khz, bus = attr("CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE"), attr("CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH")
    theoretical = 2 * mem_khz * 1e3 * bus / 8 / 1e9 if mem_khz and bus else None
    return DeviceReport(
        name=p.name,
        arch=p.arch,
        ordinal=ordinal,
        sm_count=p.sm_count,
        clock_mhz=clock_mhz,
        memory_clock_mhz=mem_khz / 1e3 if mem_khz else None,
        memory_bus_bits=bus,
        total_memory_bytes=p.total_memory,
        l2_bytes=p.l2_bytes,
        smem_per_block=p.max_smem_per_block,
        smem_per_block_optin=p.max_smem_optin,
        smem_per_sm=attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR") or 0,
        regs_per_block=attr("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK") or 0,
        regs_per_sm=attr("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR") or 0,
        max_threads_per_block=p.max_threads_per_block,
        max_threads_per_sm=attr("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR") or 0,
        max_blocks_per_sm=attr("CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR"),
        warp_size=attr("CU_DEVICE_ATTRIBUTE_WARP_SIZE") or 32,
        copy_bandwidth_gbs=round(measure_bandwidth(gpu), 1),
        theoretical_bandwidth_gbs=round(theoretical, 1) if theoretical else None,
        peaks=peak_rates(p.arch, p.sm_count, clock_mhz),
        measured_at=time.time(),
    )


def device_lines(d: DeviceReport) -> list[str]:
    """The table as a prompt or a person reads it, one fact per line."""
    kib = 1024
    lines = [
        f"GPU: {d.name} ({d.arch}), {d.sm_count} SMs at up to {d.clock_mhz:.0f} MHz"
        + (f", {d.total_memory_bytes / 2**30:.0f} GiB" if d.total_memory_bytes else ""),
        f"per SM: {d.max_threads_per_sm} threads, "
        + (f"{d.max_blocks_per_sm} blocks, " if d.max_blocks_per_sm else "")
        + f"{d.regs_per_sm:,} registers, {d.smem_per_sm / kib:.0f} KiB shared memory",
        f"per block: {d.max_threads_per_block} threads, {d.regs_per_block:,} registers, shared memory "
        f"{d.smem_per_block / kib:.0f} KiB ({d.smem_per_block_optin / kib:.0f} KiB with the opt-in attribute)",
        f"L2: {d.l2_bytes / 2**20:.0f} MiB",
    ]
    bandwidth = []
    if d.copy_bandwidth_gbs:
        bandwidth.append(f"{d.copy_bandwidth_gbs:,.0f} GB/s measured (device-to-device copy)")
    if d.theoretical_bandwidth_gbs:
        bandwidth.append(f"{d.theoretical_bandwidth_gbs:,.0f} GB/s theoretical")
    if bandwidth:
        lines.append("memory bandwidth: " + "; ".join(bandwidth))
    if d.peaks:
        rates = "; ".join(f"{p.dtype} {p.unit} {p.tflops:,.1f}" for p in d.peaks)
        lines.append(f"peak dense TFLOP/s (derived from SMs x clock): {rates}")
    issue = rate_line(d.arch, d.sm_count, d.clock_mhz)
    if issue:
        lines.append(issue)
    if d.note:
        lines.append(d.note)
    return lines
