"""What ktt prints and writes: the subprocess protocol between the tuner and its callers.

``python -m ktt tune`` prints one JSON object per line on stdout, each with a ``type``:
``progress`` (throttled), ``log``, then exactly one ``result`` (or ``error``). It
appends one ``ConfigResult`` per evaluated configuration to ``results.jsonl`` as each
finishes, and writes ``summary.json`` (a ``TuneSummary``) at the end.
``check`` prints a ``CheckReport``; ``profile`` prints and writes a ``ProfileReport``.

Exit codes (all commands): 0 success; 1 ran, but nothing valid (no valid configuration,
a compile check failed, a profile failed); 2 bad input (problem, spec or flags); 3 the
environment cannot do it (no GPU, ncu missing or without counter permission); 4 an
internal error in ktt.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

EXIT_OK = 0
EXIT_NOTHING_VALID = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3
EXIT_INTERNAL = 4

Status = Literal[
    "ok",  # valid and timed
    "compile_failed",  # NVRTC rejected the source, or a forbid rule matched
    "launch_failed",  # the launch exceeds a device limit (threads, shared memory, registers)
    "runtime_error",  # trap, illegal address, other sticky CUDA error; the worker was restarted
    "timeout",  # the watchdog killed the configuration
    "validation_failed",  # wrong values, NaN/Inf, unwritten elements, race, OOB write, input mutation
    "suspect",  # valid but faster than the physical floor allows; never reported as best
]
STATUSES: tuple[str, ...] = Status.__args__  # type: ignore[attr-defined]

ParamValue = int | float | str


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Diagnostic(_Model):
    """One compiler message mapped back to kernels.cu."""

    file: str
    line: int | None = None
    column: int | None = None
    severity: Literal["error", "warning", "note"] = "error"
    message: str


class Mismatch(_Model):
    """One validated element that differs from the reference."""

    index: int
    expected: float | int | None  # None: NaN or Inf written as JSON null
    got: float | int | None


class ValidationReport(_Model):
    buffer: str | None = None
    max_abs_error: float | None = None
    first_bad_index: int | None = None
    bad_count: int = 0
    checked: int = 0
    reason: str | None = None  # e.g. "NaN in output", "race: results differ between runs", "input A mutated"
    samples: list[Mismatch] = Field(default_factory=list)  # up to 8 bad elements, from the first bad index
    input_set: int | None = None  # which input set failed (0: the first; 1 and later: the fresh ones)


class ConfigResult(_Model):
    """One evaluated configuration: one line of results.jsonl."""

    type: Literal["config"] = "config"
    index: int  # evaluation order, from 0
    config: dict[str, ParamValue]
    status: Status
    time_ms: float | None = None  # median over repeats of the whole launch sequence
    min_ms: float | None = None
    max_ms: float | None = None
    repeats: int = 0
    launch_ms: list[float] | None = None  # median per launch of a pipeline
    compile_s: float | None = None
    error: str | None = None
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    validation: ValidationReport | None = None
    flags: list[str] = Field(default_factory=list)
    finished_at: float | None = None  # unix time
    elapsed_s: float | None = None  # seconds since the tuning run started
    confirmed: bool = False  # also passed on a fresh input set (required of the best)
    gpu_ms: float | None = None  # GPU span of this evaluation (validation, timing, confirmation)
    shape: str = "default"  # the problem shape (base or case) this was measured on


class Progress(_Model):
    type: Literal["progress"] = "progress"
    evaluated: int
    valid: int
    space_size: int
    by_status: dict[str, int] = Field(default_factory=dict)
    best_ms: float | None = None
    best_config: dict[str, ParamValue] | None = None
    elapsed_s: float
    budget_s: float | None = None
    phase: str = "search"  # setup | build | reference | search | done
    case: str | None = None  # the shape being tuned (each case is searched on its own)
    case_index: int = 0  # from 0, in declared order
    cases_total: int = 1


class LogLine(_Model):
    type: Literal["log"] = "log"
    level: Literal["debug", "info", "warning", "error"] = "info"
    message: str


class ErrorLine(_Model):
    type: Literal["error"] = "error"
    message: str
    exit_code: int


CaseStatus = Literal[
    "ok",  # a valid, confirmed best on this shape
    "no_valid",  # the search ran; no configuration passed validation
    "build_failed",  # no probe configuration compiles or fits the launch limits at this shape
    "not_run",  # an earlier case failed: the iteration stopped there
]


class CaseResult(_Model):
    """One scored shape: its own search, its own reference time, its own best."""

    name: str
    status: CaseStatus | Status  # the Status values are read from summaries of earlier versions
    time_ms: float | None = None  # the case's best
    reference_ms: float | None = None
    reference_source: str | None = None  # measured | seeded
    reference_method: str | None = None  # how a measured reference was timed
    speedup: float | None = None  # reference_ms / time_ms
    error: str | None = None
    config: dict[str, ParamValue] | None = None  # the case's best configuration
    budget_s: float | None = None  # the case's time budget (null: none)
    evaluated: int = 0
    valid: int = 0
    by_status: dict[str, int] = Field(default_factory=dict)
    space_size: int | None = None  # configurations at this shape after restrictions, when counted
    search_s: float | None = None
    results_file: str | None = None  # this case's results.jsonl


class FloorReport(_Model):
    bytes: float | None = None
    flops: float | None = None
    bandwidth_gbs: float | None = None  # measured copy bandwidth
    peak_gflops: float | None = None  # the peak the flops are measured against (ktt.peaks)
    flops_dtype: str | None = None  # physical_floor.flops_dtype: fp32 (CUDA cores), bf16 (tensor cores)...
    peak_from: str | None = None  # where that peak comes from, or why there is none
    floor_ms: float | None = None
    fraction_of_floor: float | None = None  # floor_ms / best time_ms (1.0 = at the floor)


class OutputStats(_Model):
    """The reference's result for one validated buffer (the first input set of the primary shape):
    what a tolerance is measured against."""

    buffer: str
    count: int
    min: float | None = None  # None: no finite element
    max: float | None = None
    mean_abs: float | None = None
    nonfinite: int = 0


class TuneSummary(_Model):
    """The run's result. With several cases, the counts are totals over them, ``best`` and
    ``speedup`` are the primary shape's, ``score`` the geometric mean over all of them; each
    case's own search is in ``cases`` (and in OUTDIR/case_<name>/summary.json)."""

    type: Literal["result"] = "result"
    ok: bool  # every case has a valid best
    problem: str
    kernel_file: str
    spec_file: str
    device: str | None = None
    arch: str | None = None
    space_size: int  # the primary shape's
    restricted_size: int | None = None  # configurations left after restrictions, when counted
    evaluated: int
    valid: int
    by_status: dict[str, int] = Field(default_factory=dict)
    strategy: str
    seed: int
    best: ConfigResult | None = None
    confirmed_on_fresh_input: bool = False
    reference_ms: float | None = None
    reference_source: str | None = None  # measured | seeded
    reference_method: str | None = None
    speedup: float | None = None  # reference_ms / best.time_ms (the primary shape's)
    cases: list[CaseResult] = Field(default_factory=list)  # every scored shape, primary first
    score: float | None = None  # geometric mean of the per-case speedups; null if any case has none
    floor: FloorReport | None = None
    wall_s: float
    gpu_busy_s: float | None = None
    compile_s_total: float | None = None
    results_file: str
    message: str | None = None
    reference_file: str | None = None  # the reference_time.json used or written
    search_s: float | None = None  # wall time of the search phase (all cases)
    configs_per_s: float | None = None  # evaluated / search_s
    time_to_best_s: float | None = None  # seconds from the start until the best was recorded
    worker_restarts: int = 0
    warnings: list[str] = Field(default_factory=list)  # e.g. a GPU reference timed by wall clock
    reference_stats: list[OutputStats] = Field(default_factory=list)  # the primary shape's reference outputs


