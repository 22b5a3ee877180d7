"""The typed state of a run (FORMATS.md). One writer per file; every write is atomic.

| file | model | writer |
|---|---|---|
| output/context.json | Context | master, once |
| output/master.json | MasterState | master |
| output/device.json | ktt.protocol.DeviceReport (the device table, measured once) | master, once |
| output/pool.json | PoolState (the run's iteration pool and its allocation) | the engine |
| output/phase.json | store.phases.PhaseState (a split run's last phase: what waits for which) | the engine |
| output/branches/<b>/branch.json | BranchManifest | that branch's worker |
| output/branches/<b>/branch_config.json | BranchConfig | the UI / CLI (the worker only reads it) |
| output/branches/<b>/inbox/<id>.json | ControlCommand | the UI / CLI, once per file (the worker reads) |
| output/branches/<b>/iterN/state.json | IterState | that branch's worker |
| output/final_results.json | FinalResults | written at the end; rebuildable from disk |

The original CACAO's files beside these (run.log, token_usage.json, run_meta.json,
analysis.md, strategies.json) are listed in store/original_files.py; its keys in branch.json,
state.json and context.json are computed fields of the models below (store/original_keys.py).
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator, model_validator

from cacao_tui.store.layout import BranchName, RunPath, check_strategy_name
from cacao_tui.store.original_keys import branch_keys, iteration_summary
from ktt.checked_numbers import Count, Millis, OptMicros, OptMillis, OptRatio, OptSeconds, OptUsd, Usd

SCHEMA_VERSION = 1
# Bounds on what a run's files may say (a tampered file says anything): iterations of one branch,
# strategies of a run. Names and paths are checked in store/layout.py, numbers in ktt/checked_numbers.py.
MAX_ITERATIONS = 1_000_000
MAX_STORED_STRATEGIES = 100

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
# Shown, never written: a branch (or iteration) the end of its run caught on its way. Its files
# still say running, so that --resume goes on with it; the views and --best say interrupted.
INTERRUPTED = "interrupted"
Action = Literal["continue", "retry", "branch", "stop"]
ACTIONS: tuple[str, ...] = ("continue", "retry", "branch", "stop")
# first: the branch's first kernel; continue: apply the last decision's feedback; retry: the
# smallest fix of what failed; configure: same kernel, a new tuning space (skip_implement).
# polish: the run's final iteration on its best kernel (a branch of its own, one iteration).
IterMode = Literal["first", "continue", "retry", "configure", "polish"]
# Which files the next iteration starts from: the branch's best so far, or this iteration's.
StartFrom = Literal["best", "latest"]
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
    budget_tokens: int | None = None
    budget_iters: int | None = None  # the run's iteration pool (None: n_strategies x max_iter)
    samples: int = 1  # authoring attempts per iteration (best-of-k)
    model_plan: str | None = None  # "provider:model" of the plan step (None: the run's model)
    model_decide: str | None = None  # "provider:model" of the decide step
    target: str | None = None  # --target: the GPU a dry run writes for (ktt.gpu_catalog's key)

    @property
    def pool_total(self) -> int:
        """--budget-iters, else every strategy's share: n_strategies x (path budget or max_iter)."""
        if self.budget_iters is not None:
            return self.budget_iters
        return self.n_strategies * (self.path_budget or self.max_iter)


class Context(_State):
    """Problem data shared by all branches; written once by the master at the start of a run."""

    problem_name: str
    problem_dir: str  # the problem directory's name (output/ travels: no absolute path in the state)
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

    # The original's key: its collect_results.py falls back to gpu_info.model for the GPU column.
    @computed_field  # type: ignore[prop-decorator]
    @property
    def gpu_info(self) -> dict[str, str] | None:
        return {"model": self.gpu.name} if self.gpu.name else None


class MasterState(_State):
    phase: Literal["analyzing", "strategizing", "dispatched", "finished", "failed"] = "analyzing"
    analysis: str | None = None
    strategies: list[Strategy] = Field(default_factory=list)
    error: str | None = None
    # What the master did instead of failing when a model reply was unusable (a default strategy, ...).
    fallbacks: list[str] = Field(default_factory=list)
    updated_at: float = Field(default_factory=now)

    @field_validator("strategies")
    @classmethod
    def _names_are_strategy_names(cls, strategies: list[Strategy]) -> list[Strategy]:
        """Read back on --resume, each name becomes a branch directory: the rule the model's names
        are slugged to, checked again (a tampered ``x/../../pwn`` is an error, not a path)."""
        return _checked_strategies(strategies, MAX_STORED_STRATEGIES)


