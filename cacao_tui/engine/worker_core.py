"""What every part of a branch worker shares: its host, its files and their one writer, its
status, and running a step as a killable task.

The worker itself (engine/worker.py) is built from this core plus the steering commands
(engine/steer_commands.py), the start of an iteration (engine/start_points.py) and the
iteration's steps (engine/iteration_steps.py).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol, TypeVar, runtime_checkable

from cacao_tui.engine.branch_files import BranchFiles
from cacao_tui.engine.control import read_branch_config
from cacao_tui.engine.events import (
    BranchStatusChanged,
    DecisionMade,
    EventBus,
    IterationStatusChanged,
    KernelWritten,
    TuningProgress,
)
from cacao_tui.nodes.context import RunDeps
from cacao_tui.store.layout import BranchLayout
from cacao_tui.store.phases import Phase, WaitsForPhase
from cacao_tui.store.state import (
    TERMINAL_BRANCH,
    BestResult,
    BranchConfig,
    BranchManifest,
    IterState,
    Strategy,
)
from ktt.protocol import Progress

T = TypeVar("T")
PAUSE_POLL_S = 1.0
NOT_ASKED = "(not asked: the iteration budget is used up)"
LLM_NODES = ("plan", "author", "implement", "configure", "propose", "decide")


class BranchKilled(Exception):
    pass


class BranchRedirected(Exception):
    """A revert abandoned the iteration in progress; the loop starts over from the manifest."""


class BranchReporter:
    """Turns a step's reports into events for this branch."""

    def __init__(self, worker: WorkerCore) -> None:
        self.worker = worker

    def log(self, message: str, level: str = "info") -> None:
        self.worker.host.bus.log(message, level=level, branch=self.worker.name, iteration=self.worker.iteration)

    def tuning_progress(self, progress: Progress) -> None:
        w = self.worker
        w.host.bus.emit(TuningProgress(branch=w.name, iteration=w.iteration or 0, progress=progress))

    def kernel_written(self, kernel: Path, spec: Path | None) -> None:
        w = self.worker
        w.host.bus.emit(
            KernelWritten(
                branch=w.name,
                iteration=w.iteration or 0,
                kernel_path=str(kernel),
                spec_path=str(spec) if spec else None,
            )
        )


class IterationBudget(Protocol):
    """How many iterations a branch may run (engine/pool.py: the run's pool, or none)."""

    def begin_iteration(self, m: BranchManifest, index: int, cfg: BranchConfig) -> str | None: ...
    def has_next_iteration(self, m: BranchManifest, cfg: BranchConfig) -> bool: ...
    def allowance(self, m: BranchManifest, cfg: BranchConfig) -> int: ...
    def branch_ended(self, name: str) -> None: ...
    def branch_reopened(self, name: str) -> None: ...


@runtime_checkable
class WorkerHost(Protocol):
    """What a branch worker needs from the engine that runs it, and no more."""

    deps: RunDeps  # the run: problem, layout, LLM, tuner, settings (handed on to the nodes)
    bus: EventBus
    slots: asyncio.Semaphore  # how many branches may work at once
    stopping: bool  # the run is stopping: a worker takes no further step
    budget: IterationBudget  # the run's iteration pool

    def branch_files(self, name: str) -> BranchFiles: ...
    def can_branch(self, m: BranchManifest, upcoming: int = 1) -> tuple[bool, str]: ...
    def create_children(self, parent: BranchManifest, iteration: int, subs: list[Strategy]) -> list[str]: ...
    def spawn(self, name: str) -> None: ...
    def offer_best(self, candidate: BestResult) -> bool: ...  # True: also the run's best
    def note_budget_reached(self) -> None: ...  # the LLM budget ran out: start no more branches


