"""The problem brief: what every prompt of a run opens with, built once per run.

It states the boundary, the data (each buffer's size, access and initial contents: the
range of random data, whether input sets are seeded), the reference (a CUDA reference with
the grid it is launched with, a C or Python reference as the serial function it is), its
time and how it was measured when known, the validation rule, the physical floor (declared,
or derived from the bytes the boundary must move, and said to be derived), the scored
shapes, the rules and the target GPU (nodes/target.py). It is the head of every cached
prompt prefix, so nothing in it changes during a run.
"""

from __future__ import annotations

from cacao_tui import prompts
from cacao_tui.nodes.context import RunDeps
from cacao_tui.nodes.target import Target, target_of
from ktt.capped_read import MAX_SOURCE_BYTES, describe_read_error, read_text_capped
from ktt.gpu_catalog import issue_rates
from ktt.occupancy import limits_for
from ktt.peaks import NAMES, datasheet_peaks, flops_peak
from ktt.problem import Buffer, Problem
from ktt.problem.files import INTEGER_DTYPES
from ktt.protocol import DeviceReport
from ktt.reference_times import ReferenceTimeError, read_reference_times
from ktt.target import SM_COUNT

MAX_REFERENCE_CHARS = 12_000


def _mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:,.1f} MB"


def derived_bytes(problem: Problem) -> float:
    """What the boundary must move at the least: every read buffer read once, every written one
    written once (a readwrite buffer both)."""
    shape = problem.primary
    total = 0.0
    for b in problem.buffers:
        n = shape.bytes_of(b)
        total += n * (2 if b.access == "readwrite" else 1)
    return total


# What a device-to-device copy reaches of the datasheet's DRAM bandwidth: the scale of the tuner's
# physical floor (it measures the copy). The H200: 4,040-4,156 of 4,800 GB/s measured (2026-12-02).
COPY_SHARE = 0.85


def floor_text(problem: Problem, target: Target | None) -> str:
    """The problem's bytes and flops, and the time each takes on the target GPU."""
    nbytes, flops = problem.floor()
    device = target.report if target is not None else None
    parts = []
    derived = False
    if not nbytes:
        nbytes, derived = derived_bytes(problem), True
    bandwidth, how = None, ""
    if device is not None and device.copy_bandwidth_gbs:
        bandwidth, how = device.copy_bandwidth_gbs, "measured"
    elif device is not None and device.theoretical_bandwidth_gbs:
        if target is not None and target.measured:
            bandwidth, how = device.theoretical_bandwidth_gbs, "theoretical"
        else:  # what the tuner's floor will use: the copy bandwidth it measures, about this share
            bandwidth = device.theoretical_bandwidth_gbs * COPY_SHARE
            how = "what a copy reaches"
    if nbytes:
        text = f"{_mb(nbytes)} moved"
        if derived:
            text += " (derived, not declared: each input read and each output written once)"
        if bandwidth:
            text += f" (~{nbytes / (bandwidth * 1e9) * 1e3:.3g} ms at {bandwidth:,.0f} GB/s, {how})"
        parts.append(text)
    if flops:
        parts.append(_flops_text(flops, problem.floor_flops_dtype, device))
    return "; ".join(parts) if parts else "not declared"


def _flops_text(flops: float, dtype: str, device: object | None) -> str:
    """The flops against the peak the tuner's floor uses (physical_floor.flops_dtype, ktt.peaks)."""
    text = f"{flops / 1e9:,.2f} GFLOP"
    if device is None:
        sheets = datasheet_peaks(dtype)
        if sheets:
            part, tflops = sheets[0]
            text += f" (~{flops / (tflops * 1e12) * 1e3:.3f} ms at {tflops:g} TFLOP/s {dtype} on {part})"
        return text
    peak = flops_peak(dtype, device.name, device.arch, device.sm_count, round(device.clock_mhz * 1000))  # type: ignore[attr-defined]
    if peak.gflops:
        ms = flops / (peak.gflops * 1e9) * 1e3
        text += f" (~{ms:.3g} ms at the {NAMES[dtype]} peak {peak.gflops / 1e3:,.1f} TFLOP/s)"
    else:
        text += f" ({peak.source})"
    return text