def _checked_strategies(strategies: list[Strategy], most: int) -> list[Strategy]:
    if len(strategies) > most:
        raise ValueError(f"{len(strategies):,} strategies, at most {most}")
    for i, strategy in enumerate(strategies):
        try:
            check_strategy_name(strategy.name)
        except ValueError as exc:
            raise ValueError(f"[{i}].name: {exc}") from None
    return strategies


class CaseOutcome(BaseModel):
    """One case of a problem with ``cases:``: its own search's best, over its own reference."""

    name: str
    status: str  # ok | no_valid | build_failed | not_run
    time_ms: OptMillis = None
    reference_ms: OptMillis = None
    reference_source: str | None = None  # measured | seeded
    speedup: OptRatio = None
    config: dict[str, ParamValue] | None = None
    budget_s: OptSeconds = None
    evaluated: Count = 0
    valid: Count = 0
    error: str | None = None
    results_file: RunPath | None = None  # relative to output/


class BestResult(BaseModel):
    branch: str  # a branch name; a run of the original CACAO names a nested path here
    iteration: int
    time_ms: Millis
    speedup: OptRatio = None
    score: OptRatio = None
    config: dict[str, ParamValue] = Field(default_factory=dict)
    kernel_path: RunPath
    spec_path: RunPath | None = None
    cases: list[CaseOutcome] = Field(default_factory=list)  # per shape, with ``cases:``; score is their geomean
    # Set where results are read (store/results.py): the iteration was left behind by a revert.
    # It stays eligible: a revert changes where the branch goes on from, not what was measured.
    superseded: bool = False

    def rank(self) -> tuple[bool, float, float]:
        """Sort key, larger is better: the case score when there is one, else the shortest time."""
        return rank_key(self.time_ms, self.score)


def rank_key(time_ms: float, score: float | None) -> tuple[bool, float, float]:
    """Larger is better. With ``cases:`` the geometric-mean score decides; otherwise time."""
    return (score is not None, score or 0.0, -time_ms)


class BranchManifest(_State):
    """Identity, status and results of one branch. Written only by that branch's worker."""

    name: BranchName
    title: str
    strategy: Strategy
    parent: BranchName | None = None
    parent_iteration: int | None = None
    depth: int = 0
    path_before: int = 0  # iterations spent on the path from the root before this branch began
    status: BranchStatus = "pending"
    iterations_done: Count = 0
    current_iteration: int | None = None
    best: BestResult | None = None
    children: list[BranchName] = Field(default_factory=list)
    stop_reason: str | None = None
    error: str | None = None
    seen_retry_nonce: int = 0
    # Iteration budget of the root-to-leaf path this branch is on (--path-budget), raised by
    # what the user granted an ancestor (its max_iter above its share); None: no path budget.
    path_budget_total: int | None = None
    # The branch plan: written once per branch, again after a user message or a revert.
    plan: str | None = None
    plan_iteration: int | None = None
    plan_seq: int = 0  # the value of steer_seq the plan was written after
    steer_seq: int = 0  # bumped by every applied message and revert: a plan older than this is stale
    # Steering (applied by the worker from the inbox; ``applied`` makes each command count once).
    messages: list[UserMessage] = Field(default_factory=list)
    applied: list[str] = Field(default_factory=list)
    pending_decision: DecisionOverride | None = None
    superseded: list[int] = Field(default_factory=list)  # iterations left behind by a revert (kept on disk)
    base_iteration: int | None = None  # after a revert: the next iteration starts from this one's files
    polish: bool = False  # the run's polish branch: one iteration on the run's best kernel
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)

    def live(self, index: int) -> bool:
        """Whether an iteration is on the branch's current line (not superseded by a revert)."""
        return index not in self.superseded

    # The original CACAO's keys of branch.json, derived from ours in the same write, so that its
    # collect_results.py and scripts find them (store/original_keys.py); ignored when read back.
    @computed_field  # type: ignore[prop-decorator]
    @property
    def best_time_us(self) -> float | None:
        return branch_keys(self)["best_time_us"]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def speedup(self) -> float | None:
        return branch_keys(self)["speedup"]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def current_iter(self) -> int:
        return branch_keys(self)["current_iter"]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def path_iters_consumed(self) -> int:
        return self.path_before


