"""A profile as a diagnosis: where the time goes, condensed to the two leading bottlenecks.

From one kernel's Nsight Compute metrics (ktt.ncu's catalogue), its rule findings and its
source hotspots: the warp stall reasons ranked by their share of the stall cycles, the
occupancy limiter (the launch limit that allows the fewest blocks per SM), and candidate
bottlenecks, each with its evidence and a weight: Nsight Compute's own "Estimated Speedup"
where a rule gives one, else a heuristic (half the stall share of a stall reason; 30 for a
unit at its throughput limit; 10 for other symptoms). The two of largest weight, about
different things, are the diagnosis. The heuristic weights are judgement, not measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

from ktt.protocol import Bottleneck, Diagnosis, KernelProfile, Metric, StallShare

STALL_PREFIX = "smsp__average_warps_issue_stalled_"
NOT_STALLS = ("not_selected", "selected")  # eligible warps waiting their turn: no bottleneck
# What a stall reason means, for the evidence line.
STALL_MEANING = {
    "long_scoreboard": "waiting on global/local memory (L1TEX) results",
    "short_scoreboard": "waiting on shared memory or special-function results",
    "barrier": "waiting at __syncthreads()",
    "mio_throttle": "the memory input/output queue (shared memory, special functions) is full",
    "lg_throttle": "the local/global memory queue is full (too many memory instructions)",
    "math_pipe_throttle": "a math pipe is saturated",
    "wait": "fixed-latency dependencies",
    "no_instruction": "instruction cache misses or branch targets",
    "membar": "memory barriers",
    "dispatch_stall": "the dispatcher stalled",
    "branch_resolving": "branch targets being resolved",
}
LIMITS = {
    "launch__occupancy_limit_registers": "registers",
    "launch__occupancy_limit_shared_mem": "shared memory",
    "launch__occupancy_limit_warps": "warps (block size)",
    "launch__occupancy_limit_blocks": "blocks per SM",
}


@dataclass(frozen=True)
class _Values:
    by_name: dict[str, Metric]

    def get(self, name: str) -> float | None:
        m = self.by_name.get(name)
        return float(m.value) if m is not None and isinstance(m.value, int | float) else None


def stall_shares(metrics: list[Metric]) -> list[StallShare]:
    """Stall reasons by their share of all stall cycles per issued instruction, largest first."""
    raw: dict[str, float] = {}
    for m in metrics:
        if m.name.startswith(STALL_PREFIX) and isinstance(m.value, int | float):
            reason = m.name[len(STALL_PREFIX) :].split("_per_issue")[0]
            if reason not in NOT_STALLS and m.value > 0:
                raw[reason] = float(m.value)
    total = sum(raw.values())
    if total <= 0:
        return []
    shares = [StallShare(reason=r, share=round(v / total, 4), cycles=round(v, 4)) for r, v in raw.items()]
    return sorted(shares, key=lambda s: -s.share)


def occupancy_limiter(metrics: list[Metric]) -> str | None:
    v = _Values({m.name: m for m in metrics})
    limits = {label: v.get(name) for name, label in LIMITS.items()}
    known = {k: x for k, x in limits.items() if x is not None}
    return min(known, key=lambda k: known[k]) if known else None


def diagnose(profile: KernelProfile) -> Diagnosis:
    v = _Values({m.name: m for m in profile.metrics})
    stalls = stall_shares(profile.metrics)
    limiter = occupancy_limiter(profile.metrics)
    achieved = v.get("sm__warps_active.avg.pct_of_peak_sustained_active")
    theoretical = v.get("sm__maximum_warps_per_active_cycle_pct")
    candidates: list[Bottleneck] = []

    def add(name: str, evidence: str, weight: float, source: str = "metrics", estimate: float | None = None) -> None:
        candidates.append(
            Bottleneck(name=name, evidence=evidence, estimated_speedup_pct=estimate, weight=weight, source=source)
        )

    dram = v.get("dram__throughput.avg.pct_of_peak_sustained_elapsed")
    memory = v.get("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
    compute = v.get("sm__throughput.avg.pct_of_peak_sustained_elapsed")
    if dram is not None and dram >= 60:
        add("DRAM bandwidth", f"DRAM at {dram:.0f}% of peak: only less traffic helps (reuse, smaller types, fusion)",
            30.0)  # fmt: skip
    elif memory is not None and memory >= 60 and (compute is None or memory >= compute):
        add("memory pipeline throughput", f"memory units at {memory:.0f}% of peak (L1/L2/shared)", 30.0)
    if compute is not None and compute >= 60 and (memory is None or compute > memory):
        add("compute throughput", f"SM throughput at {compute:.0f}% of peak: fewer or cheaper instructions", 30.0)
    for s in stalls[:3]:
        if s.share >= 0.15:
            meaning = STALL_MEANING.get(s.reason, "")
            add(f"{s.reason.replace('_', ' ')} stalls",
                f"{s.share:.0%} of stall cycles ({s.cycles:.2f} cycles per issued instruction)"
                + (f": {meaning}" if meaning else ""), s.share * 50)  # fmt: skip
    if achieved is not None and achieved < 40 and limiter is not None:
        add("low occupancy", f"{achieved:.0f}% of warps active (theoretical {theoretical or 0:.0f}%), "
            f"limited by {limiter}", (40 - achieved) / 2)  # fmt: skip
    ld = v.get("l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio")
    if ld is not None and ld > 4.5:
        add("uncoalesced global loads", f"{ld:.1f} sectors per load request (4 when a warp reads 128 contiguous "
            "bytes)", 10.0)  # fmt: skip
    conflicts = (v.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum") or 0) + (
        v.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum") or 0
    )
    if conflicts > 0:
        add("shared memory bank conflicts", f"{conflicts:,.0f} bank conflicts", 10.0)
    spills = (v.get("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum") or 0) + (
        v.get("l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum") or 0
    )
    if spills > 0:
        add("local memory (spills)", f"{spills:,.0f} bytes of local memory traffic", 10.0)
    uniform = v.get("smsp__sass_average_branch_targets_threads_uniform.pct")
    if uniform is not None and uniform < 90:
        add("divergence", f"{uniform:.0f}% of branch targets uniform across the warp", 10.0)
    for f in profile.findings:
        if f.speedup_pct is not None and f.speedup_pct >= 1:
            add(f.rule, f.text, f.speedup_pct, source="ncu rule", estimate=f.speedup_pct)
    if profile.hotspots:
        h = profile.hotspots[0]
        for c in candidates:
            if c.source == "metrics" and "stalls" in c.name and h.top_stall and h.top_stall in c.name.replace(" ", "_"):
                c.evidence += f"; most at kernels.cu:{h.line}"

    ranked = sorted(candidates, key=lambda b: -b.weight)
    leading: list[Bottleneck] = []
    for b in ranked:  # a rule and the metric it explains are one bottleneck: keep two different ones
        if all(_key(b) != _key(c) for c in leading):
            leading.append(b)
        if len(leading) == 2:
            break
    return Diagnosis(
        bottlenecks=leading,
        stalls=stalls[:5],
        occupancy_limiter=limiter,
        achieved_occupancy_pct=achieved,
        theoretical_occupancy_pct=theoretical,
        findings=len(profile.findings),
    )


def _key(b: Bottleneck) -> str:
    text = f"{b.name} {b.evidence}".lower()
    for word in ("coalesc", "bank", "occupancy", "spill", "diverg", "dram", "scoreboard", "barrier", "throttle"):
        if word in text:
            return word
    return b.name.lower()


def diagnosis_lines(d: Diagnosis, kernel: str | None = None) -> list[str]:
    """The diagnosis as the prompts show it."""
    head = f"kernel {kernel}: " if kernel else ""
    lines = []
    for i, b in enumerate(d.bottlenecks, 1):
        pct = b.estimated_speedup_pct
        est = f" (Nsight Compute estimates {pct:.0f}% faster if fixed)" if pct else ""
        lines.append(f"{head}bottleneck {i}: {b.name} — {b.evidence}{est}")
    if not d.bottlenecks:
        lines.append(f"{head}no dominant bottleneck in the metrics")
    if d.stalls:
        lines.append(f"{head}stall reasons: " + ", ".join(f"{s.reason} {s.share:.0%}" for s in d.stalls))
    if d.occupancy_limiter:
        occ = (
            f"{d.achieved_occupancy_pct:.0f}% achieved, {d.theoretical_occupancy_pct:.0f}% theoretical; "
            if d.achieved_occupancy_pct is not None and d.theoretical_occupancy_pct is not None
            else ""
        )
        lines.append(f"{head}occupancy: {occ}limited by {d.occupancy_limiter}")
    return lines
