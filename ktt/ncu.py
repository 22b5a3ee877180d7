"""Nsight Compute: which metrics we ask for, how to call ncu, and how to read its CSV.

The metric catalogue covers speed of light, the memory hierarchy (with sectors per request,
the coalescing measure), occupancy and its limiters, launch statistics, the pipes (FMA and
tensor), local-memory traffic (register spills), branch uniformity (divergence) and warp
stall reasons, and Hopper's own (sm_90): wgmma next to mma.sync on the tensor pipe, TMA loads
and stores, the wgmma stall. Each entry has a label and the unit people read; the names were
checked against ``ncu --query-metrics`` of Nsight Compute 2025.3 on an H200 (sm_90); a metric
an older GPU lacks is dropped from the run (ktt.profile). ``parse_raw_csv`` reads the output of
``ncu --import REPORT --csv --page raw --print-units base`` (or of a direct run with those
flags) into one ``KernelProfile`` per profiled launch; it is pure text processing, usable
in-process and tested on recorded output.
"""

from __future__ import annotations

import csv
import glob
import io
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ktt.protocol import KernelProfile, Metric, RuleFinding, SourceHotspot


@dataclass(frozen=True)
class MetricSpec:
    name: str
    label: str
    section: str
    unit: str = ""  # shown instead of ncu's base unit (which is empty or terse for ratios and counts)


