"""What the app knows about a run, folded from the event stream (and seeded from disk).

Plain Python, no Textual: the flush timer applies a batch of events here, learns which
branches changed, and then relabels only those tree nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cacao_tui.engine import events as ev
from cacao_tui.store.phases import WHAT
from cacao_tui.store.state import INTERRUPTED, TERMINAL_BRANCH, BranchConfig, BranchManifest, IterState

RUN = ""  # the key of run-wide changes (status bar, root node)
# Iteration statuses that go no further; "interrupted" and "killed" are shown only: what the end
# of the run, or the branch's kill, cut short (its state file still says where it was).
ITER_FINAL = ("decided", "failed", "superseded", INTERRUPTED, "killed")


@dataclass(frozen=True)
class ProcessEnded:
    """Not an engine event: what a view of a run in another process notices when that process is
    gone and the run's log has no end (it failed to start, or was killed). Folded in like one."""

    phase: str  # what the view shows: "failed to start", "ended (exit N)", "killed"
    ts: float


@dataclass(frozen=True)
class Selection:
    """What the tree cursor is on: the run (no branch), a branch, or one iteration of it."""

    branch: str | None = None
    iteration: int | None = None

    @property
    def label(self) -> str:
        if self.branch is None:
            return "run"
        return self.branch if self.iteration is None else f"{self.branch} · iter{self.iteration}"


@dataclass
class IterationView:
    index: int
    status: str = "planning"
    best_ms: float | None = None
    speedup: float | None = None
    message: str | None = None
    action: str | None = None  # the decision's action
    summary: str | None = None  # the decision's one-line iteration summary


@dataclass
class BranchView:
    name: str
    title: str = ""
    description: str = ""
    parent: str | None = None
    depth: int = 0
    status: str = "pending"
    max_iter: int = 0
    iterations_done: int = 0
    current: int | None = None
    best_ms: float | None = None
    speedup: float | None = None
    score: float | None = None  # with cases: the best's geometric-mean score
    reason: str | None = None
    iterations: dict[int, IterationView] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.status not in TERMINAL_BRANCH and self.status != INTERRUPTED

    def cut_short(self, status: str) -> None:
        """Iterations that were still on their way end as ``status`` (killed, interrupted)."""
        for it in self.iterations.values():
            if it.status not in ITER_FINAL:
                it.status = status

    def iteration(self, index: int) -> IterationView:
        if index not in self.iterations:
            self.iterations[index] = IterationView(index)
        return self.iterations[index]

    def best_per_iteration(self) -> list[float]:
        """Best tuned time of each iteration that produced one, in order (the sparkline)."""
        return [it.best_ms for _, it in sorted(self.iterations.items()) if it.best_ms is not None]