def target_lines(d: DeviceReport, measured: bool) -> list[str]:
    """The target as a prompt states it: the part, its limits, memory, and its issue rates."""
    kib = 1024
    memory = f", {d.total_memory_bytes / 2**30:.0f} GiB" if d.total_memory_bytes else ""
    lines = [f"{d.name} ({d.arch}): {d.sm_count} SMs at up to {d.clock_mhz:.0f} MHz{memory}"]
    blocks = f"{d.max_blocks_per_sm} blocks, " if d.max_blocks_per_sm else ""
    per_sm = f"per SM: {d.max_threads_per_sm} threads, {blocks}{d.regs_per_sm:,} registers, "
    per_sm += f"{d.smem_per_sm / kib:.0f} KiB shared memory; per block: {d.max_threads_per_block} threads, "
    per_sm += (f"{d.smem_per_block_optin / kib:.0f} KiB shared memory (over {d.smem_per_block / kib:.0f} KiB: "
               "dynamic only, the tuner opts in)")
    lines.append(per_sm)
    bandwidth = []
    if d.copy_bandwidth_gbs:
        bandwidth.append(f"{d.copy_bandwidth_gbs:,.0f} GB/s measured (device-to-device copy)")
    if d.theoretical_bandwidth_gbs:
        if measured or d.copy_bandwidth_gbs:
            bandwidth.append(f"{d.theoretical_bandwidth_gbs:,.0f} GB/s {'theoretical' if measured else 'datasheet'}")
        else:
            copy = d.theoretical_bandwidth_gbs * COPY_SHARE
            bandwidth.append(f"{d.theoretical_bandwidth_gbs:,.0f} GB/s datasheet (~{copy:,.0f} by a copy)")
    lines.append(f"L2 {d.l2_bytes / 2**20:.0f} MiB; DRAM " + ("; ".join(bandwidth) or "bandwidth unknown"))
    rates = issue_rates(d.arch)
    if rates is not None:
        tensor = f", FP16/BF16 tensor FMA {rates.tensor_fp16:,} dense" if rates.tensor_fp16 else ""
        # Per SM per clock (the whole GPU's rate is SMs x clock x this; the floor gives the one that binds).
        lines.append(f"per SM per clock: FP32 FMA {rates.fp32}, FP64 FMA {rates.fp64}, INT32 {rates.int32}, MUFU "
                     f"(rsqrt, ex2, sin...) {rates.sfu}{tensor}")  # fmt: skip
    return lines


def device_section(deps: RunDeps) -> str:
    """The target GPU: the device table measured at the start of the run, else its datasheet."""
    target = target_of(deps)
    if target.report is not None:
        how = "measured at the start of this run" if target.measured else f"datasheet of {target.why}"
        lines = target_lines(target.report, target.measured)
        return f"Target GPU ({how}): {lines[0]}\n" + "\n".join(f"- {line}" for line in lines[1:])
    limits = limits_for(target.arch)
    text = f"Target GPU: an {target.arch} GPU ({target.why}; no device table was measured)"
    if limits is not None:
        text += (
            f". {target.arch} limits: {limits.max_warps_per_sm} warps and {limits.max_blocks_per_sm} blocks per SM, "
            f"{limits.regs_per_sm:,} registers per SM, {limits.smem_per_sm // 1024} KiB shared memory per SM "
            f"({limits.smem_per_block_optin // 1024} KiB per block with the opt-in attribute)"
        )
    return text + "."


def target_summary(deps: RunDeps) -> str:
    """The target in two lines (decide: enough to judge occupancy and bandwidth claims)."""
    target = target_of(deps)
    if target.report is None:
        return device_section(deps)
    lines = target_lines(target.report, target.measured)
    how = "measured" if target.measured else "datasheet"
    return f"Target GPU ({how}): {lines[0]}; {lines[1]}; {lines[2]}."