class BranchConfig(_State):
    """Settings the user owns. Written by the UI or CLI; the worker only reads it."""

    max_iter: int = Field(ge=1, le=MAX_ITERATIONS)
    paused: bool = False
    killed: bool = False
    retry_nonce: int = 0  # bumped by the user to ask for one more try after a failure


class OutputStats(BaseModel):
    """The reference's result for one validated buffer (ktt's summary.json ``reference_stats``)."""

    model_config = ConfigDict(extra="ignore")
    buffer: str
    count: int = 0
    min: float | None = None
    max: float | None = None
    mean_abs: float | None = None
    nonfinite: int = 0


class TuneOutcome(BaseModel):
    ran: bool  # False in --dry-run (compile check only) or when the step failed before tuning
    compiled: Count | None = None  # --dry-run: how many of the sampled configurations compiled
    summary_path: RunPath | None = None
    best_ms: OptMillis = None
    speedup: OptRatio = None
    score: OptRatio = None
    reference_ms: OptMillis = None
    best_config: dict[str, ParamValue] | None = None
    evaluated: Count = 0
    valid: Count = 0
    by_status: dict[str, Count] = Field(default_factory=dict)
    space_size: Count = 0
    confirmed: bool = False
    suspect: bool = False
    cases: list[CaseOutcome] = Field(default_factory=list)
    message: str | None = None
    reference_source: str | None = None  # the primary case's: measured | seeded
    warnings: list[str] = Field(default_factory=list)  # e.g. a GPU reference timed by wall clock
    reference_stats: list[OutputStats] = Field(default_factory=list)  # the reference's outputs (prompts)


class ProfileOutcome(BaseModel):
    ran: bool
    path: RunPath | None = None
    roofline: str | None = None
    headline: dict[str, str] = Field(default_factory=dict)  # a few metrics as display strings
    message: str | None = None
    # The two leading bottlenecks with their evidence, the stall ranking and the occupancy
    # limiter (ktt.diagnosis), as the prompts show them: propose, the next author, a child.
    diagnosis: str | None = None


MAX_SUB_STRATEGIES = 4  # sub-strategies one branch decision may open (the original's MAX_STRATEGIES)
MAX_MESSAGE_CHARS = 4000  # one user message to a branch


class ErrorAnalysis(BaseModel):
    """Why an iteration failed and the smallest fix; it goes into the retry's prompts."""

    model_config = ConfigDict(extra="ignore")
    error_type: str = Field(description="compilation | runtime | validation | timeout | performance | none")
    root_cause: str = Field(description="the cause, as specific as the evidence allows")
    suggested_fix: str = Field(description="the smallest change that fixes it")


class Decision(BaseModel):
    """What a branch does after an iteration. The model fills the first group of fields; the
    engine sets the last group (a decision made without the model, or changed by the user)."""

    model_config = ConfigDict(extra="ignore")
    action: Action
    reason: str
    feedback: str = ""  # instructions for the next iteration's author (and plan)
    error_analysis: ErrorAnalysis | None = None  # with retry: the cause and the fix
    sub_strategies: list[Strategy] = Field(default_factory=list)
    skip_implement: bool = False  # the next iteration keeps the kernel and changes only tuning.yaml
    iteration_summary: str = ""  # one line: what was tried -> what happened
    # The next iteration starts from the branch's best unless this says latest (a retry and a
    # configuration-only iteration always start from this iteration's files).
    start_from: StartFrom = "best"
    automatic: bool = False  # decided by the engine without a model call (budget, failed step)
    fallback: str | None = None  # why the rule-based decision stands in for the model's (no usable reply)
    overridden_from: Action | None = None  # the model's action, when the user changed it
    override_id: str | None = None  # the control command that changed it

    @field_validator("sub_strategies")
    @classmethod
    def _sub_strategy_names(cls, strategies: list[Strategy]) -> list[Strategy]:
        """A decision read back (--resume) opens its sub-branches from these names: checked as MasterState's."""
        return _checked_strategies(strategies, MAX_SUB_STRATEGIES)


class UserMessage(BaseModel):
    """A message the user sent a branch; it reaches the branch's next prompts."""

    id: str
    text: str
    at: float = Field(default_factory=now)
    iteration: int | None = None  # the iteration in progress (or next) when it was applied


