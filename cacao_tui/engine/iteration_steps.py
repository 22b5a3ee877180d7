"""One iteration's steps: [plan] -> author -> run -> profile -> propose -> decide.

Every step's product is saved in the iteration's state.json (atomically) before the next
step starts, so after a SIGKILL ``--resume`` redoes at most the step that was in flight.
In a split run (``--phase``, store/phases.py) each step first checks that this process's
phase may take it (``needs``): run and profile are the GPU's, every other step the model's.
"""

from __future__ import annotations

import asyncio
import shutil
import time

from cacao_tui.engine.events import NewBest, ProfileMetrics, TuningFinished
from cacao_tui.engine.start_points import StartPoints
from cacao_tui.engine.steer_commands import SteerCommands
from cacao_tui.engine.worker_core import NOT_ASKED
from cacao_tui.llm import ReplyUnusable
from cacao_tui.nodes.author import AuthorFailed, author
from cacao_tui.nodes.branch_queries import outcome_line
from cacao_tui.nodes.context import BranchView, SourceFiles
from cacao_tui.nodes.decide import decide
from cacao_tui.nodes.fingerprint import Tuned, copy_bounded, source_fingerprint
from cacao_tui.nodes.plan import plan
from cacao_tui.nodes.profile import profile_best
from cacao_tui.nodes.propose import propose
from cacao_tui.nodes.run import run_tuning
from cacao_tui.nodes.samples import author_samples
from cacao_tui.nodes.single_shot import implement_and_configure
from cacao_tui.nodes.workspace import read_model_file
from cacao_tui.store.results import best_candidate
from cacao_tui.store.state import (
    AuthorOutcome,
    BranchConfig,
    BranchManifest,
    Decision,
    IterState,
    TuneOutcome,
)


