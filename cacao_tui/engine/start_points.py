"""What an iteration starts from (a revert's target, the branch's best or latest files, the
parent's) and the view its steps see."""

from __future__ import annotations

from pathlib import Path

from cacao_tui.engine.policy import start_iteration
from cacao_tui.engine.worker_core import WorkerCore
from cacao_tui.nodes.context import BranchView, SourceFiles
from cacao_tui.nodes.workspace import read_model_file
from cacao_tui.store.state import BranchConfig, BranchManifest, IterMode, IterState


class StartPoints(WorkerCore):
    """Where an iteration starts and what its steps see."""

    # -- what an iteration starts from ------------------------------------------------------------
    def _files(self, root: Path) -> tuple[str | None, str | None]:
        k, s = root / "kernels.cu", root / "tuning.yaml"
        return (  # capped, regular files only (read_model_file)
            read_model_file(k) if k.is_file() else None,
            read_model_file(s) if s.is_file() else None,
        )

    def start_files(self, m: BranchManifest, idx: int) -> SourceFiles | None:
        """What iteration ``idx`` starts from: a revert's target; else the branch's best or its
        latest files, as the last decision implies (engine/policy.py); else the parent's."""
        if m.base_iteration is not None and m.base_iteration < idx:
            kernel, spec = self._files(self.layout.iteration(m.base_iteration).root)
            if kernel is not None:
                label = f"iteration {m.base_iteration} of this branch (the iteration the user reverted to)"
                return SourceFiles(kernel=kernel, spec=spec, label=label, iteration=m.base_iteration)
        with_files = self._with_files(m, idx)
        latest = with_files[0] if with_files else None
        best = m.best.iteration if m.best is not None and m.best.branch == self.name else None
        if best is not None and (best not in with_files):
            best = None  # superseded by a revert, or its files are gone: not a start
        previous = self.last_decided(m, before=idx)
        chosen = start_iteration(latest, best, previous.decision if previous else None)
        for i in [chosen, *with_files] if chosen is not None else with_files:
            kernel, spec = self._files(self.layout.iteration(i).root)
            if kernel is not None:
                return SourceFiles(kernel=kernel, spec=spec, label=self._start_label(m, i, latest), iteration=i)
        if m.parent is not None and m.parent_iteration is not None:
            root = self.host.deps.layout.branch(m.parent).iteration(m.parent_iteration).root
            kernel, spec = self._files(root)
            if kernel is not None:
                return SourceFiles(
                    kernel=kernel, spec=spec, label=f"the parent branch {m.parent}, iteration {m.parent_iteration}"
                )
        return None

    def _with_files(self, m: BranchManifest, idx: int) -> list[int]:
        """This line's iterations before ``idx`` that have a kernel, newest first."""
        indices = reversed(self.files.indices())
        return [i for i in indices if i < idx and m.live(i) and self.layout.iteration(i).kernel.is_file()]

    def _start_label(self, m: BranchManifest, i: int, latest: int | None) -> str:
        label = f"iteration {i} of this branch"
        if latest is None or i == latest or m.best is None or m.best.iteration != i:
            return label
        last = self.files.peek_state(latest)  # looked at, not changed
        run = last.run if last is not None else None
        failed = last is not None and (last.error is not None or (run is not None and run.ran))
        how = f"{run.best_ms:.4g} ms" if run is not None and run.best_ms is not None else (
            "no valid result" if failed else "not timed"
        )
        return f"{label}, the branch's best so far ({m.best.time_ms:.4g} ms; the latest, iteration {latest}: {how})"

    def mode_for(self, m: BranchManifest, previous: IterState | None, start: SourceFiles | None) -> IterMode:
        if m.polish and start is not None:
            return "polish"
        if previous is None or previous.decision is None or start is None:
            return "first"
        if m.base_iteration is not None:
            return "continue"
        d = previous.decision
        if d.skip_implement and previous.author is not None and previous.author.ok:
            return "configure"
        return "retry" if d.action == "retry" else "continue"

    def view(
        self, m: BranchManifest, st: IterState, cfg: BranchConfig, start: SourceFiles | None = None
    ) -> BranchView:
        """What the iteration's steps see; ``start``: its starting files when just read."""
        idx = st.index
        if start is None:
            base = st.base_iteration
            start = self.start_files(m, idx) if base is None else self._start_from(base, m, idx)
        best_files = None
        if m.best is not None and (start is None or m.best.iteration != start.iteration or m.best.branch != self.name):
            best_kernel = self.host.deps.layout.within_output(m.best.kernel_path)  # None: not the run's file
            kernel, spec = self._files(best_kernel.parent) if best_kernel is not None else (None, None)
            if kernel is not None and (start is None or kernel != start.kernel or spec != start.spec):
                best_files = SourceFiles(kernel=kernel, spec=spec, label=f"iteration {m.best.iteration}")
        can_branch, why = self.host.can_branch(m)
        path_note = ""
        if m.path_budget_total is not None:
            path_note = f" (path budget {m.path_budget_total}, {m.path_before} used before this branch)"
        base = st.base_iteration
        reverted = base is not None and any(base < i < idx for i in m.superseded)
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
            max_iter=self.host.budget.allowance(m, cfg),
            best=m.best,
            run=self.host.deps.layout,
            mode=st.mode,
            plan=m.plan,
            messages=list(m.messages),
            superseded=frozenset(m.superseded),
            previous=self.last_decided(m, before=idx),
            start=start,
            best_files=best_files,
            can_branch=can_branch,
            branch_note=why,
            path_note=path_note,
            forced_action=m.pending_decision.action if m.pending_decision else None,
            reverted_to=base if reverted else None,
            parent_iteration=m.parent_iteration,
            earlier_cache=[s for i in self.files.indices() if i < idx and (s := self.state(i)) is not None],
        )

    def _start_from(self, base: int, m: BranchManifest, idx: int) -> SourceFiles | None:
        """The start recorded when iteration ``idx`` began (stable across a resume)."""
        kernel, spec = self._files(self.layout.iteration(base).root)
        if kernel is None:
            return self.start_files(m, base + 1)
        if any(base < i < idx for i in m.superseded):
            label = f"iteration {base} of this branch (the iteration the user reverted to)"
        else:
            earlier = self._with_files(m, idx)
            label = self._start_label(m, base, earlier[0] if earlier else None)
        return SourceFiles(kernel=kernel, spec=spec, label=label, iteration=base)