class DecisionOverride(BaseModel):
    """The user's choice for the branch's next decision, waiting to be used."""

    id: str
    action: Action
    at: float = Field(default_factory=now)


CommandKind = Literal["message", "revert", "decision", "delete"]


class ControlCommand(BaseModel):
    """One steering request, one file in the branch's inbox/, written once by the UI or CLI.

    The worker applies it at the branch's next step boundary (or on --resume) and records its
    id in branch.json in the same write as its effect, so it counts exactly once.
    """

    model_config = ConfigDict(extra="forbid")
    schema_version: int = SCHEMA_VERSION
    id: str
    kind: CommandKind
    text: str | None = Field(default=None, max_length=MAX_MESSAGE_CHARS)  # message
    iteration: int | None = Field(default=None, ge=1)  # revert: continue from this iteration's kernel
    action: Action | None = None  # decision
    created_at: float = Field(default_factory=now)
    source: str = "cli"

    @model_validator(mode="after")
    def _fields_of_kind(self) -> ControlCommand:
        needed = {"message": self.text, "revert": self.iteration, "decision": self.action, "delete": True}
        if needed[self.kind] is None or (self.kind == "message" and not (self.text or "").strip()):
            field = {"message": "text", "revert": "iteration", "decision": "action"}[self.kind]
            raise ValueError(f"a {self.kind} command needs {field}")
        return self


class SampleOutcome(BaseModel):
    """One of the K authoring attempts of an iteration (``--samples K``)."""

    index: int  # 1..K
    ok: bool = False
    message: str | None = None  # the end_step summary, or why the attempt failed
    tool_calls: Count = 0
    llm_calls: Count = 0
    input_tokens: Count = 0
    output_tokens: Count = 0
    cost_usd: Usd = 0.0
    valid: bool | None = None  # validated on the GPU (None: not validated, e.g. a dry run)
    probe_ms: OptMillis = None  # the short probe's best time (None: not probed or nothing valid)
    chosen: bool = False
    fingerprint: str | None = None


class AuthorOutcome(BaseModel):
    tool_calls: Count = 0
    compile_checks: Count = 0
    compile_failures: Count = 0
    validations: Count = 0  # validate tool runs
    llm_calls: Count = 0  # this step's model calls, their tokens and cost
    input_tokens: Count = 0
    output_tokens: Count = 0
    cost_usd: Usd = 0.0
    ok: bool = False
    message: str | None = None
    last_check: str | None = None  # the last failed check's text (what decide sees after a failed step)
    binary_fingerprint: str | None = None  # of the files the step ended with (nodes/fingerprint.py)
    samples: list[SampleOutcome] = Field(default_factory=list)  # with --samples K > 1
    # The check that accepted the files: its source fingerprint, what it compiled, and its report
    # (resources, occupancy, instruction mix) as the model read it, for propose and decide; a dry
    # run's run step reports it instead of compiling the same files again.
    checked_fingerprint: str | None = None
    checked_configs: int | None = None
    compiled_configs: int | None = None
    checked_space: int | None = None
    check_report: str | None = None


class IterState(_State):
    """One iteration of one branch. Written only by that branch's worker."""

    branch: BranchName
    index: int = Field(ge=1, le=MAX_ITERATIONS)
    status: IterStatus = "planning"
    started_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)
    plan: str | None = None
    author: AuthorOutcome | None = None
    kernel_path: RunPath | None = None
    spec_path: RunPath | None = None
    run: TuneOutcome | None = None
    profile: ProfileOutcome | None = None
    proposal: str | None = None
    decision: Decision | None = None
    error: str | None = None
    attempt: int = 1
    # What the iteration was asked to do, fixed when it starts (from the previous decision).
    mode: IterMode = "first"
    base_iteration: int | None = None  # the iteration whose files it started from
    plan_seq: int | None = None  # steer_seq when this iteration wrote the branch plan
    # De-duplication: the normalised source + tuning space, and the compiled sampled configurations.
    fingerprint: str | None = None
    binary_fingerprint: str | None = None
    duplicate_of: str | None = None  # "branch/iterN" whose identical files were tuned already

    # The original CACAO's keys of iterN/state.json (store/original_keys.py); ignored when read back.
    @computed_field  # type: ignore[prop-decorator]
    @property
    def iter_num(self) -> int:
        return self.index

    @computed_field  # type: ignore[prop-decorator]
    @property
    def results_summary(self) -> dict[str, object] | None:
        return iteration_summary(self.run)


