"""The typed event stream of a run.

The engine emits these; the Textual app, the headless renderer and the JSON-lines run
log are three subscribers of the same stream and never reach into engine internals.
Subscribers are plain callables invoked synchronously in the engine's event loop, so
they must be quick (buffer and render later).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from cacao_tui.llm.progress import CallProgress
from cacao_tui.llm.recording import CallRecord
from cacao_tui.llm.types import Usage
from cacao_tui.store.state import Decision, ProfileOutcome, TuneOutcome
from ktt.checked_numbers import Count, Millis, OptMillis, OptRatio, OptUsd, Usd
from ktt.protocol import Progress


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore")
    ts: float = Field(default_factory=time.time)
    seq: int = 0  # set by the bus, increasing


class RunStarted(_Event):
    type: Literal["run_started"] = "run_started"
    problem: str
    problem_dir: str
    provider: str
    model: str
    gpus: list[int]
    gpu_name: str | None = None
    arch: str = "sm_90"
    dry_run: bool = False
    resumed: bool = False
    max_iter: int
    max_depth: int
    n_strategies: int
    path_budget: int | None = None  # --path-budget: iterations per root-to-leaf path (max_iter is then unused)
    # What an earlier part of a resumed run spent (read back from its call records).
    llm_calls: Count = 0
    input_tokens: Count = 0
    output_tokens: Count = 0
    cost_usd: Usd = 0.0
    budget_usd: OptUsd = None
    phase: str | None = None  # --phase llm | gpu: a split run's part (store/phases.py)


class MasterPhase(_Event):
    type: Literal["master_phase"] = "master_phase"
    phase: str  # analyzing | strategizing | dispatched | finished | failed
    message: str | None = None


class BranchAdded(_Event):
    type: Literal["branch_added"] = "branch_added"
    branch: str
    title: str
    description: str
    parent: str | None = None
    depth: int = 0
    max_iter: int
    status: str = "pending"
    iterations_done: Count = 0
    best_ms: OptMillis = None
    speedup: OptRatio = None


class BranchStatusChanged(_Event):
    type: Literal["branch_status"] = "branch_status"
    branch: str
    status: str  # pending | running | paused | done | stopped | killed | failed
    iteration: int | None = None
    iterations_done: int = 0
    max_iter: int
    reason: str | None = None


class IterationStatusChanged(_Event):
    type: Literal["iteration_status"] = "iteration_status"
    branch: str
    iteration: int
    status: str  # planning ... decided | failed
    message: str | None = None


class LogLine(_Event):
    type: Literal["log"] = "log"
    level: Literal["debug", "info", "warning", "error"] = "info"
    message: str
    branch: str | None = None
    iteration: int | None = None


class JobPlaced(LogLine):
    """Where a tuning or profiling job runs (host, Ray node, GPU); shown as a log line of its branch."""

    type: Literal["job_placed"] = "job_placed"  # type: ignore[assignment]
    job: str
    host: str
    node_id: str = "local"
    gpu: str = ""
    attempt: int = 1


class LLMCallEvent(_Event):
    """One LLM call, as the LLM layer recorded it, and the run's totals after it."""

    type: Literal["llm_call"] = "llm_call"
    # The call's record without its texts (system, messages, tools, response), which can be
    # large; they stay in the record's file, ``record_path``.
    call: CallRecord
    record_path: str | None = None
    run: Usage = Field(default_factory=Usage)  # the run's totals so far (tokens, cost), for the status bar

    @classmethod
    def of(cls, record: CallRecord, run: Usage | None = None) -> LLMCallEvent:
        head = record.model_copy(update={"system": None, "messages": [], "tools": [], "response": None})
        path = str(record.path) if record.path is not None else None
        return cls(call=head, record_path=path, run=run if run is not None else Usage())

    @property
    def branch(self) -> str | None:
        return self.call.branch

    @property
    def iteration(self) -> int | None:
        return self.call.iteration


class LLMCallProgress(_Event):
    """A call in progress, as the LLM layer reports it: the reply streaming in (its tail,
    tokens so far, tokens/s) or the wait before a retry. A few per second per call at most;
    kept out of the bus history and the run log (a wait is logged)."""

    type: Literal["llm_progress"] = "llm_progress"
    progress: CallProgress

    @property
    def branch(self) -> str | None:
        return self.progress.branch

    @property
    def iteration(self) -> int | None:
        return self.progress.iteration


class KernelWritten(_Event):
    type: Literal["kernel_written"] = "kernel_written"
    branch: str
    iteration: int
    kernel_path: str
    spec_path: str | None = None


