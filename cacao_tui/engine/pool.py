"""The run's iteration pool (``--budget-iters``): every branch draws its iterations from it.

Each branch has a share (its ``max_iter`` when it was created). An iteration within the
share, or within what the pool granted above it, is drawn from the pool when it begins;
one the user granted (a ``max_iter`` raised above the share, a retry) is the user's and
not counted. When a branch's iteration is being finished the worker asks whether there is
a next one (``promise_next``): the answer reserves it, so the model is never asked for a
decision the pool cannot fund; a branch that ends returns its reservation and the rest of
its share. A branch at the end of its allowance gets one more iteration when
``policy.grant_extra`` says so (it is still improving and the iteration is free).

State: ``output/pool.json`` (PoolState), written by the engine alone, atomically, after
every change and before the change is acted on, with one exception: an iteration that begins
on its reservation changes nothing the pool counts (reserved or drawn, it is used), so that
draw is written with the next change, and a resumed run finds it again from the iterations
on disk (``reconcile``: the first iteration begun after the one that made the reservation).
Drawing is idempotent per iteration number, so a crash between the pool write and the
iteration's first state.json costs nothing on ``--resume``; a resumed run reads the pool back
and, when ``--budget-iters`` is given again, takes its new total.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from cacao_tui.engine.policy import Standing, grant_extra, recent_gain, should_yield
from cacao_tui.store.atomic import read_model_or_none, write_model
from cacao_tui.store.state import TERMINAL_BRANCH, BranchConfig, BranchManifest, PoolBranch, PoolState

MAX_EVENTS = 60


class IterationPool:
    """The pool's accounting; ``path`` None keeps it in memory (the design bench)."""

    def __init__(
        self,
        total: int,
        path: Path | None = None,
        *,
        resume_total: int | None = None,
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        self.path = path
        self.on_event = on_event  # each grant, yield and return, as it happens (the engine logs it)
        state = read_model_or_none(path, PoolState) if path is not None else None
        if state is None:
            state = PoolState(total=max(0, total))
        elif resume_total is not None:
            state.total = max(0, resume_total)
        self.state = state
        self._save()

    # -- reading ---------------------------------------------------------------------------
    @property
    def total(self) -> int:
        return self.state.total

    def used(self) -> int:
        """Iterations drawn or reserved."""
        return sum(len(b.drawn) + (1 if b.reserved else 0) for b in self.state.branches.values())

    def left(self) -> int:
        return max(0, self.state.total - self.used())

    def branch(self, name: str) -> PoolBranch | None:
        return self.state.branches.get(name)

    def allowance(self, name: str, share: int) -> int:
        """The pool-funded iterations of a branch: its share and what the pool granted above it."""
        b = self.state.branches.get(name)
        return (b.share if b is not None else share) + (b.grants if b is not None else 0)

    # -- changing --------------------------------------------------------------------------
    def register(self, name: str, share: int) -> PoolBranch:
        """A branch's part (idempotent: a resumed or re-spawned branch keeps its own)."""
        b = self.state.branches.get(name)
        if b is None:
            b = self.state.branches[name] = PoolBranch(share=max(1, share))
            self._save()
        return b

    def begin(self, name: str, index: int) -> bool:
        """Draw iteration ``index`` of ``name``; False when the pool has none left for it.

        Once a branch has drawn its share and grants, further iterations (a max_iter the user
        raised, a revert's new line) are the user's: never refused, never counted.
        """
        b = self.register(name, 1)
        if index in b.drawn:
            return True
        if b.reserved:  # used() is the same before and after: no write (the module's docstring)
            b.reserved, b.reserved_after = False, None
            b.drawn.append(index)
            b.finished = False
            return True
        if len(b.drawn) >= b.share + b.grants:
            return True
        if self.left() <= 0:
            return False
        b.drawn.append(index)
        b.finished = False
        self._save()
        return True

    def funds_next(self, name: str) -> bool:
        """Whether the branch's next iteration would come from the pool (not the user's)."""
        b = self.state.branches.get(name)
        return b is None or b.reserved or len(b.drawn) < b.share + b.grants

    def promise_next(
        self,
        name: str,
        *,
        within_allowance: bool,
        me: Standing | None = None,
        others: Sequence[Standing] = (),
        after: int | None = None,
    ) -> bool:
        """Whether ``name`` gets a next pool-funded iteration; if so it is reserved now.

        ``within_allowance``: the next iteration is still within the branch's share and grants;
        otherwise it needs a grant, which ``policy.grant_extra`` decides from ``me`` and ``others``.
        ``after``: the iteration being finished (what ``reconcile`` looks beyond).
        """
        b = self.register(name, 1)
        if b.reserved:
            return True
        if self.left() <= 0:
            return False
        if not within_allowance:
            if me is None or not grant_extra(me, others, self.left()):
                return False
            b.grants += 1
            self._note(f"{name}: one more iteration from the pool (recent gain {me.gain:.0%})")
        b.reserved, b.reserved_after = True, after
        self._save()
        return True

    def reconcile(self, name: str, begun: list[int]) -> None:
        """On ``--resume``: the iteration that began on the branch's reservation, when the pool
        file was written before it began (``begin`` does not write that draw)."""
        b = self.state.branches.get(name)
        if b is None or not b.reserved or b.reserved_after is None:
            return
        later = [i for i in begun if i > b.reserved_after and i not in b.drawn]
        if later:
            b.reserved, b.reserved_after = False, None
            b.drawn.append(min(later))
            self._save()

    def finish(self, name: str) -> None:
        """A branch ended: its reservation and its unused share go back to the pool."""
        b = self.state.branches.get(name)
        if b is None or (b.finished and not b.reserved):
            return
        unused = max(0, b.share + b.grants - len(b.drawn))
        b.reserved, b.reserved_after = False, None
        b.finished = True
        if unused:
            self._note(f"{name} ended: {unused} unused iteration(s) of its share back in the pool")
        self._save()

    def reopen(self, name: str) -> None:
        b = self.state.branches.get(name)
        if b is not None and b.finished:
            b.finished = False
            self._save()

    def forget(self, name: str) -> None:
        """A deleted branch: what it drew stays spent (it ran), nothing more is reserved for it."""
        b = self.state.branches.get(name)
        if b is not None and (b.reserved or not b.finished):
            b.reserved, b.reserved_after = False, None
            b.finished = True
            self._save()

    def set_polish(self, name: str) -> None:
        self.state.polish = name
        self._note(f"polish iteration on the run's best kernel: {name}")
        self._save()

    def note(self, line: str) -> None:
        self._note(line)
        self._save()

    def _note(self, line: str) -> None:
        self.state.events = [*self.state.events, line][-MAX_EVENTS:]
        if self.on_event is not None:
            self.on_event(line)

    def adopt(self, name: str, share: int, begun: list[int]) -> None:
        """A branch of a run that had no pool yet (an earlier version): what it ran counts as drawn."""
        if name in self.state.branches:
            return
        self.state.branches[name] = PoolBranch(share=max(1, share), drawn=sorted(begun))
        self._save()

    def _save(self) -> None:
        if self.path is not None:
            write_model(self.path, self.state)


class NoPool:
    """A host without a run-level pool: a branch runs its own ``max_iter`` and nothing more."""

    def begin_iteration(self, m: BranchManifest, index: int, cfg: BranchConfig) -> str | None:
        return None

    def has_next_iteration(self, m: BranchManifest, cfg: BranchConfig) -> bool:
        return m.iterations_done + 1 < cfg.max_iter

    def allowance(self, m: BranchManifest, cfg: BranchConfig) -> int:
        return cfg.max_iter

    def branch_ended(self, name: str) -> None:
        return None

    def branch_reopened(self, name: str) -> None:
        return None


class RunBudget:
    """The engine's side of the pool: what a worker asks before and at the end of an iteration.

    ``manifest`` and ``times`` read a branch as the engine holds it (no file is read); ``names``
    lists the run's branches (the standings of the others decide a grant).
    """

    def __init__(
        self,
        pool: IterationPool,
        names: Callable[[], list[str]],
        manifest: Callable[[str], BranchManifest | None],
        times: Callable[[str], list[float | None]],
    ) -> None:
        self.pool = pool
        self._names = names
        self._manifest = manifest
        self._times = times

    def _share(self, m: BranchManifest, cfg: BranchConfig) -> int:
        return self.pool.register(m.name, cfg.max_iter).share

    def allowance(self, m: BranchManifest, cfg: BranchConfig) -> int:
        """The iterations this branch may run: its max_iter (the user may raise it) and the pool's grants."""
        b = self.pool.register(m.name, cfg.max_iter)
        return cfg.max_iter + b.grants

    def begin_iteration(self, m: BranchManifest, index: int, cfg: BranchConfig) -> str | None:
        """Draw a new iteration; a reason to end the branch instead, when it has none."""
        self._share(m, cfg)
        if self.pool.begin(m.name, index):
            return None
        return f"the run's iteration pool is used up ({self.pool.total} iterations; --budget-iters)"

    def has_next_iteration(self, m: BranchManifest, cfg: BranchConfig) -> bool:
        """Whether the iteration being finished is followed by another (reserved now if so)."""
        if m.polish:
            return False  # the polish branch is one iteration
        share = self._share(m, cfg)
        b = self.pool.branch(m.name)
        grants = b.grants if b is not None else 0
        if m.iterations_done + 1 >= cfg.max_iter + grants:  # the iteration being finished counts
            if cfg.max_iter != share or m.path_budget_total is not None:
                return False  # a max_iter the user set, or a path budget, is the branch's limit
            others = self.standings()
            me = next((o for o in others if o.name == m.name), None)
            return self.pool.promise_next(
                m.name, within_allowance=False, me=me, others=others, after=m.current_iteration
            )
        if not self.pool.funds_next(m.name):
            return True  # within a max_iter the user raised, or a revert's new line: the user's
        if cfg.max_iter == share:
            others = self.standings()
            me = next((o for o in others if o.name == m.name), None)
            if me is not None and should_yield(me, others):
                self.pool.note(f"{m.name} yields: its best {me.best_ms:.4g} ms stays far behind the run's best "
                               f"{me.run_best_ms:.4g} ms; its iterations go to branches that improve")  # fmt: skip
                return False
        return self.pool.promise_next(m.name, within_allowance=True, after=m.current_iteration)

    def branch_ended(self, name: str) -> None:
        self.pool.finish(name)

    def branch_reopened(self, name: str) -> None:
        self.pool.reopen(name)

    def _standing(self, name: str, times: list[float | None], run_best: float | None) -> Standing | None:
        """What the grant rule knows of a branch (from the pool and the branch's own files)."""
        m = self._manifest(name)
        b = self.pool.branch(name)
        if m is None or b is None:
            return None
        live = m.status not in TERMINAL_BRANCH
        claim = max(0, b.share + b.grants - len(b.drawn) - (1 if b.reserved else 0)) if live else 0
        valid = [t for t in times if t is not None]
        return Standing(
            name=name, live=live, claim=claim, gain=recent_gain(times), decided=len(times),
            best_ms=min(valid) if valid else None, run_best_ms=run_best,
        )  # fmt: skip

    def standings(self) -> list[Standing]:
        """Every branch's standing, each branch's times read once."""
        times = {n: self._times(n) for n in self._names()}
        bests = [t for ts in times.values() for t in ts if t is not None]
        best = min(bests) if bests else None
        return [s for n, ts in times.items() if (s := self._standing(n, ts, best)) is not None]