class IterationSteps(SteerCommands, StartPoints):
    """The steps of one iteration, each saved before the next starts."""

    # -- one iteration -------------------------------------------------------------------------
    def set_aside_records(self, idx: int, nodes: tuple[str, ...]) -> None:
        """Keep the records of a step that a crash interrupted before redoing it.

        The redo numbers its calls from 0 again (so a replay finds them); the calls of the
        interrupted attempt were made and paid for, so their records move to
        ``llm/superseded/`` (still counted in the run's totals) instead of being overwritten.
        An iteration this worker began has no earlier attempt, so its folder is not listed.
        """
        if idx in self._fresh:
            return
        folder = self.layout.iteration(idx).llm
        try:
            # "author-s2_000.json": a sample of the authoring step is the authoring step's
            old = [p for p in folder.iterdir() if p.is_file() and p.name.split("_")[0].split("-s")[0] in nodes]
        except (FileNotFoundError, NotADirectoryError):
            return
        if not old:
            return
        target = folder / "superseded" / f"{time.time_ns()}"
        target.mkdir(parents=True, exist_ok=True)
        for p in old:
            shutil.move(str(p), target / p.name)

    async def run_iteration(self, m: BranchManifest, idx: int, st: IterState | None, cfg: BranchConfig) -> IterState:
        deps = self.host.deps
        self.iteration = idx
        start: SourceFiles | None = None
        if st is None:
            start = self.start_files(m, idx)
            previous = self.last_decided(m, before=idx)
            st = IterState(
                branch=self.name,
                index=idx,
                mode=self.mode_for(m, previous, start),
                base_iteration=start.iteration if start else None,
            )
            if not self.layout.iteration(idx).llm.exists():
                self._fresh.add(idx)  # its state.json comes before any call: no earlier attempt's records
        view = self.view(m, st, cfg, start=start)
        view.it.root.mkdir(parents=True, exist_ok=True)

        m = self.manifest()
        if st.error is None and st.plan is None and (m.plan is None or m.plan_seq < m.steer_seq):
            self.needs("llm")
            self.set_iter_status(st, "planning")
            self.set_aside_records(idx, ("plan",))
            st.plan_seq = m.steer_seq
            try:
                st.plan = await self.guarded(lambda: plan(deps, view))
            except ReplyUnusable as exc:  # a refusal or an empty reply, twice: a failed step, never a plan
                st.plan_seq = None
                st.error = f"planning failed: {exc}"
                self.set_iter_status(st, "failed", st.error)
                self.reporter.log(st.error, "warning")
                return await self.decide_step(st, view)
            self.save_state(st)
        if st.plan is not None and st.plan_seq is not None and (m.plan_iteration != idx or m.plan != st.plan):
            m = self.manifest()
            m.plan, m.plan_iteration, m.plan_seq = st.plan, idx, max(m.plan_seq, st.plan_seq)
            self.save(m)
        view.plan = self.manifest().plan

        if st.error is None and (st.author is None or not st.author.ok):
            self.needs("llm")
            cfg = await self.honour_control(self.manifest())
            self.set_iter_status(st, "implementing")
            self.set_aside_records(idx, ("author", "implement", "configure"))
            view = self.refresh(view, cfg)
            try:
                samples = deps.settings.samples
                if deps.settings.single_shot:
                    write = implement_and_configure
                elif samples > 1 and st.mode != "polish":
                    write = lambda d, v, p: author_samples(d, v, p, samples)  # noqa: E731
                else:
                    write = author
                st.author = await self.guarded(lambda: write(deps, view, view.plan or ""))
            except (AuthorFailed, ReplyUnusable) as exc:
                st.author = exc.outcome if isinstance(exc, AuthorFailed) else AuthorOutcome()
                st.error = f"authoring failed: {exc}"
                self.set_iter_status(st, "failed", st.error)
                self.reporter.log(st.error, "warning")
                return await self.decide_step(st, view)
            st.kernel_path = str(view.it.kernel.relative_to(self.host.deps.layout.output))
            st.spec_path = str(view.it.spec.relative_to(self.host.deps.layout.output))
            self.set_iter_status(st, "configuring")

        if st.error is not None and st.decision is None:  # a failed authoring, resumed
            return await self.decide_step(st, view)

        if st.run is None:
            self.needs("gpu")
            await self.honour_control(self.manifest())
            self.set_iter_status(st, "running")
            st.run = await self.tune_once(st, view)
            if st.profile is None:
                st.status = "profiling"  # the next step's status, written with the tuning (one write)
            self.save_state(st)  # before the events: a crash after them must not lose the tuning
            self.host.bus.emit(TuningFinished(branch=self.name, iteration=idx, outcome=st.run))
            self.note_best(self.manifest(), st)

        if st.profile is None:
            self.needs("gpu")
            await self.honour_control(self.manifest())
            self.set_iter_status(st, "profiling", saved=st.status == "profiling")
            run = st.run
            st.profile = await self.guarded(lambda: profile_best(deps, view, run))
            p = st.profile
            tuned = deps.tuned.find(self.fingerprints(st, view))
            if tuned is not None and tuned.root == view.it.root:
                tuned.profile = p  # a duplicate of this iteration reuses it
            if not p.ran and p.message:
                self.reporter.log(p.message, "info" if deps.settings.dry_run else "warning")
            if deps.phase is not None:
                self.save_state(st)  # otherwise saved with the next status, which is the other phase's
            self.host.bus.emit(ProfileMetrics(branch=self.name, iteration=idx, outcome=p))

        if st.proposal is None:
            self.needs("llm")
            cfg = await self.honour_control(self.manifest())
            view = self.refresh(view, cfg)
            if self.budget_used(view, cfg):
                st.proposal = NOT_ASKED
                self.save_state(st)
            else:
                self.set_iter_status(st, "proposing")
                self.set_aside_records(idx, ("propose",))
                try:
                    st.proposal = await self.guarded(lambda: propose(deps, view, st))
                except ReplyUnusable as exc:  # advice only: the decision goes on without it
                    st.proposal = f"(no proposal: {exc.reason})"
                    self.reporter.log(f"propose: {exc}", "warning")
                    self.save_state(st)
        return await self.decide_step(st, view)

    # -- de-duplication (nodes/fingerprint.py) --------------------------------------------------
    def fingerprints(self, st: IterState, view: BranchView) -> list[str | None]:
        if st.fingerprint is None:
            try:
                st.fingerprint = source_fingerprint(read_model_file(view.it.kernel), read_model_file(view.it.spec))
            except OSError:
                return []
            st.binary_fingerprint = st.author.binary_fingerprint if st.author is not None else None
        return [st.fingerprint, st.binary_fingerprint]

    async def tune_once(self, st: IterState, view: BranchView) -> TuneOutcome:
        """Tune the iteration, unless the run tuned (or is tuning) the same files: then its result."""
        deps = self.host.deps
        fps = self.fingerprints(st, view)
        busy = deps.tuned.in_flight(fps) if not deps.settings.dry_run else None
        if busy is not None:
            self.reporter.log("the same kernel and tuning space is being tuned in another branch: waiting for it")
            await self.guarded(lambda: asyncio.shield(busy))
        reused = self.reuse_tuning(st, view)
        if reused is not None:
            return reused
        deps.tuned.starting(fps)
        try:
            outcome = await self.guarded(lambda: run_tuning(deps, view))
        finally:
            deps.tuned.finished(fps)
        if outcome.ran:
            deps.tuned.add(fps, Tuned(f"{self.name} iteration {st.index}", outcome, view.it.root))
        return outcome

    def reuse_tuning(self, st: IterState, view: BranchView) -> TuneOutcome | None:
        """The result of an identical kernel and tuning space tuned earlier in the run, copied
        here instead of tuning it again (None: not tuned before, or a dry run)."""
        deps = self.host.deps
        found = deps.tuned.find(self.fingerprints(st, view))
        if deps.settings.dry_run or found is None or found.root == view.it.root:
            return None
        it = view.it
        it.tune_dir.mkdir(parents=True, exist_ok=True)
        for name in ("summary.json", "results.jsonl"):
            copy_bounded(found.root / "tune" / name, it.tune_dir / name)
        if found.profile is not None and copy_bounded(found.root / "profile.json", it.profile):
            path = str(it.profile.relative_to(deps.layout.output)) if found.profile.path else None
            st.profile = found.profile.model_copy(update={"path": path})
        st.duplicate_of = found.where
        note = f"not tuned again: the same kernel and tuning space as {found.where} (comments and layout aside)"
        self.reporter.log(note, "warning")
        summary = it.tune_summary.relative_to(deps.layout.output) if it.tune_summary.is_file() else None
        return found.outcome.model_copy(
            update={"message": note, "summary_path": str(summary) if summary else found.outcome.summary_path}
        )

    def refresh(self, view: BranchView, cfg: BranchConfig) -> BranchView:
        """The view again, with what the user changed since it was made (messages, a forced
        action, ``cfg``'s max_iter) and the branch's latest best."""
        m = self.files.peek_manifest()  # looked at, not changed
        view.messages = list(m.messages)
        view.forced_action = m.pending_decision.action if m.pending_decision else None
        view.max_iter = self.host.budget.allowance(m, cfg)
        view.best = m.best
        view.iterations_done = m.iterations_done
        return view

    def budget_used(self, view: BranchView, cfg: BranchConfig) -> bool:
        """This iteration is the last the budget allows and the user asked for nothing else.

        Asking reserves the next iteration in the run's pool when there is one (so the model is
        never asked for a decision the pool cannot fund); a branch that ends returns it.
        """
        if view.forced_action not in (None, "stop"):
            return False
        m = self.files.peek_manifest()  # looked at, not changed
        has_next = self.host.budget.has_next_iteration(m, cfg)
        view.max_iter = self.host.budget.allowance(m, cfg)
        return not has_next

    async def decide_step(self, st: IterState, view: BranchView) -> IterState:
        deps = self.host.deps
        if st.decision is not None:
            return st
        self.needs("llm")
        cfg = await self.honour_control(self.manifest())
        if st.error is None:
            self.set_iter_status(st, "deciding")
        m = self.manifest()
        view = self.refresh(view, cfg)
        pending = m.pending_decision
        if pending is not None and pending.action == "stop":
            decision = Decision(
                action="stop",
                reason="stopped by the user",
                iteration_summary=self.summary_of(st),
                automatic=True,
                override_id=pending.id,
            )
        elif self.budget_used(view, cfg):
            decision = Decision(
                action="stop",
                reason=f"iteration budget reached ({view.iterations_done + 1}/{view.max_iter})"
                + ("" if view.iterations_done + 1 >= view.max_iter else "; the run's iteration pool is used up"),
                iteration_summary=self.summary_of(st),
                automatic=True,
            )
        else:
            self.set_aside_records(st.index, ("decide",))
            note = view.path_note
            decision = await self.guarded(lambda: decide(deps, view, st, note))
            if pending is not None:
                decision = decision.model_copy(update={"override_id": pending.id})
                if decision.overridden_from:
                    model = decision.overridden_from
                    self.reporter.log(f"the user's choice '{decision.action}' replaces the model's '{model}'")
        st.decision = decision
        self.set_iter_status(st, "decided" if st.error is None else "failed", st.error)
        self.emit_decision(st)
        return st

    def summary_of(self, st: IterState) -> str:
        what = {
            "first": "first kernel", "continue": "change", "retry": "fix", "configure": "new tuning space",
            "polish": "polish of the run's best",
        }  # fmt: skip
        result = f"failed: {' '.join(st.error.split())[:200]}" if st.error else outcome_line(st.run)
        if st.author is not None and st.author.ok and st.author.message:  # what the author says it built
            return f"{' '.join(st.author.message.split())[:300]} -> {result}"
        return f"{what.get(st.mode, st.mode)} -> {result}"

    def note_best(self, m: BranchManifest, st: IterState) -> None:
        require_score = self.host.deps.problem.declared_cases
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
        run_best = self.host.offer_best(candidate)
        self.host.bus.emit(
            NewBest(
                branch=self.name,
                iteration=st.index,
                time_ms=candidate.time_ms,
                speedup=candidate.speedup,
                score=candidate.score,
                run_best=run_best,
            )
        )
