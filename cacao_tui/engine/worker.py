"""One branch's loop: iterate plan -> author -> run -> profile -> propose -> decide until done.

Crash safety: every step's product is saved in the iteration's state.json (atomically)
before the next step starts, so after a SIGKILL ``--resume`` redoes at most the step
that was in flight; a decided iteration is never redone, and applying a decision is
idempotent (children are created only if missing). The worker is the only writer of
branch.json and of its iterations' state.json; it only reads branch_config.json.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from cacao_tui.engine.control import read_branch_config
from cacao_tui.engine.events import (
    BranchStatusChanged,
    DecisionMade,
    IterationStatusChanged,
    KernelWritten,
    NewBest,
    ProfileMetrics,
    TuningFinished,
    TuningProgress,
)
from cacao_tui.llm import BudgetExceeded, LLMError
from cacao_tui.nodes.author import AuthorFailed, author
from cacao_tui.nodes.context import BranchView
from cacao_tui.nodes.decide import decide
from cacao_tui.nodes.plan import plan
from cacao_tui.nodes.profile import profile_best
from cacao_tui.nodes.propose import propose
from cacao_tui.nodes.run import EnvironmentFailure, run_tuning
from cacao_tui.nodes.single_shot import implement_and_configure
from cacao_tui.store.atomic import read_model, read_model_or_none, write_model
from cacao_tui.store.layout import BranchLayout
from cacao_tui.store.results import best_candidate
from cacao_tui.store.state import (
    TERMINAL_BRANCH,
    BranchConfig,
    BranchManifest,
    Decision,
    IterState,
    Strategy,
)
from ktt.protocol import Progress

if TYPE_CHECKING:
    from cacao_tui.engine.engine import Engine

T = TypeVar("T")
PAUSE_POLL_S = 1.0


class BranchKilled(Exception):
    pass


class BranchReporter:
    """Turns a step's reports into events for this branch."""

    def __init__(self, worker: BranchWorker) -> None:
        self.worker = worker

    def log(self, message: str, level: str = "info") -> None:
        self.worker.engine.bus.log(message, level=level, branch=self.worker.name, iteration=self.worker.iteration)

    def tuning_progress(self, progress: Progress) -> None:
        w = self.worker
        w.engine.bus.emit(
            TuningProgress(
                branch=w.name,
                iteration=w.iteration or 0,
                evaluated=progress.evaluated,
                valid=progress.valid,
                space_size=progress.space_size,
                best_ms=progress.best_ms,
                best_config=progress.best_config,
                by_status=progress.by_status,
                elapsed_s=progress.elapsed_s,
                budget_s=progress.budget_s,
                phase=progress.phase
                if progress.cases_total <= 1 or not progress.case
                else f"{progress.phase} {progress.case} ({progress.case_index + 1}/{progress.cases_total})",
            )
        )

    def kernel_written(self, kernel: Path, spec: Path | None) -> None:
        w = self.worker
        w.engine.bus.emit(
            KernelWritten(
                branch=w.name,
                iteration=w.iteration or 0,
                kernel_path=str(kernel),
                spec_path=str(spec) if spec else None,
            )
        )