def init_text(problem: Problem, b: Buffer, seeds: bool = True) -> str:
    """What a buffer holds before each run."""
    if problem.poisoned(b):
        return "poisoned before every run (NaN / a sentinel): write every element"
    if b.init == "zeros":
        return "zeros before every run" + (" (a kernel may accumulate into it)" if b.writable else "")
    if b.init == "file":
        return f"read from inputs/{b.file_name} (the same in both input sets)"
    if b.init == "custom":
        return "made by the inputs.yaml generator (the same in both input sets)"
    low, high = b.value_range
    kind = "integers" if b.dtype in INTEGER_DTYPES else "values"
    if b.access == "write":
        return f"holds uniform random {kind} in [{low:g}, {high:g}] when a run starts: write every element"
    seed = f"seed {b.seed}" if b.seed is not None else "seeded by name"
    text = f"uniform random {kind} in [{low:g}, {high:g}]" + (f" (input set 0: {seed}; set 1 redrawn)" if seeds else "")
    return text + (", restored before every run" if b.writable else "")


def buffers_text(problem: Problem, seeds: bool = True) -> str:
    shape = problem.primary
    lines = []
    for b in problem.buffers:
        n = shape.sizes[b.name]
        flags = [b.access] + (["validated"] if b.validate else [])
        lines.append(f"- {b.name}: {b.ctype}[{b.size.text}] ({n:,}, {_mb(shape.bytes_of(b))}), {', '.join(flags)}: "
                     + init_text(problem, b, seeds))  # fmt: skip
    return "\n".join(lines)


REFERENCE_KIND = {"cuda": "a CUDA kernel", "cpu_c": "a serial C function", "python": "a Python function"}


def reference_head(problem: Problem) -> str:
    ref = problem.reference
    if ref.type == "cuda":
        return (
            f"a CUDA kernel ({ref.file.name}, {ref.function}), launched with grid {problem.primary.grid} and "
            f"block {ref.block}"
        )
    if ref.type == "cpu_c":
        return f"a serial C function ({ref.file.name}) run on the host; scalars arrive as macros"
    return f"a Python function ({ref.file.name}, {ref.function}) run on the host"


def reference_time_text(deps: RunDeps) -> str:
    """The reference's time for the primary shape when known (seeded or measured), else how it will be."""
    p = deps.problem
    try:
        known = read_reference_times(deps.layout.reference_time, p.primary.name).get(p.primary.name)
    except (ReferenceTimeError, OSError):
        known = None
    if known is not None and known.no_baseline:
        return "none: output/reference_time.json says this shape has no baseline (no speedup is computed)"
    if known is not None and known.ms is not None:
        if known.source != "measured":
            return f"{known.ms:.4g} ms, seeded by hand in output/reference_time.json (the speedup's denominator)"
        how = f": {known.method}" if known.method else ""
        return f"{known.ms:.4g} ms, measured by the tuner{how}"
    if p.reference.type == "cuda":
        how = "CUDA events around the reference launch, median"
    else:
        how = "on the host, by the best method its language allows"
    if deps.settings.dry_run:
        return "not measured (dry run)"
    return f"not measured yet (the first tuning measures it: {how})"


def validation_text(problem: Problem) -> str:
    names = ", ".join(b.name for b in problem.validated)
    return (
        f"each element of {names} within {problem.tolerance:g} (absolute) of the reference on both input sets; "
        "NaN/Inf fail; every configuration runs twice (a moving result is a race)"
    )


def defines_text(deps: RunDeps) -> str:
    p = deps.problem
    defines = ", ".join(f"{k}={v}" for k, v in p.defines().items())
    sm = target_of(deps).sm_count
    if sm and not any(a.name == SM_COUNT for a in p.args):
        defines += (", " if defines else "") + f"{SM_COUNT}={sm} (the target's SMs; tuning.yaml knows it too)"
    return defines or "none"