class WorkerCore:
    """A branch worker's state and the operations every part of it uses."""

    def __init__(self, host: WorkerHost, name: str) -> None:
        self.host = host
        self.name = name
        self.layout: BranchLayout = host.deps.layout.branch(name)
        self.iteration: int | None = None
        self.wake = asyncio.Event()
        self.kill_requested = False
        self._step: asyncio.Task | None = None
        self.reporter = BranchReporter(self)
        self._fresh: set[int] = set()  # iterations this worker began (see set_aside_records)
        self.files = host.branch_files(name)  # branch.json and state.json: this worker is their writer
        self.waiting: Phase | None = None  # set when the branch stopped at the other phase's step (--phase)
        self._config: tuple[tuple[int, ...], BranchConfig] | None = None  # see config()

    # -- files (branch.json and state.json: this worker is their one writer) -----------------
    def manifest(self) -> BranchManifest:
        return self.files.manifest()

    def save(self, m: BranchManifest) -> None:
        self.files.save_manifest(m)

    def config(self) -> BranchConfig:
        """branch_config.json as it is now (the app and the CLI write it): parsed again only when
        the file is another (atomic writes replace it) or changed, which a stat tells."""
        try:
            st = os.stat(self.layout.config, follow_symlinks=False)
            key: tuple[int, ...] | None = (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        except OSError:
            key = None
        if key is not None and self._config is not None and self._config[0] == key:
            return self._config[1].model_copy()
        cfg = read_branch_config(self.layout, self.host.deps.settings.max_iter)
        self._config = (key, cfg) if key is not None else None
        return cfg.model_copy()

    def save_state(self, st: IterState) -> None:
        self.files.save_state(st)

    def state(self, index: int) -> IterState | None:
        return self.files.state(index)

    # -- status ------------------------------------------------------------------------------
    def set_status(self, m: BranchManifest, status: str, reason: str | None = None) -> None:
        if m.status == status and reason is None:
            return
        was_finished = m.status in TERMINAL_BRANCH
        m.status = status  # type: ignore[assignment]
        if reason is not None and status in TERMINAL_BRANCH:
            m.stop_reason = reason
        self.save(m)
        if status in TERMINAL_BRANCH:
            self.host.budget.branch_ended(self.name)  # its reservation and unused share go back
        elif was_finished:
            self.host.budget.branch_reopened(self.name)
        cfg = self.config()
        self.host.bus.emit(
            BranchStatusChanged(
                branch=self.name,
                status=status,
                iteration=m.current_iteration,
                iterations_done=m.iterations_done,
                max_iter=self.host.budget.allowance(m, cfg),
                reason=reason,
            )
        )

    def set_iter_status(self, st: IterState, status: str, message: str | None = None, *, saved: bool = False) -> None:
        """``saved``: the status was written with the step's product already (one write, not two)."""
        st.status = status  # type: ignore[assignment]
        if not saved:
            self.save_state(st)
        self.host.bus.emit(
            IterationStatusChanged(branch=self.name, iteration=st.index, status=status, message=message)
        )

    # -- a step as a killable task -------------------------------------------------------------
    def needs(self, phase: Phase) -> None:
        """A split run's process does only its phase's steps (store/phases.py): the branch waits."""
        current = self.host.deps.phase
        if current is not None and current != phase:
            raise WaitsForPhase(phase)

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

    # -- the branch's iterations on disk, and the events others emit -------------------------------
    def _announce_status(self, m: BranchManifest) -> None:
        self.host.bus.emit(
            BranchStatusChanged(
                branch=self.name,
                status=m.status,
                iteration=m.current_iteration,
                iterations_done=m.iterations_done,
                max_iter=self.host.budget.allowance(m, self.config()),
            )
        )

    def next_index(self, m: BranchManifest) -> int:
        """The number of a new iteration: after every one on disk (a revert keeps them)."""
        on_disk = self.files.indices()
        return max([m.iterations_done, *on_disk, *m.superseded, 0]) + 1

    def count_done(self, m: BranchManifest) -> int:
        """Decided iterations on the branch's current line (what max_iter counts)."""
        done = 0
        for i in self.files.indices():
            if m.live(i):
                st = self.files.peek_state(i)  # looked at, not changed
                done += 1 if st is not None and st.decision is not None else 0
        return done

    def last_decided(self, m: BranchManifest, before: int | None = None) -> IterState | None:
        for i in reversed(self.files.indices()):
            if (before is not None and i >= before) or not m.live(i):
                continue
            st = self.state(i)
            if st is not None and st.decision is not None:
                return st
        return None

    def emit_decision(self, st: IterState) -> None:
        assert st.decision is not None
        d = st.decision
        self.host.bus.emit(
            DecisionMade(branch=self.name, iteration=st.index, action=d.action, reason=d.reason, decision=d)
        )
