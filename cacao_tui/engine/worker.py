"""One branch's loop: iterate [plan] -> author -> run -> profile -> propose -> decide until done.

The plan is written once per branch (and again after the user steers it); each decision
carries the next iteration's task: its feedback, an error analysis for a retry, or
skip_implement for a configuration-only iteration. At the iteration budget the branch
stops without asking the model.

Crash safety: every step's product is saved in the iteration's state.json (atomically)
before the next step starts, so after a SIGKILL ``--resume`` redoes at most the step
that was in flight; a decided iteration is never redone, and applying a decision is
idempotent (children are created only if missing). The worker is the only writer of
branch.json and of its iterations' state.json; it only reads branch_config.json and the
inbox, whose commands it applies at step boundaries, recording each applied command's
id in branch.json in the same write as its effect (so a command counts exactly once).
"""

from cacao_tui.engine.iteration_steps import IterationSteps
from cacao_tui.engine.replay_end import end_at_recording, nothing_recorded
from cacao_tui.engine.worker_core import BranchKilled, BranchRedirected, WorkerHost
from cacao_tui.llm import BudgetExceeded, LLMError, ReplayMismatch
from cacao_tui.nodes.run import EnvironmentFailure
from cacao_tui.store.phases import WHAT, WaitsForPhase
from cacao_tui.store.state import TERMINAL_BRANCH, BranchManifest, IterState, Strategy

__all__ = ["BranchWorker", "WorkerHost", "child_name"]


class BranchWorker(IterationSteps):
    """One branch's loop (see the module's docstring), built from its parts."""

    # -- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        m = self.manifest()
        cfg = self.config()
        if m.status in TERMINAL_BRANCH:
            try:
                reopened = self.apply_commands()
            except BranchRedirected:
                reopened = True
            m = self.manifest()
            if not reopened and m.status in TERMINAL_BRANCH:
                if cfg.killed or cfg.retry_nonce <= m.seen_retry_nonce:
                    return
                m.seen_retry_nonce = cfg.retry_nonce
                m.stop_reason = None
                self.save(m)
                self.host.bus.log("retry requested: one more iteration", branch=self.name)
        async with self.host.slots:
            try:
                await self._loop()
            except WaitsForPhase as wait:  # --phase: the other phase takes the next step
                self.waiting = wait.phase
                self.host.bus.log(f"waits for {WHAT[wait.phase]}", branch=self.name, iteration=self.iteration)
            except BranchKilled:
                self.set_status(self.manifest(), "killed", "killed by the user")
            except BudgetExceeded as exc:
                self.set_status(self.manifest(), "stopped", f"LLM budget reached: {exc}")
                self.host.note_budget_reached()
            except ReplayMismatch as exc:  # a replay asked for a call its recording does not hold
                end_at_recording(self, exc)
            except (LLMError, EnvironmentFailure) as exc:
                m = self.manifest()
                m.error = str(exc)
                self.set_status(m, "failed", str(exc))
                self.host.bus.log(f"branch failed: {exc}", level="error", branch=self.name)

    async def _loop(self) -> None:
        while True:
            try:
                cfg = await self.honour_control(self.manifest())
                m = self.manifest()
                idx = m.current_iteration if m.current_iteration is not None else self.next_index(m)
                st = self.state(idx)
                if st is None or st.decision is None:
                    # With a path budget, branch_config.json starts at what the budget leaves for
                    # this branch (Engine.create_branch); the user may change it. The run's
                    # iteration pool may grant more (engine/pool.py), or have none left.
                    if st is None:
                        allowance = self.host.budget.allowance(m, cfg)
                        if m.iterations_done >= allowance:
                            self.set_status(m, "done", f"iteration budget reached ({m.iterations_done}/{allowance})")
                            return
                        self.needs("llm")  # a new iteration begins with the model's steps
                        if not self.host.deps.llm.covers(self.name, idx):  # a replay: nothing recorded
                            self.set_status(m, "stopped", nothing_recorded(idx))
                            return
                        refused = self.host.budget.begin_iteration(m, idx, cfg)
                        if refused is not None:
                            self.set_status(m, "done", refused)
                            return
                    if m.current_iteration != idx:  # a resumed one is recorded already
                        m.current_iteration = idx
                        self.save(m)
                    st = await self.run_iteration(m, idx, st, cfg)
                if await self.apply(self.manifest(), st):
                    return
            except BranchRedirected:
                continue

    async def apply(self, m: BranchManifest, st: IterState) -> bool:
        """Act on a decided iteration. Returns True when the branch is finished."""
        assert st.decision is not None
        d = st.decision
        m.current_iteration = None
        if m.pending_decision is not None and d.override_id == m.pending_decision.id:
            m.pending_decision = None
        if m.base_iteration is not None and st.index > m.base_iteration:
            m.base_iteration = None
        counted = m.iterations_done
        m.iterations_done = self.count_done(m)
        if st.run is not None:
            self.note_best(m, st)
        self.save(m)
        if m.iterations_done != counted:  # the tree, headers and status bar count decided iterations as they come
            self._announce_status(m)
        if d.action == "stop":
            # Stopped by the budget, the branch is done; by the model or the user, stopped.
            self.set_status(m, "done" if d.automatic and d.override_id is None else "stopped", d.reason)
            return True
        if d.action == "branch":
            can, why = self.host.can_branch(m)
            if not can or not d.sub_strategies:
                reason = why.strip(" :") if not can else "no sub-strategies given"
                self.reporter.log(f"cannot branch ({reason}); continuing instead", "warning")
                return False
            children = self.host.create_children(m, st.index, d.sub_strategies)
            if not children:
                self.reporter.log("cannot branch (no sub-branch could be created); continuing instead", "warning")
                return False
            m = self.manifest()
            m.children = list(dict.fromkeys([*m.children, *children]))
            self.save(m)
            self.set_status(m, "done", f"branched into {', '.join(children)}")
            for child in children:
                self.host.spawn(child)
            return True
        return False


def child_name(parent: str, k: int, strategy: Strategy) -> str:
    return f"{parent}.{k}-{strategy.name}"