class TuningProgress(_Event):
    """A progress line of the tuner (``ktt tune``), as it sent it."""

    type: Literal["tuning_progress"] = "tuning_progress"
    branch: str
    iteration: int
    progress: Progress

    @property
    def phase(self) -> str:
        """The phase, with the case being tuned when there are several."""
        p = self.progress
        if p.cases_total <= 1 or not p.case:
            return p.phase
        return f"{p.phase} {p.case} ({p.case_index + 1}/{p.cases_total})"


class TuningFinished(_Event):
    """The tuning step's outcome (``nodes/run.py``), as saved in the iteration's state."""

    type: Literal["tuning_finished"] = "tuning_finished"
    branch: str
    iteration: int
    outcome: TuneOutcome


class ProfileMetrics(_Event):
    """The profiling step's outcome (``nodes/profile.py``), as saved in the iteration's state."""

    type: Literal["profile_metrics"] = "profile_metrics"
    branch: str
    iteration: int
    outcome: ProfileOutcome


class DecisionMade(_Event):
    type: Literal["decision"] = "decision"
    branch: str
    iteration: int
    action: str
    reason: str
    children: list[str] = Field(default_factory=list)
    decision: Decision | None = None  # the whole decision: feedback, error analysis, summary, ...


class BranchRemoved(_Event):
    """A branch was deleted: its directory moved to ``trash`` (nothing is lost)."""

    type: Literal["branch_removed"] = "branch_removed"
    branch: str
    trash: str


class NewBest(_Event):
    type: Literal["new_best"] = "new_best"
    branch: str
    iteration: int
    time_ms: Millis
    speedup: OptRatio = None  # the primary case's
    score: OptRatio = None  # with cases: the geometric mean of the case speedups (what ranks it)
    run_best: bool = False  # also the best of the whole run


class RunFinished(_Event):
    type: Literal["run_finished"] = "run_finished"
    # engine/verdict.py; no_result: written by earlier versions (now: failed, with why); waiting: a
    # split run's phase ended with work for the other phase (--phase; the message says what waits and
    # the command that continues it)
    status: Literal["ok", "no_result", "failed", "interrupted", "budget", "waiting"]
    message: str | None = None
    final_results: str | None = None
    best_ms: OptMillis = None
    speedup: OptRatio = None  # the primary case's
    score: OptRatio = None  # with cases: the best's geometric-mean score
    best_branch: str | None = None
    waiting: dict[str, str] = Field(default_factory=dict)  # status waiting: branch -> the phase it waits for


Event = Annotated[
    RunStarted
    | MasterPhase
    | BranchAdded
    | BranchStatusChanged
    | IterationStatusChanged
    | LogLine
    | JobPlaced
    | LLMCallEvent
    | LLMCallProgress
    | KernelWritten
    | TuningProgress
    | TuningFinished
    | ProfileMetrics
    | DecisionMade
    | BranchRemoved
    | NewBest
    | RunFinished,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event)

Subscriber = Callable[[_Event], None]


def parse_event(line: str) -> _Event:
    return EVENT_ADAPTER.validate_json(line)


class EventBus:
    """Fan-out of events to subscribers. A failing subscriber is dropped, never the engine."""

    def __init__(self, history_limit: int = 20_000) -> None:
        self._subscribers: list[Subscriber] = []
        self._seq = 0
        self.errors: list[str] = []
        # Recent events (tuning and LLM progress excluded) for a view that subscribes late.
        self.history: deque[_Event] = deque(maxlen=history_limit)

    def subscribe(self, fn: Subscriber, *, replay: bool = False) -> Callable[[], None]:
        """Add a subscriber; with ``replay`` it first receives the recorded history."""
        if replay:
            for event in list(self.history):
                fn(event)
        self._subscribers.append(fn)

        def unsubscribe() -> None:
            if fn in self._subscribers:
                self._subscribers.remove(fn)

        return unsubscribe

    def emit(self, event: _Event) -> None:
        self._seq += 1
        event.seq = self._seq
        if not isinstance(event, TuningProgress | LLMCallProgress):
            self.history.append(event)
        for fn in list(self._subscribers):
            try:
                fn(event)
            except Exception as exc:  # a broken view must not stop the run
                self.errors.append(f"{getattr(fn, '__qualname__', fn)}: {exc!r}")
                self._subscribers.remove(fn)

    def log(
        self, message: str, *, level: str = "info", branch: str | None = None, iteration: int | None = None
    ) -> None:
        self.emit(LogLine(level=level, message=message, branch=branch, iteration=iteration))  # type: ignore[arg-type]