class KernelResources(_Model):
    """What ptxas reports for one compiled kernel (``-Xptxas=-v``)."""

    kernel: str
    registers: int | None = None  # per thread
    spill_stores: int = 0  # bytes
    spill_loads: int = 0
    stack_bytes: int = 0  # local memory (stack frame) per thread
    smem_static: int | None = None  # bytes of static shared memory per block


class LaunchOccupancy(_Model):
    """The occupancy one launch's resources allow (the CUDA occupancy calculation)."""

    kernel: str
    threads: int  # per block
    registers: int
    smem_bytes: int  # static + dynamic per block
    blocks_per_sm: int
    warps_per_sm: int
    occupancy: float  # resident warps / the SM's maximum (0..1)
    limiter: str  # registers | shared memory | warps | blocks
    grid_blocks: int | None = None  # the blocks of its (first) launch's grid


class InstructionCounts(_Model):
    """Static instruction counts of a kernel or of its main loop (ktt.instruction_mix)."""

    total: int
    counts: dict[str, int] = Field(default_factory=dict)  # FFMA, MUFU, LDG, LDS, BAR, tensor, ...
    detail: dict[str, int] = Field(default_factory=dict)  # category:variant, e.g. MUFU:MUFU.RSQ, LDS:LDS.128


class KernelMix(_Model):
    """One kernel's instruction mix: SASS from the cubin, or PTX where no disassembler is installed."""

    kernel: str
    isa: Literal["SASS", "PTX"]
    mix: InstructionCounts
    loop: InstructionCounts | None = None  # the main loop's own body (ktt.instruction_mix.main_loop)
    loop_nested: int = 0  # instructions of loops nested in it (not in ``loop``)