class PoolBranch(BaseModel):
    """One branch's part of the iteration pool."""

    share: Count  # its max_iter when it was created: iterations the user grants above it are outside the pool
    drawn: list[int] = Field(default_factory=list)  # iteration numbers begun (each counted once)
    reserved: bool = False  # its next iteration is already drawn (promised when its last was decided)
    reserved_after: int | None = None  # the iteration whose end made the reservation (engine/pool.py: reconcile)
    grants: Count = 0  # iterations the pool granted above its share
    finished: bool = False  # stopped or done: its unused share went back to the pool


class PoolState(_State):
    """The run's iteration pool (``--budget-iters``): written only by the engine."""

    total: Count
    branches: dict[BranchName, PoolBranch] = Field(default_factory=dict)
    polish: BranchName | None = None  # the polish branch, once created
    events: list[str] = Field(default_factory=list)  # the allocation's story, newest last (bounded)


class IterationPoint(BaseModel):
    """One iteration of a branch in the timeline ``cacao --best`` prints."""

    iteration: int
    status: str
    time_ms: OptMillis = None  # the tuned best (the primary case's); None: no result
    speedup: OptRatio = None
    score: OptRatio = None
    action: str | None = None  # the decision taken after it
    new_best: bool = False  # the branch's best so far improved here
    superseded: bool = False  # left behind by a revert (kept on disk; still counts for the best)


class BranchSummary(BaseModel):
    name: str
    title: str
    parent: str | None = None
    depth: int = 0
    status: str
    iterations: Count
    best_ms: OptMillis = None
    speedup: OptRatio = None
    score: OptRatio = None
    best_iteration: int | None = None
    stop_reason: str | None = None
    timeline: list[IterationPoint] = Field(default_factory=list)
    superseded: list[int] = Field(default_factory=list)  # iterations a revert left behind
    # The best kernel, relative to output/, where it is not branches/<name>/iterN/kernels.cu
    # (a run the original CACAO wrote: nested branches, kernel.cu); None: that usual place.
    kernel_path: RunPath | None = None


class OriginalBranchEntry(BaseModel):
    """One entry of ``all_branches``, as the original's final_results.json has it."""

    name: str
    path: str
    status: str  # success (a timed best) | failed (finished without one) | running
    best_time_us: OptMicros = None
    speedup: OptRatio = None
    iterations: Count = 0


class FinalResults(_State):
    problem_name: str
    finished_at: float = Field(default_factory=now)
    complete: bool = True  # False when rebuilt from a run that did not finish
    rebuilt: bool = False
    # The run's verdict (engine/verdict.py): ok (a kernel was timed; in a dry run, compile-checked
    # and kept), budget (the LLM budget ended it after one), failed (nothing to show; the message
    # says why) or interrupted. None: rebuilt from the branch files, or written by an older version.
    run_status: str | None = None
    run_message: str | None = None
    dry_run: bool = False
    reference_ms: OptMillis = None
    reference_source: str | None = None
    # A reference timed by wall clock (output/reference_time.json's provenance): reference_ms is the
    # median of this many calls, which took min to max ms. None: one value (a seed, CUDA events).
    reference_samples: int | None = None
    reference_min_ms: OptMillis = None
    reference_max_ms: OptMillis = None
    cases: list[str] = Field(default_factory=list)  # the problem's extra shapes; scores matter only with them
    best: BestResult | None = None
    branches: list[BranchSummary] = Field(default_factory=list)
    tokens: dict[str, Count] = Field(default_factory=dict)
    cost_usd: OptUsd = None
    illustrative_usage: bool = False  # a replay's: the recording's tokens and cost, nothing was spent
    # The original CACAO's keys, beside ours, so scripts written for it keep working. Its
    # ``speedup`` is the geometric mean over the cases when the problem has cases.
    best_branch: str | None = None
    best_config: dict[str, ParamValue] | None = None
    best_time_us: OptMicros = None
    speedup: OptRatio = None
    reference_time_us: OptMicros = None
    total_branches: Count = 0
    all_branches: list[OriginalBranchEntry] = Field(default_factory=list)
