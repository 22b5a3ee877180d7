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

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol, TypeVar, runtime_checkable

from cacao_tui.engine.branch_files import BranchFiles
from cacao_tui.engine.control import read_branch_config, revert_problem
from cacao_tui.engine.events import (
    BranchStatusChanged,
    DecisionMade,
    EventBus,
    IterationStatusChanged,
    KernelWritten,
    NewBest,
    ProfileMetrics,
    TuningFinished,
    TuningProgress,
)
from cacao_tui.engine.policy import start_iteration
from cacao_tui.llm import BudgetExceeded, LLMError, ReplyUnusable
from cacao_tui.nodes.author import AuthorFailed, author
from cacao_tui.nodes.branch_queries import outcome_line
from cacao_tui.nodes.context import BranchView, RunDeps, SourceFiles
from cacao_tui.nodes.decide import decide
from cacao_tui.nodes.fingerprint import Tuned, copy_bounded, source_fingerprint
from cacao_tui.nodes.plan import plan
from cacao_tui.nodes.profile import profile_best
from cacao_tui.nodes.propose import propose
from cacao_tui.nodes.run import EnvironmentFailure, run_tuning
from cacao_tui.nodes.samples import author_samples
from cacao_tui.nodes.single_shot import implement_and_configure
from cacao_tui.nodes.workspace import read_model_file
from cacao_tui.store.inbox import inbox_dir, pending_commands
from cacao_tui.store.layout import BranchLayout
from cacao_tui.store.results import best_candidate
from cacao_tui.store.state import (
    TERMINAL_BRANCH,
    AuthorOutcome,
    BestResult,
    BranchConfig,
    BranchManifest,
    ControlCommand,
    Decision,
    DecisionOverride,
    IterMode,
    IterState,
    Strategy,
    TuneOutcome,
    UserMessage,
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

    def __init__(self, worker: BranchWorker) -> None:
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


class BranchWorker:
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

    # -- files (branch.json and state.json: this worker is their one writer) -----------------
    def manifest(self) -> BranchManifest:
        return self.files.manifest()

    def save(self, m: BranchManifest) -> None:
        self.files.save_manifest(m)

    def config(self) -> BranchConfig:
        return read_branch_config(self.layout, self.host.deps.settings.max_iter)

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

    def set_iter_status(self, st: IterState, status: str, message: str | None = None) -> None:
        st.status = status  # type: ignore[assignment]
        self.save_state(st)
        self.host.bus.emit(
            IterationStatusChanged(branch=self.name, iteration=st.index, status=status, message=message)
        )

    # -- control -----------------------------------------------------------------------------
    async def honour_control(self, m: BranchManifest) -> BranchConfig:
        """Apply the inbox, wait while paused; raise BranchKilled when a kill was asked for and
        BranchRedirected when a revert abandoned the iteration in progress. A stopping run
        cancels the worker here: a cancellation that raced with a finishing step (and was lost
        with it) still ends the branch before its next step."""
        if self.host.stopping:
            raise asyncio.CancelledError()
        self.apply_commands()
        cfg = self.config()
        paused_here = False
        while cfg.paused and not cfg.killed and not self.kill_requested:
            if not paused_here:
                self.set_status(self.manifest(), "paused")
                paused_here = True
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), PAUSE_POLL_S)
            self.apply_commands()
            cfg = self.config()
        if cfg.killed or self.kill_requested:
            raise BranchKilled()
        m = self.manifest()
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

    # -- steering (the inbox) --------------------------------------------------------------
    def apply_commands(self) -> bool:
        """Apply the pending message, revert and decision commands (deletes are the engine's).

        Every effect lands in one branch.json write together with the applied ids; the only
        other file written (a finished branch's last decision, rewritten by a decision
        override) is written first and carries the command id, so a replay after a crash
        finds it done. Returns True when the branch was reopened or redirected; raises
        BranchRedirected when a revert abandoned an iteration in progress.
        """
        if not inbox_dir(self.layout).is_dir():  # the usual case: never steered
            return False
        m = self.manifest()
        inbox = pending_commands(self.layout, m.applied)
        commands = [c for c in inbox.commands if c.kind != "delete"]
        if not commands and not inbox.unreadable:
            return False
        events: list[Callable[[], None]] = []
        redirected = reopened = False
        for name in inbox.unreadable:
            m.applied.append(name.removesuffix(".json"))
            note = f"inbox/{name}: not a control command; ignored"
            events.append(lambda note=note: self.reporter.log(note, "warning"))
        for command in commands:
            m.applied.append(command.id)
            if command.kind == "message":
                self._apply_message(m, command, events)
            elif command.kind == "revert":
                r = self._apply_revert(m, command, events)
                redirected |= r == "redirected"
                reopened |= r == "reopened"
            elif command.kind == "decision":
                reopened |= self._apply_decision(m, command, events)
        if reopened and m.status in TERMINAL_BRANCH:
            m.status = "running"  # in the same write as the applied ids: a crash cannot lose the reopening
            m.stop_reason = None
            events.append(lambda: self._announce_status(m))
        self.save(m)
        for emit in events:
            emit()
        if redirected:
            raise BranchRedirected()
        return reopened

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

    def _apply_message(self, m: BranchManifest, c: ControlCommand, events: list[Callable[[], None]]) -> None:
        text = (c.text or "").strip()
        at = m.current_iteration if m.current_iteration is not None else self.next_index(m)
        m.messages.append(UserMessage(id=c.id, text=text, at=c.created_at, iteration=at))
        m.steer_seq += 1
        short = " ".join(text.split())
        short = short if len(short) <= 160 else short[:157] + "..."
        events.append(lambda: self.reporter.log(f"message from the user: {short}"))

    def _apply_revert(self, m: BranchManifest, c: ControlCommand, events: list[Callable[[], None]]) -> str:
        target = c.iteration or 0
        problem = revert_problem(self.layout, m, target)
        if problem is not None:
            events.append(lambda: self.reporter.log(f"revert to iteration {target} refused: {problem}", "warning"))
            return ""
        in_progress = m.current_iteration is not None
        later = {i for i in self.files.indices() if i > target}
        if m.current_iteration is not None and m.current_iteration > target:
            later.add(m.current_iteration)
        new = sorted(later - set(m.superseded))
        m.superseded = sorted(set(m.superseded) | later)
        m.base_iteration = target
        m.current_iteration = None
        m.steer_seq += 1
        m.iterations_done = self.count_done(m)
        was_finished = m.status in TERMINAL_BRANCH
        if was_finished:
            m.stop_reason = None
            m.error = None

        def announce() -> None:
            for i in new:
                self.host.bus.emit(IterationStatusChanged(branch=self.name, iteration=i, status="superseded"))
            kept = f"; iterations {', '.join(map(str, new))} are superseded (kept on disk)" if new else ""
            self.reporter.log(f"reverted to iteration {target}: the next iteration starts from its kernel{kept}")

        events.append(announce)
        if in_progress:
            return "redirected"
        return "reopened" if was_finished else ""

    def _apply_decision(self, m: BranchManifest, c: ControlCommand, events: list[Callable[[], None]]) -> bool:
        action = c.action or "continue"
        if m.status not in TERMINAL_BRANCH or m.current_iteration is not None:
            m.pending_decision = DecisionOverride(id=c.id, action=action, at=c.created_at)
            events.append(lambda: self.reporter.log(f"the user chose '{action}' for this branch's next decision"))
            return False
        # A finished branch: change its last decision and act on it again.
        last = self.last_decided(m)
        if last is None or last.decision is None:
            m.pending_decision = DecisionOverride(id=c.id, action=action, at=c.created_at)
            return False
        d = last.decision
        if d.override_id != c.id:
            if action == d.action:
                events.append(lambda: self.reporter.log(f"the last decision already is '{action}'"))
                return False
            if action == "branch" and not d.sub_strategies:
                events.append(
                    lambda: self.reporter.log(
                        "cannot change the last decision to 'branch': it named no sub-strategies", "warning"
                    )
                )
                return False
            last.decision = d.model_copy(
                update={
                    "action": action,
                    "overridden_from": d.overridden_from or d.action,
                    "override_id": c.id,
                    "reason": f"changed by the user to {action} (was {d.action}: {d.reason})",
                }
            )
            self.save_state(last)
        m.current_iteration = last.index  # the loop applies the changed decision again
        m.stop_reason = None
        note = f"the user changed the decision of iteration {last.index}: {d.action} -> {action}"
        events.append(lambda: self.reporter.log(note))
        events.append(lambda: self.emit_decision(last))
        return True

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
            except BranchKilled:
                self.set_status(self.manifest(), "killed", "killed by the user")
            except BudgetExceeded as exc:
                self.set_status(self.manifest(), "stopped", f"LLM budget reached: {exc}")
                self.host.note_budget_reached()
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
                        refused = self.host.budget.begin_iteration(m, idx, cfg)
                        if refused is not None:
                            self.set_status(m, "done", refused)
                            return
                    m.current_iteration = idx
                    self.save(m)
                    st = await self.run_iteration(m, idx, st, cfg)
                if await self.apply(self.manifest(), st):
                    return
            except BranchRedirected:
                continue

    def next_index(self, m: BranchManifest) -> int:
        """The number of a new iteration: after every one on disk (a revert keeps them)."""
        on_disk = self.files.indices()
        return max([m.iterations_done, *on_disk, *m.superseded, 0]) + 1

    def count_done(self, m: BranchManifest) -> int:
        """Decided iterations on the branch's current line (what max_iter counts)."""
        done = 0
        for i in self.files.indices():
            if m.live(i):
                st = self.state(i)
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
        last = self.state(latest)
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
            await self.honour_control(self.manifest())
            self.set_iter_status(st, "running")
            st.run = await self.tune_once(st, view)
            self.save_state(st)  # before the events: a crash after them must not lose the tuning
            self.host.bus.emit(TuningFinished(branch=self.name, iteration=idx, outcome=st.run))
            self.note_best(self.manifest(), st)

        if st.profile is None:
            await self.honour_control(self.manifest())
            self.set_iter_status(st, "profiling")
            run = st.run
            st.profile = await self.guarded(lambda: profile_best(deps, view, run))
            p = st.profile
            tuned = deps.tuned.find(self.fingerprints(st, view))
            if tuned is not None and tuned.root == view.it.root:
                tuned.profile = p  # a duplicate of this iteration reuses it
            if not p.ran and p.message:
                self.reporter.log(p.message, "info" if deps.settings.dry_run else "warning")
            self.host.bus.emit(ProfileMetrics(branch=self.name, iteration=idx, outcome=p))

        if st.proposal is None:
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
        m = self.manifest()
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
        m = self.manifest()
        has_next = self.host.budget.has_next_iteration(m, cfg)
        view.max_iter = self.host.budget.allowance(m, cfg)
        return not has_next

    async def decide_step(self, st: IterState, view: BranchView) -> IterState:
        deps = self.host.deps
        if st.decision is not None:
            return st
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
        return f"{what.get(st.mode, st.mode)} -> {result}"

    def emit_decision(self, st: IterState) -> None:
        assert st.decision is not None
        d = st.decision
        self.host.bus.emit(
            DecisionMade(branch=self.name, iteration=st.index, action=d.action, reason=d.reason, decision=d)
        )

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

    async def apply(self, m: BranchManifest, st: IterState) -> bool:
        """Act on a decided iteration. Returns True when the branch is finished."""
        assert st.decision is not None
        d = st.decision
        m.current_iteration = None
        if m.pending_decision is not None and d.override_id == m.pending_decision.id:
            m.pending_decision = None
        if m.base_iteration is not None and st.index > m.base_iteration:
            m.base_iteration = None
        m.iterations_done = self.count_done(m)
        if st.run is not None:
            self.note_best(m, st)
        self.save(m)
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
                self.reporter.log("cannot branch (the path budget is used up); continuing instead", "warning")
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