class CheckedConfig(_Model):
    config: dict[str, ParamValue]
    ok: bool
    # Why this configuration was compiled: "sampled", "requested", or the extreme of the space it
    # is ("most shared memory", "largest parameter values", ...).
    roles: list[str] = Field(default_factory=list)
    instruction_mix: list[KernelMix] = Field(default_factory=list)
    mix_note: str | None = None  # why there is no instruction mix, when there is none
    shape: str = "default"  # the base shape, or the case it was compiled for
    compile_s: float | None = None
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    error: str | None = None
    binary_sha256: str | None = None  # of the compiled code: equal code, equal kernel (de-duplication)
    resources: list[KernelResources] = Field(default_factory=list)
    occupancy: list[LaunchOccupancy] = Field(default_factory=list)


class CheckReport(_Model):
    type: Literal["check"] = "check"
    ok: bool
    kernel_file: str
    spec_file: str
    arch: str
    space_size: int
    restricted_size: int | None = None
    sampled: int
    configs: list[CheckedConfig] = Field(default_factory=list)
    forbid: list[str] = Field(default_factory=list)  # forbid-rule hits, "line N: forbidden pattern ..."
    missing_kernels: list[str] = Field(default_factory=list)
    message: str | None = None
    sm_count: int | None = None  # the SM_COUNT kernels and expressions saw (None: not defined)
    requested_errors: list[str] = Field(default_factory=list)  # requested configurations that were not checked
    case_sizes: dict[str, int | None] = Field(default_factory=dict)  # the other cases' spaces (None: not listed)


class Metric(_Model):
    name: str  # ncu metric name
    label: str  # short human label
    section: str  # speed_of_light | memory | occupancy | launch | warp_stalls | other
    value: float | str | None
    unit: str = ""


class RuleFinding(_Model):
    """One of Nsight Compute's rule results (its guided analysis), with its estimated speedup."""

    rule: str  # e.g. "UncoalescedGlobalAccess"
    section: str = ""
    kind: str = ""  # OPT | WRN | INF | ...
    text: str  # the rule's description of the problem (cut)
    speedup_pct: float | None = None  # ncu's "Estimated Speedup", percent of the kernel's time
    speedup_type: str | None = None  # local | global


class SourceHotspot(_Model):
    """A kernels.cu line where warps stall most (ncu's source counters; needs -lineinfo)."""

    file: str
    line: int
    share: float  # of the kernel's warp stall samples (0..1)
    source: str = ""
    top_stall: str | None = None  # the reason sampled most on this line, when ncu gives it


