"""The GPUs users run, by their datasheets: what a prompt says of the target when nothing is measured.

A run on a GPU measures its device table (``ktt device``). A dry run measures nothing, yet the
model still writes for a GPU: the one named by ``--target``, else the GPU of the problem's
compute capability in this table (sm_90: the H200). ``ktt check`` reads the SM count from here
too (the ``SM_COUNT`` symbol, ktt.target) when no GPU is present.

Figures are the vendors' published ones (boost clock, memory bandwidth, L2, shared memory and
registers per SM); the per-SM issue rates are the CUDA programming guide's arithmetic
throughput table (results per clock per SM) and ktt.peaks' tensor-core rates. GeForce parts run
FP16/BF16 tensor math with FP32 accumulation at half the listed rate.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ktt import peaks
from ktt.protocol import DeviceReport, PeakRate

KIB = 1024
MIB = 1024 * 1024


@dataclass(frozen=True)
class IssueRates:
    """Results per clock per SM (an FMA counts once) of one architecture."""

    fp32: int
    fp64: int
    int32: int  # 32-bit integer add / multiply-add
    sfu: int  # the special-function unit (MUFU): rcp, rsqrt, sqrt.approx, ex2, lg2, sin, cos
    tensor_fp16: int | None  # dense FP16/BF16 tensor-core FMAs per clock per SM (GeForce: FP16 accumulation)


ISSUE_RATES: dict[str, IssueRates] = {
    "sm_80": IssueRates(64, 32, 64, 16, 1024),
    "sm_86": IssueRates(128, 2, 64, 16, 512),
    "sm_89": IssueRates(128, 2, 64, 16, 512),
    "sm_90": IssueRates(128, 64, 64, 16, 2048),
    "sm_100": IssueRates(128, 64, 64, 16, 4096),
    "sm_120": IssueRates(128, 2, 64, 16, 512),
}


def issue_rates(arch: str) -> IssueRates | None:
    return ISSUE_RATES.get(arch.rstrip("af"))


@dataclass(frozen=True)
class GpuSpec:
    key: str  # what --target takes
    name: str
    arch: str
    sm_count: int
    boost_mhz: int
    memory_gib: int
    memory_kind: str
    bandwidth_gbs: float  # DRAM, the datasheet's figure
    l2_bytes: int
    smem_per_sm: int
    smem_per_block_optin: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    aliases: tuple[str, ...] = ()
    regs_per_sm: int = 65536

    def matches(self, text: str) -> bool:
        words = _norm(text)
        return any(_norm(a) == words or re.search(rf"(^| ){re.escape(_norm(a))}( |$)", words)
                   for a in (self.key, *self.aliases))  # fmt: skip


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


CATALOG: tuple[GpuSpec, ...] = (
    # The H200's L2 as its device attribute reports it (60 MiB, measured 2026-12-02), not the H100's 50.
    GpuSpec("H200", "NVIDIA H200 SXM", "sm_90", 132, 1980, 141, "HBM3e", 4800, 60 * MIB, 228 * KIB, 227 * KIB,
            2048, 32, aliases=("H200 SXM", "NVIDIA H200")),
    GpuSpec("H100-SXM", "NVIDIA H100 SXM", "sm_90", 132, 1980, 80, "HBM3", 3350, 50 * MIB, 228 * KIB, 227 * KIB,
            2048, 32, aliases=("H100 SXM", "H100 SXM5", "H100 80GB HBM3", "H100")),
    GpuSpec("H100-PCIe", "NVIDIA H100 PCIe", "sm_90", 114, 1755, 80, "HBM2e", 2000, 50 * MIB, 228 * KIB, 227 * KIB,
            2048, 32, aliases=("H100 PCIe",)),
    GpuSpec("A100", "NVIDIA A100 SXM 80GB", "sm_80", 108, 1410, 80, "HBM2e", 2039, 40 * MIB, 164 * KIB, 163 * KIB,
            2048, 32, aliases=("A100 SXM", "A100 80GB", "A100-SXM4-80GB", "A100 PCIe")),
    GpuSpec("L40S", "NVIDIA L40S", "sm_89", 142, 2520, 48, "GDDR6", 864, 96 * MIB, 100 * KIB, 99 * KIB,
            1536, 24, aliases=("L40S",)),
    GpuSpec("RTX4090", "NVIDIA GeForce RTX 4090", "sm_89", 128, 2520, 24, "GDDR6X", 1008, 72 * MIB, 100 * KIB,
            99 * KIB, 1536, 24, aliases=("RTX 4090", "GeForce RTX 4090", "4090")),
    GpuSpec("RTX5090", "NVIDIA GeForce RTX 5090", "sm_120", 170, 2407, 32, "GDDR7", 1792, 96 * MIB, 128 * KIB,
            99 * KIB, 1536, 32, aliases=("RTX 5090", "GeForce RTX 5090", "5090")),
    GpuSpec("B200", "NVIDIA B200", "sm_100", 148, 1965, 180, "HBM3e", 8000, 126 * MIB, 228 * KIB, 227 * KIB,
            2048, 32, aliases=("B200",)),
)  # fmt: skip
# The GPU a compute capability means when nothing else names one (the parts users run).
DEFAULT_FOR_ARCH = {"sm_90": "H200", "sm_80": "A100", "sm_89": "L40S", "sm_100": "B200", "sm_120": "RTX5090"}


def names() -> list[str]:
    return [g.key for g in CATALOG]


@functools.lru_cache(maxsize=256)
def find(text: str | None) -> GpuSpec | None:
    """The table's entry for a name (``--target``, a driver's device name, problem.yaml's gpu.name);
    remembered per name (every prompt of a run asks for its target's entry)."""
    if not text or not text.strip():
        return None
    exact = [g for g in CATALOG if _norm(g.key) == _norm(text) or _norm(g.name) == _norm(text)]
    if exact:
        return exact[0]
    for g in CATALOG:
        if g.matches(text):
            return g
    return None


def for_arch(arch: str | None) -> GpuSpec | None:
    """The GPU a compute capability stands for (sm_90 / sm_90a: the H200), or None."""
    if not arch:
        return None
    key = DEFAULT_FOR_ARCH.get(arch.rstrip("af"))
    return find(key) if key else None


def datasheet_report(spec: GpuSpec, note: str | None = None) -> DeviceReport:
    """The table's figures as a device table (nothing measured: ``copy_bandwidth_gbs`` is None)."""
    return DeviceReport(
        name=spec.name,
        arch=spec.arch,
        sm_count=spec.sm_count,
        clock_mhz=float(spec.boost_mhz),
        total_memory_bytes=spec.memory_gib * 2**30,
        l2_bytes=spec.l2_bytes,
        smem_per_block=48 * KIB,
        smem_per_block_optin=spec.smem_per_block_optin,
        smem_per_sm=spec.smem_per_sm,
        regs_per_block=65536,
        regs_per_sm=spec.regs_per_sm,
        max_threads_per_block=1024,
        max_threads_per_sm=spec.max_threads_per_sm,
        max_blocks_per_sm=spec.max_blocks_per_sm,
        theoretical_bandwidth_gbs=spec.bandwidth_gbs,
        peaks=[
            PeakRate(dtype=d, unit=u, tflops=t)
            for d, u, t in peaks.peak_rates(spec.arch, spec.sm_count, float(spec.boost_mhz))
        ],
        note=note or f"datasheet figures of the {spec.name} (built-in table; nothing measured)",
    )


def rate_line(arch: str, sm_count: int, clock_mhz: float) -> str | None:
    """The per-SM issue rates and what they make for the whole GPU, as one prompt line."""
    r = issue_rates(arch)
    if r is None:
        return None
    chip = sm_count * clock_mhz * 1e6

    def per_s(n: int) -> str:
        return f"{n * chip / 1e12:,.1f} T/s"

    parts = [
        f"FP32 FMA {r.fp32} ({per_s(r.fp32)})",
        f"FP64 FMA {r.fp64} ({per_s(r.fp64)})",
        f"INT32 add/IMAD {r.int32}",
        f"SFU/MUFU (rcp, rsqrt, sqrt.approx, ex2, lg2, sin, cos) {r.sfu} ({per_s(r.sfu)})",
    ]
    if r.tensor_fp16:
        parts.append(f"FP16/BF16 tensor-core FMA {r.tensor_fp16:,} dense ({per_s(r.tensor_fp16)})")
    return "issue rates per SM per clock (results; whole GPU at the boost clock): " + "; ".join(parts)