@dataclass
class RunView:
    info: ev.RunStarted | None = None
    phase: str = "starting"
    phase_message: str | None = None
    branches: dict[str, BranchView] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    llm_calls: int = 0
    llm_errors: int = 0
    best_branch: str | None = None
    best_ms: float | None = None
    best_speedup: float | None = None
    best_score: float | None = None
    finished: ev.RunFinished | None = None
    ended_at: float | None = None  # the run's process ended without a run_finished (ProcessEnded)

    # ---- queries -------------------------------------------------------------
    def any_active(self) -> bool:
        return any(b.active for b in self.branches.values())

    def branch(self, name: str) -> BranchView:
        if name not in self.branches:
            self.branches[name] = BranchView(name=name)
        return self.branches[name]

    # ---- folding events ------------------------------------------------------
    def apply(self, event: object) -> set[str]:
        """Fold one event in; return the keys that changed (branch names, or RUN)."""
        handler = _HANDLERS.get(type(event))
        return handler(self, event) if handler else set()

    def _run_started(self, e: ev.RunStarted) -> set[str]:
        self.info = e
        self.finished = self.ended_at = None  # a --resume: the run goes on
        if e.llm_calls and not self.llm_calls:  # a resumed run: the totals so far
            self.llm_calls = e.llm_calls
            self.input_tokens, self.output_tokens, self.cost_usd = e.input_tokens, e.output_tokens, e.cost_usd
        return {RUN}

    def _phase(self, e: ev.MasterPhase) -> set[str]:
        self.phase, self.phase_message = e.phase, e.message
        return {RUN}

    def _branch_added(self, e: ev.BranchAdded) -> set[str]:
        b = self.branch(e.branch)
        b.title, b.description, b.parent, b.depth = e.title, e.description, e.parent, e.depth
        b.status, b.max_iter, b.iterations_done = e.status, e.max_iter, e.iterations_done
        if e.best_ms is not None:
            b.best_ms, b.speedup = e.best_ms, e.speedup
        return {e.branch}

    def _branch_status(self, e: ev.BranchStatusChanged) -> set[str]:
        b = self.branch(e.branch)
        b.status, b.max_iter, b.iterations_done, b.reason = e.status, e.max_iter, e.iterations_done, e.reason
        if e.iteration is not None:
            b.current = e.iteration
        if e.status == "killed":
            b.cut_short("killed")
        return {e.branch, RUN}

    def _iteration_status(self, e: ev.IterationStatusChanged) -> set[str]:
        b = self.branch(e.branch)
        it = b.iteration(e.iteration)
        it.status, it.message = e.status, e.message
        b.current = e.iteration
        return {e.branch}

    def _decision(self, e: ev.DecisionMade) -> set[str]:
        it = self.branch(e.branch).iteration(e.iteration)
        it.action = e.action
        if e.decision is not None and e.decision.iteration_summary:
            it.summary = e.decision.iteration_summary
        return {e.branch}

    def _branch_removed(self, e: ev.BranchRemoved) -> set[str]:
        self.branches.pop(e.branch, None)
        if self.best_branch == e.branch:
            self.best_branch = self.best_ms = self.best_speedup = self.best_score = None
        return {e.branch, RUN}

    def _llm_call(self, e: ev.LLMCallEvent) -> set[str]:
        self.llm_calls += 1
        self.llm_errors += 1 if e.call.error else 0
        run, usage = e.run, e.call.usage
        if run.input_tokens or run.output_tokens or run.cost_usd:
            self.input_tokens, self.output_tokens, self.cost_usd = run.input_tokens, run.output_tokens, run.cost_usd
        else:  # an engine that does not keep running totals
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            self.cost_usd += usage.cost_usd
        return {RUN}

    def _tuning_finished(self, e: ev.TuningFinished) -> set[str]:
        b = self.branch(e.branch)
        it = b.iteration(e.iteration)
        r = e.outcome
        it.best_ms, it.speedup = r.best_ms, r.speedup
        if r.best_ms is not None and (b.best_ms is None or r.best_ms < b.best_ms):
            b.best_ms, b.speedup = r.best_ms, r.speedup
        return {e.branch}

    def _new_best(self, e: ev.NewBest) -> set[str]:
        b = self.branch(e.branch)
        b.best_ms, b.speedup, b.score = e.time_ms, e.speedup, e.score
        changed = {e.branch}
        if e.run_best:
            self.best_branch, self.best_ms, self.best_speedup = e.branch, e.time_ms, e.speedup
            self.best_score = e.score
            changed.add(RUN)
        return changed

    def _run_finished(self, e: ev.RunFinished) -> set[str]:
        self.finished, self.ended_at = e, None
        self.phase = "finished" if e.status == "ok" else e.status
        if e.best_ms is not None:
            self.best_branch, self.best_ms, self.best_speedup = e.best_branch, e.best_ms, e.speedup
            self.best_score = e.score
        waiting = set()
        for name, phase in e.waiting.items():  # a split run's phase ended (--phase): what waits for what
            if name in self.branches and self.branches[name].active:
                self.branches[name].status = f"waits for {WHAT.get(phase, phase)}"
                waiting.add(name)
        return {RUN, *waiting, *self._end_branches(keep=waiting)}

    def _end_branches(self, keep: set[str] | None = None) -> set[str]:
        """The run is over: nothing it left on its way is still running (pending, running and
        paused branches read interrupted; their unfinished iterations too), except the branches
        a split run's phase left waiting for the other phase (``keep``)."""
        changed = set()
        for b in self.branches.values():
            if b.active and b.name not in (keep or set()):
                b.status = INTERRUPTED
                b.cut_short(INTERRUPTED)
                changed.add(b.name)
        return changed

    def _process_ended(self, e: ProcessEnded) -> set[str]:
        """The view says so and its clock stops, instead of "starting" with the timer running."""
        self.phase, self.ended_at = e.phase, e.ts
        return {RUN, *self._end_branches()}

    # ---- seeding from disk ---------------------------------------------------
    def seed_branch(self, manifest: BranchManifest, config: BranchConfig | None, iterations: list[IterState]) -> None:
        """Fill in a branch from its files (a resumed run, or events sent before the app subscribed)."""
        b = self.branch(manifest.name)
        b.title, b.description = manifest.title, manifest.strategy.description
        b.parent, b.depth, b.status = manifest.parent, manifest.depth, manifest.status
        b.iterations_done, b.current, b.reason = (
            manifest.iterations_done,
            manifest.current_iteration,
            manifest.stop_reason,
        )
        if config is not None:
            b.max_iter = config.max_iter
        if manifest.best is not None:
            b.best_ms, b.speedup, b.score = manifest.best.time_ms, manifest.best.speedup, manifest.best.score
        for state in iterations:
            it = b.iteration(state.index)
            it.status = "superseded" if state.index in manifest.superseded else state.status
            if manifest.status == "killed" and it.status not in ITER_FINAL:
                it.status = "killed"
            if state.run is not None:
                it.best_ms, it.speedup = state.run.best_ms, state.run.speedup
            if state.decision is not None:
                it.action = state.decision.action
                it.summary = state.decision.iteration_summary or None


_HANDLERS = {
    ev.RunStarted: RunView._run_started,
    ev.MasterPhase: RunView._phase,
    ev.BranchAdded: RunView._branch_added,
    ev.BranchStatusChanged: RunView._branch_status,
    ev.IterationStatusChanged: RunView._iteration_status,
    ev.LLMCallEvent: RunView._llm_call,
    ev.TuningFinished: RunView._tuning_finished,
    ev.NewBest: RunView._new_best,
    ev.DecisionMade: RunView._decision,
    ev.BranchRemoved: RunView._branch_removed,
    ev.RunFinished: RunView._run_finished,
    ProcessEnded: RunView._process_ended,
}


def touches(event: object, selection: Selection) -> bool:
    """Whether an event changes what the details pane shows for this selection."""
    branch = getattr(event, "branch", None)
    if selection.branch is None:
        return isinstance(event, ev.LLMCallEvent | ev.MasterPhase | ev.RunFinished) and branch is None
    if branch != selection.branch:
        return False
    iteration = getattr(event, "iteration", None)
    return selection.iteration is None or iteration is None or iteration == selection.iteration