class StallShare(_Model):
    reason: str  # e.g. long_scoreboard
    share: float  # of the stall cycles per issued instruction (0..1)
    cycles: float  # cycles per issued instruction


class Bottleneck(_Model):
    name: str
    evidence: str
    estimated_speedup_pct: float | None = None  # Nsight Compute's own estimate (its rules), when it gives one
    weight: float = 0.0  # how it ranks: the estimate, else a share of the time the symptom takes
    source: str = "metrics"  # metrics | ncu rule


class Diagnosis(_Model):
    """The profile condensed (ktt.diagnosis): the two leading bottlenecks and what shows them."""

    bottlenecks: list[Bottleneck] = Field(default_factory=list)
    stalls: list[StallShare] = Field(default_factory=list)
    occupancy_limiter: str | None = None
    achieved_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    findings: int = 0  # ncu rule findings considered


class KernelProfile(_Model):
    kernel: str
    launch_index: int
    metrics: list[Metric] = Field(default_factory=list)
    roofline: Literal["memory-bound", "compute-bound", "latency-bound", "unknown"] = "unknown"
    duration_ms: float | None = None
    findings: list[RuleFinding] = Field(default_factory=list)  # largest estimated speedup first
    hotspots: list[SourceHotspot] = Field(default_factory=list)  # largest share first
    diagnosis: Diagnosis | None = None


class ProfileReport(_Model):
    type: Literal["profile"] = "profile"
    ok: bool
    config: dict[str, ParamValue] = Field(default_factory=dict)
    kernels: list[KernelProfile] = Field(default_factory=list)
    ncu_version: str | None = None
    command: list[str] = Field(default_factory=list)
    error: str | None = None
    error_kind: Literal["ncu_missing", "no_permission", "no_gpu", "failed"] | None = None


class SetValidation(_Model):
    """One input set of a validation-only run."""

    input_set: int
    ok: bool
    validation: ValidationReport | None = None
    error: str | None = None


class ValidateReport(_Model):
    """``ktt validate``: one configuration, validation only (no timing), on both input sets."""

    type: Literal["validate"] = "validate"
    ok: bool  # every shape passed on both input sets
    config: dict[str, ParamValue] = Field(default_factory=dict)
    shapes: list[ConfigResult] = Field(default_factory=list)  # one per scored shape, validation detail in each
    message: str | None = None
    seconds: float | None = None


class PeakRate(_Model):
    """A peak arithmetic rate of the device, per data type and unit."""

    dtype: str  # fp64 | fp32 | fp16 | bf16 | tf32 | fp8 | int8
    unit: str  # "CUDA cores" | "tensor cores"
    tflops: float  # dense, TFLOP/s (TOP/s for int8)
    source: str = "derived"  # derived: SMs x clock x the architecture's rate per SM and cycle


class DeviceReport(_Model):
    """``ktt device``: the device table every prompt of a run shows (measured once per run)."""

    type: Literal["device"] = "device"
    name: str
    arch: str
    ordinal: int = 0
    sm_count: int
    clock_mhz: float  # SM clock the peaks are computed at (the driver's maximum)
    memory_clock_mhz: float | None = None
    memory_bus_bits: int | None = None
    total_memory_bytes: int | None = None
    l2_bytes: int
    smem_per_block: int  # default limit
    smem_per_block_optin: int  # with cudaFuncAttributeMaxDynamicSharedMemorySize
    smem_per_sm: int
    regs_per_block: int
    regs_per_sm: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int | None = None
    warp_size: int = 32
    copy_bandwidth_gbs: float | None = None  # measured: device-to-device copy, read + write bytes
    theoretical_bandwidth_gbs: float | None = None  # from the memory clock and bus width
    peaks: list[PeakRate] = Field(default_factory=list)
    measured_at: float | None = None  # unix time
    note: str | None = None  # e.g. "not measured: dry run"

    def peak(self, dtype: str, unit: str = "CUDA cores") -> float | None:
        """TFLOP/s for a data type and unit (None when unknown)."""
        return next((p.tflops for p in self.peaks if p.dtype == dtype and p.unit == unit), None)