class BranchWorker:
    def __init__(self, engine: Engine, name: str) -> None:
        self.engine = engine
        self.name = name
        self.layout: BranchLayout = engine.layout.branch(name)
        self.iteration: int | None = None
        self.wake = asyncio.Event()
        self.kill_requested = False
        self._step: asyncio.Task | None = None
        self.reporter = BranchReporter(self)

    # -- files -------------------------------------------------------------------------------
    def manifest(self) -> BranchManifest:
        return read_model(self.layout.manifest, BranchManifest)

    def save(self, m: BranchManifest) -> None:
        m.updated_at = time.time()
        write_model(self.layout.manifest, m)

    def config(self) -> BranchConfig:
        return read_branch_config(self.layout, self.engine.deps.settings.max_iter)

    def save_state(self, st: IterState) -> None:
        st.updated_at = time.time()
        write_model(self.layout.iteration(st.index).state, st)

    # -- status ------------------------------------------------------------------------------
    def set_status(self, m: BranchManifest, status: str, reason: str | None = None) -> None:
        if m.status == status and reason is None:
            return
        m.status = status  # type: ignore[assignment]
        if reason is not None and status in TERMINAL_BRANCH:
            m.stop_reason = reason
        self.save(m)
        cfg = self.config()
        self.engine.bus.emit(
            BranchStatusChanged(
                branch=self.name,
                status=status,
                iteration=m.current_iteration,
                iterations_done=m.iterations_done,
                max_iter=cfg.max_iter,
                reason=reason,
            )
        )

    def set_iter_status(self, st: IterState, status: str, message: str | None = None) -> None:
        st.status = status  # type: ignore[assignment]
        self.save_state(st)
        self.engine.bus.emit(
            IterationStatusChanged(branch=self.name, iteration=st.index, status=status, message=message)
        )

    # -- control -----------------------------------------------------------------------------
    async def honour_control(self, m: BranchManifest) -> BranchConfig:
        """Wait while paused; raise BranchKilled when a kill was asked for."""
        cfg = self.config()
        paused_here = False
        while cfg.paused and not cfg.killed and not self.kill_requested:
            if not paused_here:
                self.set_status(m, "paused")
                paused_here = True
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), PAUSE_POLL_S)
            cfg = self.config()
        if cfg.killed or self.kill_requested:
            raise BranchKilled()
        if paused_here or m.status != "running":
            self.set_status(m, "running")
        return cfg

    def request_kill(self) -> None:
        self.kill_requested = True
        self.wake.set()
        if self._step is not None and not self._step.done():
            self._step.cancel()

    async def guarded(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run one step as its own task, so a kill can cancel it without cancelling the worker."""
        self._step = asyncio.ensure_future(work())
        try:
            return await self._step
        except asyncio.CancelledError:
            if self.kill_requested:
                raise BranchKilled() from None
            raise
        finally:
            self._step = None

    # -- the loop ----------------------------------------------------------------------------
    async def run(self) -> None:
        m = self.manifest()
        cfg = self.config()
        if m.status in TERMINAL_BRANCH:
            if cfg.killed or cfg.retry_nonce <= m.seen_retry_nonce:
                return
            m.seen_retry_nonce = cfg.retry_nonce
            m.stop_reason = None
            self.engine.bus.log("retry requested: one more iteration", branch=self.name)
        async with self.engine.slots:
            try:
                await self._loop(m)
            except BranchKilled:
                self.set_status(self.manifest(), "killed", "killed by the user")
            except BudgetExceeded as exc:
                self.set_status(self.manifest(), "stopped", f"LLM budget reached: {exc}")
                self.engine.budget_reached = True
            except (LLMError, EnvironmentFailure) as exc:
                m = self.manifest()
                m.error = str(exc)
                self.set_status(m, "failed", str(exc))
                self.engine.bus.log(f"branch failed: {exc}", level="error", branch=self.name)

    async def _loop(self, m: BranchManifest) -> None:
        retried = False
        if m.status in TERMINAL_BRANCH:  # a retry of a finished branch
            retried = True
        while True:
            cfg = await self.honour_control(m)
            idx = m.current_iteration if m.current_iteration is not None else m.iterations_done + 1
            st = read_model_or_none(self.layout.iteration(idx).state, IterState)
            if st is None or st.decision is None:
                # With a path budget, branch_config.json starts at what the budget leaves for this
                # branch (Engine.create_branch); the user may change it.
                limit = cfg.max_iter
                if st is None and m.iterations_done >= limit and not retried:
                    self.set_status(m, "done", f"iteration budget reached ({m.iterations_done}/{limit})")
                    return
                retried = False
                m.current_iteration = idx
                self.save(m)
                st = await self.run_iteration(m, idx, st)
                m = self.manifest()
            if await self.apply(m, st):
                return
            m = self.manifest()

    def view(self, m: BranchManifest, idx: int, cfg: BranchConfig) -> BranchView:
        base_kernel = base_spec = label = None
        if m.best is not None:
            best_root = self.engine.layout.output / Path(m.best.kernel_path).parent
            label = f"this branch's best so far, iteration {m.best.iteration}, {m.best.time_ms:.4g} ms"
            base_kernel, base_spec = _read_pair(best_root)
        elif (latest := self.latest_kernel(idx)) is not None:
            # Nothing timed yet (a dry run, or no valid configuration): go on from the last kernel
            # this branch wrote, unless that iteration asked for a retry.
            base_kernel, base_spec = _read_pair(self.layout.iteration(latest).root)
            label = f"this branch's latest kernel, iteration {latest} (not timed)"
        elif m.parent is not None and m.parent_iteration is not None:
            parent_root = self.engine.layout.branch(m.parent).iteration(m.parent_iteration).root
            base_kernel, base_spec = _read_pair(parent_root)
            label = f"the kernel this branch starts from (branch {m.parent}, iteration {m.parent_iteration})"
        return BranchView(
            name=self.name,
            title=m.title,
            strategy=m.strategy,
            depth=m.depth,
            parent=m.parent,
            layout=self.layout,
            reporter=self.reporter,
            iteration=idx,
            iterations_done=m.iterations_done,
            max_iter=cfg.max_iter,
            best=m.best,
            base_kernel=base_kernel,
            base_spec=base_spec,
            base_label=label,
        )

    def latest_kernel(self, before: int) -> int | None:
        for i in reversed(self.layout.iteration_indices()):
            if i >= before:
                continue
            st = read_model_or_none(self.layout.iteration(i).state, IterState)
            if st is None or st.author is None or not st.author.ok:
                continue
            if st.decision is not None and st.decision.action == "retry":
                return None
            return i
        return None

    async def run_iteration(self, m: BranchManifest, idx: int, st: IterState | None) -> IterState:
        deps = self.engine.deps
        self.iteration = idx
        st = st or IterState(branch=self.name, index=idx)
        view = self.view(m, idx, self.config())
        view.it.root.mkdir(parents=True, exist_ok=True)

        if st.plan is None:
            self.set_iter_status(st, "planning")
            st.plan = await self.guarded(lambda: plan(deps, view))

        if st.author is None or not st.author.ok:
            await self.honour_control(m)
            self.set_iter_status(st, "implementing")
            try:
                write = implement_and_configure if deps.settings.single_shot else author
                st.author = await self.guarded(lambda: write(deps, view, st.plan or ""))
            except AuthorFailed as exc:
                st.author = exc.outcome
                st.error = f"authoring failed: {exc}"
                st.decision = self.automatic_decision(m, st.error)
                self.set_iter_status(st, "failed", st.error)
                self.reporter.log(st.error, "warning")
                self.emit_decision(st)
                return st
            st.kernel_path = str(view.it.kernel.relative_to(self.engine.layout.output))
            st.spec_path = str(view.it.spec.relative_to(self.engine.layout.output))
            self.set_iter_status(st, "configuring")

        if st.run is None:
            await self.honour_control(m)
            self.set_iter_status(st, "running")
            st.run = await self.guarded(lambda: run_tuning(deps, view))
            self.save_state(st)  # before the events: a crash after them must not lose the tuning
            r = st.run
            self.engine.bus.emit(
                TuningFinished(
                    branch=self.name,
                    iteration=idx,
                    ran=r.ran,
                    best_ms=r.best_ms,
                    speedup=r.speedup,
                    score=r.score,
                    evaluated=r.evaluated,
                    valid=r.valid,
                    by_status=r.by_status,
                    best_config=r.best_config,
                    summary_path=r.summary_path,
                    message=r.message,
                )
            )
            self.note_best(m, st)

        if st.profile is None:
            await self.honour_control(m)
            self.set_iter_status(st, "profiling")
            run = st.run
            st.profile = await self.guarded(lambda: profile_best(deps, view, run))
            p = st.profile
            if not p.ran and p.message:
                self.reporter.log(p.message, "info" if deps.settings.dry_run else "warning")
            self.engine.bus.emit(
                ProfileMetrics(
                    branch=self.name,
                    iteration=idx,
                    ran=p.ran,
                    roofline=p.roofline,
                    path=p.path,
                    headline=p.headline,
                    message=p.message,
                )
            )

        if st.proposal is None:
            await self.honour_control(m)
            self.set_iter_status(st, "proposing")
            st.proposal = await self.guarded(lambda: propose(deps, view, st))

        if st.decision is None:
            await self.honour_control(m)
            self.set_iter_status(st, "deciding")
            view.best = self.manifest().best
            note = ""
            if deps.settings.path_budget is not None:
                note = f" (path budget {deps.settings.path_budget}, {m.path_before} used before this branch)"
            st.decision = await self.guarded(lambda: decide(deps, view, st, note))
            self.set_iter_status(st, "decided")
            self.emit_decision(st)
        return st

    def automatic_decision(self, m: BranchManifest, why: str) -> Decision:
        used = self.retries_used()
        if used < self.engine.deps.defaults.iteration_retries:
            return Decision(action="retry", reason=f"automatic retry after a failed step: {why[:300]}")
        return Decision(action="stop", reason=f"retry limit reached after a failed step: {why[:300]}")

    def retries_used(self) -> int:
        used = 0
        for i in self.layout.iteration_indices():
            st = read_model_or_none(self.layout.iteration(i).state, IterState)
            if st and st.decision and st.decision.action == "retry":
                used += 1
        return used

    def emit_decision(self, st: IterState) -> None:
        assert st.decision is not None
        self.engine.bus.emit(
            DecisionMade(branch=self.name, iteration=st.index, action=st.decision.action, reason=st.decision.reason)
        )

    def note_best(self, m: BranchManifest, st: IterState) -> None:
        require_score = self.engine.deps.problem.declared_cases
        candidate = best_candidate(st, require_score)
        if candidate is None:
            r = st.run
            if require_score and r is not None and r.ran and r.best_ms is not None and r.score is None:
                self.reporter.log("not eligible as best: a case failed or was not run", "warning")
            return
        if m.best is not None and m.best.rank() >= candidate.rank():
            return
        m.best = candidate
        self.save(m)
        run_best = self.engine.offer_best(candidate)
        self.engine.bus.emit(
            NewBest(
                branch=self.name,
                iteration=st.index,
                time_ms=candidate.time_ms,
                speedup=candidate.speedup,
                run_best=run_best,
            )
        )

    async def apply(self, m: BranchManifest, st: IterState) -> bool:
        """Act on a decided iteration. Returns True when the branch is finished."""
        assert st.decision is not None
        m.iterations_done = max(m.iterations_done, st.index)
        m.current_iteration = None
        if st.run is not None:
            self.note_best(m, st)
        self.save(m)
        d = st.decision
        if d.action == "stop":
            self.set_status(m, "stopped", d.reason)
            return True
        if d.action == "retry" and self.retries_used() > self.engine.deps.defaults.iteration_retries:
            self.set_status(m, "stopped", "retry limit reached")
            return True
        if d.action == "branch":
            if m.depth >= self.engine.deps.settings.max_depth or not d.sub_strategies:
                why = "depth limit reached" if d.sub_strategies else "no sub-strategies given"
                self.reporter.log(f"cannot branch ({why}); continuing instead", "warning")
                return False
            children = self.engine.create_children(m, st.index, d.sub_strategies)
            m = self.manifest()
            m.children = children
            self.save(m)
            self.set_status(m, "done", f"branched into {', '.join(children)}")
            for child in children:
                self.engine.spawn(child)
            return True
        return False


def _read_pair(root: Path) -> tuple[str | None, str | None]:
    k, s = root / "kernels.cu", root / "tuning.yaml"
    return (
        k.read_text(encoding="utf-8") if k.exists() else None,
        s.read_text(encoding="utf-8") if s.exists() else None,
    )


def child_name(parent: str, k: int, strategy: Strategy) -> str:
    return f"{parent}.{k}-{strategy.name}"
