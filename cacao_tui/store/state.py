"""The typed state of a run (FORMATS.md). One writer per file; every write is atomic.

| file | model | writer |
|---|---|---|
| output/context.json | Context | master, once |
| output/master.json | MasterState | master |
| output/branches/<b>/branch.json | BranchManifest | that branch's worker |
| output/branches/<b>/branch_config.json | BranchConfig | the UI / CLI (the worker only reads it) |
| output/branches/<b>/iterN/state.json | IterState | that branch's worker |
| output/final_results.json | FinalResults | written at the end; rebuildable from disk |
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1

IterStatus = Literal[
    "planning", "implementing", "configuring", "running", "profiling", "proposing", "deciding", "decided", "failed"
]
ITER_ORDER: tuple[str, ...] = (
    "planning",
    "implementing",
    "configuring",
    "running",
    "profiling",
    "proposing",
    "deciding",
    "decided",
)
BranchStatus = Literal["pending", "running", "paused", "done", "stopped", "killed", "failed"]
TERMINAL_BRANCH: tuple[str, ...] = ("done", "stopped", "killed", "failed")
Action = Literal["continue", "retry", "branch", "stop"]
ParamValue = int | float | str


def now() -> float:
    return time.time()


class _State(BaseModel):
    model_config = ConfigDict(extra="ignore")
    schema_version: int = SCHEMA_VERSION


class Strategy(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(description="short slug, letters, digits, '-' or '_'")
    title: str = Field(description="one line")
    description: str = Field(description="what to build and why it should be faster")


class BufferInfo(BaseModel):
    name: str
    dtype: str
    elements: int
    bytes: int
    access: str
    validate_: bool = Field(default=False, alias="validate")
    model_config = ConfigDict(populate_by_name=True)


class GpuInfo(BaseModel):
    name: str | None = None
    arch: str = "sm_90"
    indices: list[int] = Field(default_factory=lambda: [0])
    detected: bool = False


class RunSettings(BaseModel):
    max_iter: int
    max_depth: int
    path_budget: int | None = None
    n_strategies: int
    timeout_s: float | None = None
    dry_run: bool = False
    provider: str
    model: str
    single_shot: bool = False
    budget_usd: float | None = None


class Context(_State):
    """Problem data shared by all branches; written once by the master at the start of a run."""

    problem_name: str
    problem_dir: str
    description: str
    boundary_signature: str
    scalars: dict[str, int | float]
    buffers: list[BufferInfo]
    grid: tuple[int, int, int]
    reference_type: str
    reference_file: str
    reference_function: str | None = None
    tolerance: float
    rules_text: list[str] = Field(default_factory=list)
    forbid: list[str] = Field(default_factory=list)
    cases: list[str] = Field(default_factory=list)
    floor_bytes: float | None = None
    floor_flops: float | None = None
    gpu: GpuInfo
    settings: RunSettings
    created_at: float = Field(default_factory=now)
    version: str = ""


class MasterState(_State):
    phase: Literal["analyzing", "strategizing", "dispatched", "finished", "failed"] = "analyzing"
    analysis: str | None = None
    strategies: list[Strategy] = Field(default_factory=list)
    error: str | None = None
    updated_at: float = Field(default_factory=now)


class CaseOutcome(BaseModel):
    """One shape of a problem with ``cases:``: the best configuration timed on it."""

    name: str
    status: str
    time_ms: float | None = None
    reference_ms: float | None = None
    speedup: float | None = None


class BestResult(BaseModel):
    branch: str
    iteration: int
    time_ms: float
    speedup: float | None = None
    score: float | None = None
    config: dict[str, ParamValue] = Field(default_factory=dict)
    kernel_path: str
    spec_path: str | None = None
    cases: list[CaseOutcome] = Field(default_factory=list)  # per shape, with ``cases:``; score is their geomean

    def rank(self) -> tuple[bool, float, float]:
        """Sort key, larger is better: the case score when there is one, else the shortest time."""
        return rank_key(self.time_ms, self.score)


def rank_key(time_ms: float, score: float | None) -> tuple[bool, float, float]:
    """Larger is better. With ``cases:`` the geometric-mean score decides; otherwise time."""
    return (score is not None, score or 0.0, -time_ms)


class BranchManifest(_State):
    """Identity, status and results of one branch. Written only by that branch's worker."""

    name: str
    title: str
    strategy: Strategy
    parent: str | None = None
    parent_iteration: int | None = None
    depth: int = 0
    path_before: int = 0  # iterations spent on the path from the root before this branch began
    status: BranchStatus = "pending"
    iterations_done: int = 0
    current_iteration: int | None = None
    best: BestResult | None = None
    children: list[str] = Field(default_factory=list)
    stop_reason: str | None = None
    error: str | None = None
    retries_used: int = 0
    seen_retry_nonce: int = 0
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)


class BranchConfig(_State):
    """Settings the user owns. Written by the UI or CLI; the worker only reads it."""

    max_iter: int
    paused: bool = False
    killed: bool = False
    retry_nonce: int = 0  # bumped by the user to ask for one more try after a failure


class TuneOutcome(BaseModel):
    ran: bool  # False in --dry-run (compile check only) or when the step failed before tuning
    summary_path: str | None = None
    best_ms: float | None = None
    speedup: float | None = None
    score: float | None = None
    reference_ms: float | None = None
    best_config: dict[str, ParamValue] | None = None
    evaluated: int = 0
    valid: int = 0
    by_status: dict[str, int] = Field(default_factory=dict)
    space_size: int = 0
    confirmed: bool = False
    suspect: bool = False
    cases: list[CaseOutcome] = Field(default_factory=list)
    message: str | None = None


class ProfileOutcome(BaseModel):
    ran: bool
    path: str | None = None
    roofline: str | None = None
    headline: dict[str, str] = Field(default_factory=dict)  # a few metrics as display strings
    message: str | None = None


class Decision(BaseModel):
    model_config = ConfigDict(extra="ignore")
    action: Action
    reason: str
    sub_strategies: list[Strategy] = Field(default_factory=list)


class AuthorOutcome(BaseModel):
    tool_calls: int = 0
    compile_checks: int = 0
    compile_failures: int = 0
    ok: bool = False
    message: str | None = None


class IterState(_State):
    """One iteration of one branch. Written only by that branch's worker."""

    branch: str
    index: int
    status: IterStatus = "planning"
    started_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)
    plan: str | None = None
    author: AuthorOutcome | None = None
    kernel_path: str | None = None
    spec_path: str | None = None
    run: TuneOutcome | None = None
    profile: ProfileOutcome | None = None
    proposal: str | None = None
    decision: Decision | None = None
    error: str | None = None
    attempt: int = 1


class BranchSummary(BaseModel):
    name: str
    title: str
    parent: str | None = None
    depth: int = 0
    status: str
    iterations: int
    best_ms: float | None = None
    speedup: float | None = None
    score: float | None = None
    best_iteration: int | None = None
    stop_reason: str | None = None


class FinalResults(_State):
    problem_name: str
    finished_at: float = Field(default_factory=now)
    complete: bool = True  # False when rebuilt from a run that did not finish
    rebuilt: bool = False
    dry_run: bool = False
    reference_ms: float | None = None
    reference_source: str | None = None
    cases: list[str] = Field(default_factory=list)  # the problem's extra shapes; scores matter only with them
    best: BestResult | None = None
    branches: list[BranchSummary] = Field(default_factory=list)
    tokens: dict[str, int] = Field(default_factory=dict)
    cost_usd: float | None = None