CATALOGUE: tuple[MetricSpec, ...] = (
    # speed of light
    MetricSpec("gpu__time_duration.sum", "duration", "speed_of_light"),
    MetricSpec("sm__throughput.avg.pct_of_peak_sustained_elapsed", "compute (SM) throughput", "speed_of_light"),
    MetricSpec(
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "memory throughput", "speed_of_light"
    ),
    MetricSpec("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM throughput", "speed_of_light"),
    MetricSpec("sm__cycles_elapsed.avg.per_second", "SM frequency", "speed_of_light"),
    MetricSpec("gpc__cycles_elapsed.max", "elapsed cycles", "speed_of_light"),
    # memory hierarchy
    MetricSpec("dram__bytes_read.sum", "DRAM bytes read", "memory"),
    MetricSpec("dram__bytes_write.sum", "DRAM bytes written", "memory"),
    MetricSpec("lts__t_sector_hit_rate.pct", "L2 hit rate", "memory"),
    MetricSpec("l1tex__t_sector_hit_rate.pct", "L1/TEX hit rate", "memory"),
    MetricSpec("lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 throughput", "memory"),
    MetricSpec("l1tex__throughput.avg.pct_of_peak_sustained_active", "L1/TEX throughput", "memory"),
    MetricSpec("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "shared load bank conflicts", "memory"),
    MetricSpec("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "shared store bank conflicts", "memory"),
    MetricSpec("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct", "global load efficiency", "memory"),
    MetricSpec("smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct", "global store efficiency", "memory"),
    MetricSpec(
        "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio",
        "global load sectors per request",
        "memory",
        "sectors (4 = coalesced 4-byte loads)",
    ),
    MetricSpec(
        "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio",
        "global store sectors per request",
        "memory",
        "sectors (4 = coalesced 4-byte stores)",
    ),
    # occupancy
    MetricSpec("sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy", "occupancy"),
    MetricSpec("sm__maximum_warps_per_active_cycle_pct", "theoretical occupancy", "occupancy"),
    MetricSpec("launch__occupancy_limit_registers", "block limit: registers", "occupancy"),
    MetricSpec("launch__occupancy_limit_shared_mem", "block limit: shared memory", "occupancy"),
    MetricSpec("launch__occupancy_limit_warps", "block limit: warps", "occupancy"),
    MetricSpec("launch__occupancy_limit_blocks", "block limit: blocks per SM", "occupancy"),
    # launch statistics
    MetricSpec("launch__registers_per_thread", "registers per thread", "launch"),
    MetricSpec("launch__block_size", "block size", "launch"),
    MetricSpec("launch__grid_size", "grid size", "launch"),
    MetricSpec("launch__shared_mem_per_block_static", "static shared memory per block", "launch"),
    MetricSpec("launch__shared_mem_per_block_dynamic", "dynamic shared memory per block", "launch"),
    MetricSpec("launch__waves_per_multiprocessor", "waves per SM", "launch"),
    # compute
    MetricSpec("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue slots busy", "compute"),
    MetricSpec("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "FMA pipe busy", "compute"),
    MetricSpec("smsp__inst_executed.sum", "instructions executed", "compute"),
    MetricSpec("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "FP32 FMA thread instructions", "compute"),
    MetricSpec("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", "FP32 add thread instructions", "compute"),
    MetricSpec("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", "FP32 mul thread instructions", "compute"),
    MetricSpec("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "tensor pipe busy", "compute", "%"),
    MetricSpec("sm__inst_executed_pipe_tensor.sum", "tensor pipe warp instructions", "compute", "warp instructions"),
    # Hopper (sm_90): warpgroup MMA (wgmma: HGMMA for fp16/bf16, QGMMA for fp8) next to mma.sync (HMMA)
    MetricSpec(
        "sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active",
        "tensor pipe busy with fp16/bf16/fp8 MMA (mma.sync and wgmma, sm_90)",
        "compute",
        "%",
    ),
    MetricSpec(
        "sm__inst_executed_pipe_tensor_op_gmma.sum", "wgmma instructions (sm_90)", "compute", "warp instructions"
    ),
    MetricSpec(
        "sm__inst_executed_pipe_tensor_op_hmma.sum", "mma.sync instructions (HMMA)", "compute", "warp instructions"
    ),
    # Hopper (sm_90): the tensor memory accelerator, one instruction per box copied
    MetricSpec("smsp__inst_executed_op_tma_ld.sum", "TMA loads (sm_90)", "memory", "instructions, one box each"),
    MetricSpec("smsp__inst_executed_op_tma_st.sum", "TMA stores (sm_90)", "memory", "instructions, one box each"),
    # local memory: register spills (and local arrays indexed at run time)
    MetricSpec("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "local memory loaded (spills)", "local_memory", "bytes"),
    MetricSpec("l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum", "local memory stored (spills)", "local_memory", "bytes"),
    MetricSpec("smsp__inst_executed_op_local_ld.sum", "local load instructions", "local_memory", "warp instructions"),
    MetricSpec("smsp__inst_executed_op_local_st.sum", "local store instructions", "local_memory", "warp instructions"),
    # branch uniformity (divergence)
    MetricSpec("smsp__sass_average_branch_targets_threads_uniform.pct", "branch uniformity", "divergence", "%"),
    MetricSpec("smsp__sass_branch_targets_threads_divergent.sum", "divergent branches", "divergence", "branches"),
    MetricSpec(
        "smsp__thread_inst_executed_per_inst_executed.ratio",
        "active threads per warp instruction",
        "divergence",
        "threads of 32",
    ),
    # warp stall reasons (cycles per issued instruction)
    *(
        MetricSpec(
            f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio",
            f"stall: {r.replace('_', ' ')}",
            "warp_stalls",
            "cycles per issued instruction",
        )
        for r in (
            "long_scoreboard",
            "short_scoreboard",
            "barrier",
            "mio_throttle",
            "lg_throttle",
            "math_pipe_throttle",
            "wait",
            "not_selected",
            "no_instruction",
            "membar",
            "dispatch_stall",
            "branch_resolving",
        )
    ),
    MetricSpec(
        "smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio",
        "stall: gmma (waiting for wgmma, sm_90)",
        "warp_stalls",
        "cycles per issued instruction",
    ),
)
LABELS = {m.name: m for m in CATALOGUE}
DURATION = "gpu__time_duration.sum"
COMPUTE_SOL = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_SOL = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
LATENCY_BOUND_BELOW = 60.0  # % of peak: neither unit is busy enough to be the limit

_ID_COLUMNS = {
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    "Section Name",
    "Function Name",
    "Demangled Name",
    "Mangled Name",
    "Estimated Speedup",
    "Estimated Speedup Type",
}


def find_ncu() -> str | None:
    path = shutil.which("ncu")
    if path:
        return path
    candidates = [
        os.environ.get("NCU"),
        "/usr/local/cuda/bin/ncu",
        *sorted(glob.glob("/usr/local/cuda-*/bin/ncu")),
        *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu")),
    ]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def permission_error(text: str) -> bool:
    return "ERR_NVGPUCTRPERM" in text or "permission to access NVIDIA GPU Performance Counters" in text


_UNKNOWN_METRIC = re.compile(
    r"(?:Failed to find metric|metric[s]? not found|Unknown metric|invalid metric)[^\w]*([\w.]+)", re.IGNORECASE
)


def unknown_metrics(text: str) -> list[str]:
    """Metric names ncu rejected, read from its error output."""
    return sorted({m.group(1) for m in _UNKNOWN_METRIC.finditer(text)})


def _number(text: str) -> float | str | None:
    t = text.strip()
    if t in ("", "n/a", "N/A"):
        return None
    try:
        return float(t.replace(",", ""))
    except ValueError:
        return t


def kernel_base_name(name: str) -> str:
    """'void sgemm<8>(float const*, ...)' or 'sgemm(float*)' -> 'sgemm'."""
    head = name.split("(", 1)[0].strip()
    head = re.sub(r"<.*>$", "", head)
    return head.split()[-1] if head else name


def _convert(name: str, value: float | str | None, unit: str) -> tuple[float | str | None, str]:
    """Base units to the ones people read: ns -> ms for durations, Hz -> GHz, bytes stay bytes."""
    if isinstance(value, float):
        u = unit.lower()
        if u in ("nsecond", "ns"):
            return value / 1e6, "ms"
        if u in ("usecond", "us"):
            return value / 1e3, "ms"
        if u in ("msecond", "ms"):
            return value, "ms"
        if u in ("second", "s") and "time" in name:
            return value * 1e3, "ms"
        if u in ("hz", "cycle/second", "cycle/nsecond") and "per_second" in name:
            return (value / 1e9 if u != "cycle/nsecond" else value), "GHz"
    return value, unit


def parse_raw_csv(text: str, all_metrics: bool = False) -> list[KernelProfile]:
    """``ncu --csv --page raw`` output -> one KernelProfile per profiled launch, in launch order.

    The raw page also carries device attributes and every rollup of each metric; by default
    only the catalogue's metrics are kept, in catalogue order (``all_metrics`` keeps all).
    """
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if len(lines) < 2:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header = rows[0]
    # The second row holds units (its ID cell is empty); data rows start with the launch ID.
    if len(rows) > 1 and rows[1] and rows[1][0] == "":
        units, body = rows[1], rows[2:]
    else:
        units, body = [""] * len(header), rows[1:]
    profiles: list[KernelProfile] = []
    col = {h: i for i, h in enumerate(header)}
    for index, row in enumerate(body):
        if len(row) < len(header):
            continue
        kernel = kernel_base_name(row[col["Kernel Name"]]) if "Kernel Name" in col else f"kernel{index}"
        metrics: list[Metric] = []
        for i, name in enumerate(header):
            if name in _ID_COLUMNS or not name:
                continue
            value, unit = _convert(name, _number(row[i]), units[i] if i < len(units) else "")
            spec = LABELS.get(name)
            if spec is not None and spec.unit:
                unit = spec.unit
            metrics.append(
                Metric(
                    name=name,
                    label=spec.label if spec else name,
                    section=spec.section if spec else "other",
                    value=value,
                    unit=unit,
                )
            )
        by_name = {m.name: m for m in metrics}
        if not all_metrics:
            metrics = [by_name[m.name] for m in CATALOGUE if m.name in by_name]
        duration = by_name.get(DURATION)
        profiles.append(
            KernelProfile(
                kernel=kernel,
                launch_index=index,
                metrics=metrics,
                roofline=roofline_class(by_name),  # type: ignore[arg-type]
                duration_ms=duration.value if duration and isinstance(duration.value, float) else None,
            )
        )
    return profiles


def roofline_class(metrics: dict[str, Metric]) -> str:
    """memory-, compute- or latency-bound, from the two speed-of-light percentages."""

    def pct(name: str) -> float | None:
        m = metrics.get(name)
        return m.value if m is not None and isinstance(m.value, float) else None

    compute = pct(COMPUTE_SOL)
    memory = pct(MEMORY_SOL)
    if memory is None:
        memory = pct("dram__throughput.avg.pct_of_peak_sustained_elapsed")
    if compute is None and memory is None:
        return "unknown"
    c, m = compute or 0.0, memory or 0.0
    if max(c, m) < LATENCY_BOUND_BELOW:
        return "latency-bound"
    return "memory-bound" if m >= c else "compute-bound"


def profile_command(
    ncu: str, app: list[str], kernels: list[str], skip: int, count: int, metrics: list[str], export: str,
    sections: tuple[str, ...] = (),
) -> list[str]:
    """ncu's command line; with ``sections``, their rules run too (the findings, the source counters)."""
    names = "|".join(re.escape(k) for k in sorted(set(kernels)))
    extra = [arg for name in sections for arg in ("--section", name)]
    if sections:
        extra += ["--import-source", "yes"]
    return [
        ncu,
        "--target-processes",
        "all",
        "--kernel-name",
        f"regex:^({names})$",
        "--launch-skip",
        str(skip),
        "--launch-count",
        str(count),
        "--clock-control",
        "none",
        *extra,
        "--metrics",
        ",".join(metrics),
        "--export",
        export,
        "--force-overwrite",
        *app,
    ]


def import_command(ncu: str, report: str) -> list[str]:
    return [ncu, "--import", report, "--csv", "--page", "raw", "--print-units", "base"]


# -- the guided analysis and the source view ---------------------------------------------

# Sections whose rules give the findings ("Estimated Speedup") and the source counters.
RULE_SECTIONS = (
    "SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats", "SchedulerStats",
    "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis", "SourceCounters",
)  # fmt: skip
MAX_FINDINGS = 8
MAX_HOTSPOTS = 5
FINDING_CHARS = 400


def _csv_rows(text: str) -> list[list[str]]:
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    return list(csv.reader(io.StringIO("\n".join(lines))))


def parse_details_csv(text: str) -> list[list[RuleFinding]]:
    """``ncu --import R --csv --page details``: each profiled launch's rule results, in launch order.

    Rows carrying a ``Rule Name`` are rule results (the others are the sections' metrics); the
    ``Estimated Speedup`` column, where the rule fills it, is a percentage of the kernel's time.
    """
    rows = _csv_rows(text)
    if len(rows) < 2 or "Rule Name" not in rows[0]:
        return []
    col = {h: i for i, h in enumerate(rows[0])}

    def cell(row: list[str], name: str) -> str:
        i = col.get(name)
        return row[i].strip() if i is not None and i < len(row) else ""

    launches: dict[str, list[RuleFinding]] = {}
    for row in rows[1:]:
        launch = cell(row, "ID") or "0"
        found = launches.setdefault(launch, [])
        rule = cell(row, "Rule Name")
        if not rule:
            continue
        speedup = _number(cell(row, "Estimated Speedup"))
        text_ = " ".join((cell(row, "Rule Description") or cell(row, "Metric Value")).split())
        finding = RuleFinding(
            rule=rule,
            section=cell(row, "Section Name"),
            kind=cell(row, "Rule Type"),
            text=text_[:FINDING_CHARS] + ("..." if len(text_) > FINDING_CHARS else ""),
            speedup_pct=speedup if isinstance(speedup, float) else None,
            speedup_type=cell(row, "Estimated Speedup Type") or None,
        )
        if all((f.rule, f.text) != (finding.rule, finding.text) for f in found):
            found.append(finding)
    ordered = [launches[k] for k in sorted(launches, key=lambda k: (len(k), k))]
    return [sorted(f, key=lambda x: -(x.speedup_pct or 0.0))[:MAX_FINDINGS] for f in ordered]


def _column(header: list[str], *needles: str) -> int | None:
    for needle in needles:
        for i, h in enumerate(header):
            if needle.lower() in h.lower():
                return i
    return None


def parse_source_csv(text: str, source: str, file_name: str = "kernels.cu") -> list[SourceHotspot]:
    """``ncu --import R --csv --page source --print-source cuda,sass``: the kernel's source lines with
    the most warp stall samples (needs a -lineinfo build). Lines are kernels.cu's own numbers.

    The page (ncu 2025.3) is one block per source file: a ``"File Path",<path>`` row, a
    ``"Function Name"`` row, the header (``"Line No","Source","Address","Source",<metrics>``), then
    each source line's row (its number and its SASS summed) followed by its SASS rows (no number).
    Only lines of the kernel's own file count (``file_name``, or the work copy ``kernels.cu``), not
    those of an included header. ncu does not escape quotes inside the source text, so a line like
    ``extern "C" f(a, b)`` can split into extra cells: the metric cells are read from the right."""
    names = {Path(file_name).name, "kernels.cu"}
    counts: dict[int, float] = {}
    width = 0  # the header's cells; 0 before a header with a samples column
    samples_from_right = 0
    in_kernel_file = True  # a page without File Path rows (an older ncu) is the kernel's
    for row in _csv_rows(text):
        if not row:
            continue
        first = row[0].strip()
        if first in ("File Path", "File Name"):
            in_kernel_file = len(row) > 1 and Path(row[1].strip()).name in names
            continue
        if first in ("Line No", "Line", "#"):  # a header; its first column is the line number
            col = _column(row, "Warp Stall Sampling (All", "Sampling Data (All", "Warp Stall Sampling")
            width, samples_from_right = (len(row), len(row) - col) if col is not None else (0, 0)
            continue
        if not width or not in_kernel_file or len(row) < width:
            continue
        line, value = _number(row[0]), _number(row[len(row) - samples_from_right])
        if isinstance(line, float) and isinstance(value, float) and value > 0:
            counts[int(line)] = counts.get(int(line), 0.0) + value
    total = sum(counts.values())
    if total <= 0:
        return []
    lines = source.splitlines()
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:MAX_HOTSPOTS]
    return [
        SourceHotspot(
            file=file_name, line=n, share=round(c / total, 4),
            source=lines[n - 1].strip()[:200] if 0 < n <= len(lines) else "",
        )
        for n, c in top
    ]  # fmt: skip


def details_command(ncu: str, report: str) -> list[str]:
    return [ncu, "--import", report, "--csv", "--page", "details", "--print-units", "base"]


def source_command(ncu: str, report: str) -> list[str]:
    return [ncu, "--import", report, "--csv", "--page", "source", "--print-source", "cuda,sass"]