def problem_brief(deps: RunDeps, *, source: bool = True) -> str:
    """The brief; ``source``: whole (the author's and the master's steps). Without it, the brief of
    the steps that plan or review a kernel (plan, propose): the reference named by its kind only (the
    analysis describes it; a measured run's propose gets its time with the tuning's result), no input
    seeds, no word on inputs.hpp."""
    if deps._brief is None:
        deps._brief = {}
    if source not in deps._brief:
        deps._brief[source] = _render_brief(deps, source)
    return deps._brief[source]


def reference_source(deps: RunDeps) -> str:
    """The reference's source in a fenced block (cut, saying so, past MAX_REFERENCE_CHARS)."""
    try:
        source = read_text_capped(deps.problem.reference.file, MAX_SOURCE_BYTES, errors="replace")  # read again
    except OSError as exc:
        source = f"(the reference could not be read: {describe_read_error(exc)})"
    if len(source) > MAX_REFERENCE_CHARS:
        cut = source.rfind("\n", 0, MAX_REFERENCE_CHARS)
        source = source[: cut if cut > 0 else MAX_REFERENCE_CHARS]
        source += f"\n... (cut here: {len(source):,} of the file's characters shown; read_file('reference') has it all)"
    return f"```\n{source.rstrip()}\n```"


def _render_brief(deps: RunDeps, with_source: bool) -> str:
    p = deps.problem
    rules = [f"- {t}" for t in p.rules_text]
    rules += [f"- forbidden: /{r.pattern.pattern}/" + (f" ({r.reason})" if r.reason else "") for r in p.forbid]
    shapes = "; ".join(f"{s.name}: " + ", ".join(f"{k}={v}" for k, v in s.scalars.items()) for s in p.shapes)
    if p.declared_cases:
        shapes += (" (each shape is tuned on its own: the space is searched again for it and its fastest"
                   " valid configuration is its result; score = geometric mean of the per-shape speedups;"
                   " every shape must pass; the best result is the highest score, then the fastest on the"
                   " primary shape)")
    # One shape: its sizes are the macros above. A dry run tunes nothing: no budget.
    shapes = f"Scored shapes: {shapes}\n" if len(p.shapes) > 1 or p.declared_cases else ""
    budget = deps.settings.timeout_s or p.primary.duration_s
    budget_line = "" if deps.settings.dry_run else (
        f"Tuning budget per iteration: {budget:g} s of search: the tuner compiles, validates and times "
        "configurations of the space for that long; a space larger than "
        "that time allows is searched, not tried whole.\n"
    )
    # Every step gets the boundary's order: a plan and a review name the kernel's parameters too.
    signature = f"Kernel parameters, in order: {p.boundary_signature() or '(no parameters)'}\n"
    if with_source:
        reference = (f"Reference: {reference_head(p)}\n{reference_source(deps)}\n"
                     f"Reference time: {reference_time_text(deps)}")  # fmt: skip
    else:
        reference = f"Reference: {REFERENCE_KIND[p.reference.type]} (the analysis below describes it)"
    return prompts.render(
        "problem_brief",
        name=p.name,
        macro_note=" (-D, and in inputs.hpp, which kernels may #include)" if with_source else "",
        mode=prompts.load("dry_run_mode").strip() + "\n\n" if deps.settings.dry_run else "",
        description=_description(p),
        signature=signature,
        defines=defines_text(deps),
        buffers=buffers_text(p, seeds=with_source),
        reference=reference,
        validation=validation_text(p),
        floor=floor_text(p, target_of(deps)),
        shapes=shapes,
        rules="\n".join(rules) or "- none beyond the evaluation rules",
        device=device_section(deps),
        budget=budget_line,
    )


def _description(p: Problem) -> str:
    """The description, and the gpu.* metadata of problem.yaml (advisory: the GPU it was written for)."""
    text = (p.description or "(no description)").strip()
    info = {k: v for k, v in p.gpu_info.items() if k != "compute_capability"}
    if info:
        text += "\nproblem.yaml describes its GPU as: " + ", ".join(f"{k} {v}" for k, v in info.items())
    return text
