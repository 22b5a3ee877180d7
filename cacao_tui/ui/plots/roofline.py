"""The roofline of a profiled kernel: its arithmetic intensity and achieved throughput against the
device's memory and compute roofs.

From the NCU metrics we collect (ktt.ncu.CATALOGUE):
- work: FP32 flops = 2 × FFMA + FADD + FMUL thread instructions (predicated-on);
- traffic: DRAM bytes read + written;
- time: gpu__time_duration.
Intensity = flops / bytes; achieved = flops / time. The roofs, in order of preference:
1. NCU's own peaks, where the profile has them (``dram__bytes.sum.peak_sustained`` with
   ``dram__cycles_elapsed.avg.per_second``; the FFMA ``.peak_sustained`` with the SM clock and count);
2. the tuner's figures for this iteration (tune summary ``floor``): the device-to-device copy
   bandwidth it measured and the FP32 peak from SM count × boost clock × FP32 lanes per SM
   (ktt.peaks.peak_gflops; not when the problem's floor is against a tensor-core peak);
3. estimates from NCU alone: the achieved DRAM bandwidth divided by the DRAM throughput fraction,
   the achieved FP32 rate divided by the FMA pipe's busy fraction (rough when either is small).
Each roof says which it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cacao_tui.ui.plots.plot_view import Draw
from ktt.protocol import FloorReport, KernelProfile

FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
FADD = "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"
FMUL = "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
DURATION = "gpu__time_duration.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
NCU_DRAM_PEAK = "dram__bytes.sum.peak_sustained"  # bytes per DRAM cycle
NCU_DRAM_CLOCK = "dram__cycles_elapsed.avg.per_second"
NCU_FFMA_PEAK = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"  # per SM cycle, all SMs
NCU_SM_CLOCK = "sm__cycles_elapsed.avg.per_second"
FMA_PIPE_PCT = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"


@dataclass(frozen=True)
class Roofline:
    kernel: str
    flops: float | None
    bytes: float | None
    seconds: float | None
    bandwidth_gbs: float | None  # memory roof
    bandwidth_from: str
    peak_gflops: float | None  # compute roof
    peak_from: str

    @property
    def intensity(self) -> float | None:
        return self.flops / self.bytes if self.flops and self.bytes else None

    @property
    def achieved_gflops(self) -> float | None:
        return self.flops / self.seconds / 1e9 if self.flops and self.seconds else None

    @property
    def achieved_gbs(self) -> float | None:
        return self.bytes / self.seconds / 1e9 if self.bytes and self.seconds else None

    @property
    def ridge(self) -> float | None:
        """The intensity where the roofs meet (flop/byte)."""
        return self.peak_gflops / self.bandwidth_gbs if self.peak_gflops and self.bandwidth_gbs else None

    def roof_at(self, intensity: float) -> float | None:
        if not self.bandwidth_gbs or not self.peak_gflops:
            return None
        return min(self.peak_gflops, self.bandwidth_gbs * intensity)

    def bound(self) -> str:
        if self.intensity is None or self.ridge is None:
            return "unknown"
        return "memory roof" if self.intensity < self.ridge else "compute roof"

    def fraction_of_roof(self) -> float | None:
        roof = self.roof_at(self.intensity) if self.intensity else None
        return self.achieved_gflops / roof if roof and self.achieved_gflops else None

    def summary(self) -> str:
        if self.intensity is None or self.achieved_gflops is None:
            return f"{self.kernel}: no roofline (the profile lacks FP32 instruction counts, DRAM bytes or a duration)"
        parts = [
            f"{self.kernel}: {self.intensity:.3g} flop/B, {self.achieved_gflops:,.1f} GFLOP/s, "
            f"{self.achieved_gbs or 0:,.0f} GB/s DRAM"
        ]
        if self.ridge is not None:
            frac = self.fraction_of_roof()
            parts.append(f"under the {self.bound()} (ridge {self.ridge:.3g} flop/B)")
            if frac is not None:
                parts.append(f"at {frac:.0%} of it")
        return " · ".join(parts)

    def sources(self) -> str:
        bw = f"{self.bandwidth_gbs:,.0f} GB/s ({self.bandwidth_from})" if self.bandwidth_gbs else "unknown"
        pk = f"{self.peak_gflops:,.0f} GFLOP/s ({self.peak_from})" if self.peak_gflops else "unknown"
        return f"memory roof {bw} · FP32 roof {pk}"


def _values(kernel: KernelProfile) -> dict[str, float]:
    return {m.name: float(m.value) for m in kernel.metrics if isinstance(m.value, (int, float))}


def roofline_of(kernel: KernelProfile, floor: FloorReport | None = None) -> Roofline:
    v = _values(kernel)
    counts = [v.get(FFMA), v.get(FADD), v.get(FMUL)]
    flops = None if all(c is None for c in counts) else 2 * (counts[0] or 0) + (counts[1] or 0) + (counts[2] or 0)
    traffic = None if DRAM_READ not in v and DRAM_WRITE not in v else v.get(DRAM_READ, 0.0) + v.get(DRAM_WRITE, 0.0)
    ms = kernel.duration_ms if kernel.duration_ms is not None else v.get(DURATION)
    seconds = ms / 1e3 if ms else None

    bandwidth, bandwidth_from = None, "unknown"
    if NCU_DRAM_PEAK in v and NCU_DRAM_CLOCK in v:
        bandwidth, bandwidth_from = v[NCU_DRAM_PEAK] * v[NCU_DRAM_CLOCK] / 1e9, "NCU peak"
    elif floor is not None and floor.bandwidth_gbs:
        bandwidth, bandwidth_from = floor.bandwidth_gbs, "tuner: measured copy bandwidth"
    elif traffic and seconds and v.get(DRAM_PCT):
        bandwidth, bandwidth_from = traffic / seconds / 1e9 / (v[DRAM_PCT] / 100), "NCU: achieved / DRAM %"

    peak, peak_from = None, "unknown"
    if NCU_FFMA_PEAK in v and NCU_SM_CLOCK in v:
        peak, peak_from = 2 * v[NCU_FFMA_PEAK] * v[NCU_SM_CLOCK] / 1e9, "NCU peak"
    elif floor is not None and floor.peak_gflops and (floor.flops_dtype or "fp32") == "fp32":  # not a tensor-core peak
        peak, peak_from = floor.peak_gflops, "tuner: SMs × clock × FP32 lanes"
    elif flops and seconds and v.get(FMA_PIPE_PCT):
        peak, peak_from = flops / seconds / 1e9 / (v[FMA_PIPE_PCT] / 100), "NCU: achieved / FMA pipe %"
    return Roofline(kernel.kernel, flops or None, traffic or None, seconds, bandwidth, bandwidth_from, peak, peak_from)


def roofline_draw(r: Roofline) -> Draw | None:
    """A log-log roofline with the kernel's point; None when there is nothing to place."""
    if r.intensity is None or r.achieved_gflops is None:
        return None
    ai, perf = r.intensity, r.achieved_gflops
    ridge = r.ridge
    lo = min(ai, ridge or ai) / 10
    hi = max(ai, ridge or ai) * 10

    def draw(plt: Any, width: int, height: int) -> None:
        plt.xscale("log")
        plt.yscale("log")
        if r.bandwidth_gbs and r.peak_gflops and ridge:
            plt.plot([lo, ridge], [r.bandwidth_gbs * lo, r.peak_gflops], marker="braille", color="cyan", label="memory")
            plt.plot([ridge, hi], [r.peak_gflops, r.peak_gflops], marker="braille", color="magenta", label="FP32")
        elif r.bandwidth_gbs:
            plt.plot([lo, hi], [r.bandwidth_gbs * lo, r.bandwidth_gbs * hi], marker="braille", color="cyan",
                     label="memory")  # fmt: skip
        plt.scatter([ai], [perf], marker="●", color="yellow", label=r.kernel[:18])
        plt.title("roofline: GFLOP/s vs flop/byte (log-log)")
        plt.xlabel("arithmetic intensity (flop/B)")

    return draw
