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


class ValidationReport(_Model):
    buffer: str | None = None
    max_abs_error: float | None = None
    first_bad_index: int | None = None
    bad_count: int = 0
    checked: int = 0
    reason: str | None = None  # e.g. "NaN in output", "race: results differ between runs", "input A mutated"


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
    phase: str = "search"  # setup | reference | search | cases | done


class LogLine(_Model):
    type: Literal["log"] = "log"
    level: Literal["debug", "info", "warning", "error"] = "info"
    message: str


class ErrorLine(_Model):
    type: Literal["error"] = "error"
    message: str
    exit_code: int


class CaseResult(_Model):
    name: str
    status: Status | Literal["not_run"]
    time_ms: float | None = None
    reference_ms: float | None = None
    speedup: float | None = None
    error: str | None = None


class FloorReport(_Model):
    bytes: float | None = None
    flops: float | None = None
    bandwidth_gbs: float | None = None  # measured copy bandwidth
    peak_gflops: float | None = None  # measured or table peak used for the floor
    floor_ms: float | None = None
    fraction_of_floor: float | None = None  # floor_ms / best time_ms (1.0 = at the floor)


class TuneSummary(_Model):
    type: Literal["result"] = "result"
    ok: bool
    problem: str
    kernel_file: str
    spec_file: str
    device: str | None = None
    arch: str | None = None
    space_size: int
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
    speedup: float | None = None  # reference_ms / best.time_ms
    cases: list[CaseResult] = Field(default_factory=list)
    score: float | None = None  # geometric mean of per-case speedups (base shape included); null if any missing
    floor: FloorReport | None = None
    wall_s: float
    gpu_busy_s: float | None = None
    compile_s_total: float | None = None
    results_file: str
    message: str | None = None
    reference_file: str | None = None  # the reference_time.json used or written
    search_s: float | None = None  # wall time of the search phase
    configs_per_s: float | None = None  # evaluated / search_s
    time_to_best_s: float | None = None  # seconds from the start until the best was recorded
    worker_restarts: int = 0


class ReferenceTimeFile(_Model):
    """output/reference_time.json: the speedup denominator. Seeded by hand or measured once."""

    ms: float | None = None  # the base shape's reference time
    source: Literal["measured", "seeded"] = "seeded"
    cases: dict[str, float] = Field(default_factory=dict)  # per-case reference times, by case name
    reference_type: str | None = None  # cuda | cpu_c | python (for measured files)
    device: str | None = None
    measured_at: str | None = None


class CheckedConfig(_Model):
    config: dict[str, ParamValue]
    ok: bool
    shape: str = "default"  # the base shape, or the case it was compiled for
    compile_s: float | None = None
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    error: str | None = None


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


class Metric(_Model):
    name: str  # ncu metric name
    label: str  # short human label
    section: str  # speed_of_light | memory | occupancy | launch | warp_stalls | other
    value: float | str | None
    unit: str = ""


class KernelProfile(_Model):
    kernel: str
    launch_index: int
    metrics: list[Metric] = Field(default_factory=list)
    roofline: Literal["memory-bound", "compute-bound", "latency-bound", "unknown"] = "unknown"
    duration_ms: float | None = None


class ProfileReport(_Model):
    type: Literal["profile"] = "profile"
    ok: bool
    config: dict[str, ParamValue] = Field(default_factory=dict)
    kernels: list[KernelProfile] = Field(default_factory=list)
    ncu_version: str | None = None
    command: list[str] = Field(default_factory=list)
    error: str | None = None
    error_kind: Literal["ncu_missing", "no_permission", "no_gpu", "failed"] | None = None
