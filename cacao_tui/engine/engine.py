"""The engine: runs the master, then every branch as an independent asyncio task.

Branches are independent: a branch's failure is recorded in its own branch.json and never
cancels a sibling (no fail-all task group). GPU steps are serialised per device by the
scheduler; LLM calls overlap them. Front ends call the control methods; they write
branch_config.json and wake the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

from cacao_tui import __version__
from cacao_tui.engine.branch_files import BranchFiles, RunFiles
from cacao_tui.engine.control import (
    queue_decision,
    queue_delete,
    queue_message,
    queue_revert,
    read_branch_config,
    trash_dir,
    update_branch_config,
)
from cacao_tui.engine.events import BranchAdded, EventBus, RunFinished, RunStarted
from cacao_tui.engine.master import Master
from cacao_tui.engine.pool import IterationPool, RunBudget
from cacao_tui.engine.runlog import RunLog
from cacao_tui.engine.split_run import gpu_steps_done, tell_gpu_results, waiting_branches
from cacao_tui.engine.steering import Steering
from cacao_tui.engine.totals import restore_totals
from cacao_tui.engine.verdict import BranchRecord, Verdict, run_verdict
from cacao_tui.engine.worker import BranchWorker, child_name
from cacao_tui.ktt_client import TunerError
from cacao_tui.llm import BudgetExceeded, LLMError
from cacao_tui.nodes.context import RunDeps
from cacao_tui.nodes.fingerprint import Tuned, TunedKernels, source_fingerprint
from cacao_tui.nodes.merge import write_final_results
from cacao_tui.nodes.workspace import read_model_file
from cacao_tui.store.atomic import StateFileError, read_model_or_none, write_model
from cacao_tui.store.layout import RunLayout, is_branch_name
from cacao_tui.store.phases import PhaseState, WaitsForPhase, clear_phase_state, waiting_line, write_phase_state
from cacao_tui.store.state import (
    TERMINAL_BRANCH,
    BestResult,
    BranchConfig,
    BranchManifest,
    BufferInfo,
    Context,
    Strategy,
)
from ktt.protocol import DeviceReport

CANCEL_REPEAT_S = 0.5  # a stop cancels the workers again after this long if one is still running
POLISH_STRATEGY = Strategy(
    name="polish",
    title="Polish the run's best kernel",
    description="One last iteration on the fastest kernel of the run, while the iteration pool has some left: "
    "its tuning space around the best configuration and the small changes its profile points to.",
)
POLISH_PLAN = (
    "Polish the run's best kernel: keep its algorithm; refine the tuning space around the best configuration "
    "and make the small changes the profile diagnosis points to."
)


# --gpu-submit: runs the GPU phase elsewhere and waits for it; None when it went well, else the
# one line that ends the run (launch.py builds it, cacao_tui/cluster/submit.py runs it).
GpuSubmit = Callable[[], Awaitable[str | None]]


class Engine:
    def __init__(
        self,
        deps: RunDeps,
        bus: EventBus,
        *,
        concurrency: int,
        resumed: bool = False,
        gpu_submit: GpuSubmit | None = None,
    ) -> None:
        self.deps = deps
        self.bus = bus
        self.layout: RunLayout = deps.layout
        self.slots = asyncio.Semaphore(max(1, concurrency))
        self.resumed = resumed
        self.workers: dict[str, BranchWorker] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.best: BestResult | None = None
        self.budget_reached = False
        self.finished: RunFinished | None = None
        self._stopping = False
        self._changed = asyncio.Event()
        self._crash_recorded: set[str] = set()
        self._master_task: asyncio.Future[list[str]] | None = None
        self.files = RunFiles(self.layout)  # every branch.json of the run, as this process wrote it
        self._times_cache: dict[str, tuple[BranchFiles, int, list[float | None]]] = {}  # _times, per version
        deps.branches = self.files
        self.steering = Steering(self)
        self.gpu_submit = gpu_submit
        self.master_waits: WaitsForPhase | None = None  # --phase gpu before the master's strategies
        self.pool, self.budget = self._load_pool(resumed, deps.settings.budget_iters if resumed else None)

    def _load_pool(self, resumed: bool, resume_total: int | None) -> tuple[IterationPool, RunBudget]:
        """The run's iteration pool; a resume keeps its own unless --budget-iters is given again."""
        deps = self.deps
        had_pool = self.layout.pool.exists()
        pool = IterationPool(
            deps.settings.pool_total,
            self.layout.pool,
            resume_total=resume_total,
            on_event=lambda line: self.bus.log(f"iteration pool: {line}"),
        )
        if resumed and not had_pool:  # a run of an earlier version: what its branches ran is spent
            for name in self.layout.branch_names():
                cfg = read_branch_config(self.layout.branch(name), deps.settings.max_iter)
                pool.adopt(name, cfg.max_iter, self.files.branch(name).indices())
        elif resumed:  # draws on a reservation are written with the pool's next change (engine/pool.py)
            for name in self.files.names():
                pool.reconcile(name, self.files.branch(name).indices())
        return pool, RunBudget(pool, self.files.names, self.files.peek_manifest, self._times)

    # -- the run -----------------------------------------------------------------------------
    async def run(self) -> RunFinished:
        """Run to the end; the run log (output/run.jsonl) records the whole event stream."""
        runlog = RunLog(self.layout.run_log)
        unsubscribe = self.bus.subscribe(runlog)
        try:
            return await self._run()
        finally:
            unsubscribe()
            runlog.close()

    async def _run(self) -> RunFinished:
        deps = self.deps
        clear_phase_state(self.layout)  # written again when this run (or phase) ends waiting
        restored = restore_totals(deps) if self.resumed else None
        self.bus.emit(
            RunStarted(
                problem=deps.problem.name,
                problem_dir=str(deps.problem.directory),
                provider=deps.settings.provider,
                model=deps.settings.model,
                gpus=deps.gpu.indices,
                gpu_name=deps.gpu.name,
                arch=deps.gpu.arch,
                dry_run=deps.settings.dry_run,
                resumed=self.resumed,
                max_iter=deps.settings.max_iter,
                max_depth=deps.settings.max_depth,
                n_strategies=deps.settings.n_strategies,
                path_budget=deps.settings.path_budget or None,
                llm_calls=restored.llm_calls if restored else 0,
                input_tokens=restored.input_tokens if restored else 0,
                output_tokens=restored.output_tokens if restored else 0,
                cost_usd=restored.cost_usd if restored else 0.0,
                budget_usd=deps.llm.budget_usd,
                phase=deps.phase,
            )
        )
        if restored is not None and restored.unreadable:
            unread = restored.unreadable
            self.bus.log(f"{unread} LLM call record(s) could not be read; the totals omit them", level="warning")
        self.write_context()
        for name in self.layout.branch_names():
            self.announce(name)
        master = Master(self)
        if self._stopping:  # stopped before the master began
            return self.finish("interrupted", "stopped; continue with --resume")
        try:
            # A task of its own, so stop() can cancel the master's LLM call like a branch's.
            self._master_task = asyncio.ensure_future(master.prepare())
            try:
                await self._master_task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if not self._stopping or (current is not None and current.cancelling()):
                    raise
                return self.finish("interrupted", "stopped; continue with --resume")
            except WaitsForPhase as wait:  # --phase gpu before the model proposed the strategies
                self.master_waits = wait
                return self.end_phase()
            except (LLMError, RuntimeError) as exc:
                master.finish(False, str(exc))
                why = f"the LLM budget was spent before any kernel was timed (master: {exc})" if isinstance(
                    exc, BudgetExceeded
                ) else f"master: {exc}"
                return self.finish("failed", why, complete=False)
            await self.steering.apply_deletes()  # queued between runs: before any branch starts
            self.index_tuned()
            for name in self.layout.branch_names():
                self.spawn(name)
            watcher = asyncio.ensure_future(self.steering.watch())
            try:
                failed = await self.run_branches()
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
        except asyncio.CancelledError:
            await self._cancel_workers()
            self.finish("interrupted", "interrupted; continue with --resume")
            raise
        if self._stopping:
            return self.finish("interrupted", "stopped; continue with --resume")
        if failed is not None:  # a failed --gpu-submit: the run can be continued
            return self.finish("failed", failed, complete=False)
        if deps.phase is not None and (self.waiting() or self.polish_due()):
            return self.end_phase()
        master.finish(True)
        if deps.phase is not None:
            write_phase_state(self.layout, PhaseState(phase=deps.phase))  # nothing waits: the run has ended
        verdict = self.verdict()
        return self.finish(verdict.status, verdict.message)

    async def run_branches(self) -> str | None:
        """Wait for every branch, then the polish iteration. With --gpu-submit, whenever every
        live branch waits for the GPU, the GPU phase runs (elsewhere) and the branches go on
        from what it wrote. Returns the line of a failed submission, else None."""
        while True:
            await self.wait_branches()
            if self._stopping:
                return None
            waiting = self.waiting()
            if waiting and self.gpu_submit is not None and "gpu" in waiting.values():
                before = gpu_steps_done(self.files)
                self.bus.log(f"{len(waiting)} branch(es) wait for the GPU: running --gpu-submit")
                failed = await self.gpu_submit()
                if failed is not None:
                    return failed
                self.reload_from_disk()
                after = gpu_steps_done(self.files)
                if not after - before:
                    return "gpu-submit: the GPU phase ran but took no step (see the run log); stopping here"
                tell_gpu_results(self.bus, self.files, self.best, after - before)
                for name in self.layout.branch_names():
                    self.spawn(name)
                continue
            if waiting or self.deps.phase == "gpu" or not self.start_polish():
                return None

    def waiting(self) -> dict[str, str]:
        """The branches whose worker stopped at the other phase's step (--phase, --gpu-submit)."""
        return waiting_branches(self.workers, self.tasks)

    def end_phase(self) -> RunFinished:
        """A split run's phase ends: output/phase.json says what waits for which phase, and the one
        line names the command that continues it."""
        phase = self.deps.phase or "llm"  # --gpu-submit's own run is the model's phase
        state = PhaseState(
            phase=phase,
            waiting=self.waiting(),  # type: ignore[arg-type]
            master=self.master_waits.phase if self.master_waits is not None else None,
            polish=self.polish_due(),
        )
        write_phase_state(self.layout, state)
        return self.finish("waiting", waiting_line(state, self.deps.problem.directory))

    def reload_from_disk(self) -> None:
        """After a GPU phase another process ran on this output/: read back what it wrote."""
        self.files = RunFiles(self.layout)
        self.deps.branches = self.files
        self._times_cache.clear()
        self.pool, self.budget = self._load_pool(True, None)
        self.deps.tuned = TunedKernels()
        self.index_tuned()
        if self.deps.device is None:
            try:
                self.deps.device = read_model_or_none(self.layout.device, DeviceReport)
            except StateFileError:
                self.deps.device = None
            self.deps._brief = None  # the brief shows the device table from now on
        self.recompute_best()

    def verdict(self) -> Verdict:
        """How the run ended, from what it produced (engine/verdict.py)."""
        branches = []
        for name in self.layout.branch_names():
            files = self.files.branch(name)
            states = [st for i in files.indices() if (st := files.state(i)) is not None]
            branches.append(BranchRecord(files.manifest(), states))
        return run_verdict(
            branches,
            best=self.best,
            dry_run=self.deps.settings.dry_run,
            budget_reached=self.budget_reached,
            with_cases=self.deps.problem.declared_cases,
            replayed=self.deps.llm.replay_progress(),
        )

    def finish(self, status: str, message: str | None, *, complete: bool | None = None) -> RunFinished:
        """The run's end: final_results.json (with the verdict) and the RunFinished event."""
        done = status not in ("interrupted", "waiting") if complete is None else complete
        final = write_final_results(self.deps, complete=done, status=status, message=message)
        best = final.best
        event = RunFinished(
            status=status,  # type: ignore[arg-type]
            message=message,
            final_results=str(self.layout.final_results),
            best_ms=best.time_ms if best else None,
            speedup=best.speedup if best else None,
            score=best.score if best else None,
            best_branch=best.branch if best else None,
            waiting=self.waiting() if status == "waiting" else {},
        )
        self.finished = event
        self.bus.emit(event)
        return event

    async def wait_branches(self) -> None:
        while True:
            pending = [t for t in self.tasks.values() if not t.done()]
            if not pending:
                return
            self._changed.clear()
            waiter = asyncio.ensure_future(self._changed.wait())
            try:
                await asyncio.wait([*pending, waiter], return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
            for name, task in list(self.tasks.items()):
                if task.done() and not task.cancelled() and task.exception() is not None:
                    exc = task.exception()
                    self.record_crash(name, exc)

    def record_crash(self, name: str, exc: BaseException | None) -> None:
        """A bug inside one worker fails that branch only."""
        if name in self._crash_recorded:
            return
        self._crash_recorded.add(name)
        with contextlib.suppress(Exception):
            files = self.files.branch(name)
            m = files.manifest()
            if m.status not in TERMINAL_BRANCH:
                m.status = "failed"
                m.error = f"internal error: {exc!r}"
                m.stop_reason = m.error
                files.save_manifest(m)
        self.bus.log(f"branch crashed: {exc!r}", level="error", branch=name)

    # -- branches ----------------------------------------------------------------------------
    def _times(self, name: str) -> list[float | None]:
        """Each tuned iteration's time on the branch's line, the one being finished included
        (what the pool's rule reads; None: nothing valid)."""
        files = self.files.branch(name)
        cached = self._times_cache.get(name)
        if cached is not None and cached[0] is files and cached[1] == files.version:
            return cached[2]
        try:
            m = files.peek_manifest()
        except Exception:
            return []
        out: list[float | None] = []
        for i in files.indices():
            timed = files.timed(i) if m.live(i) else None
            if timed is not None and timed[0]:
                out.append(timed[1])
        self._times_cache[name] = (files, files.version, out)
        return out

    def manifest(self, name: str) -> BranchManifest:
        return self.files.branch(name).manifest()

    def branch_files(self, name: str) -> BranchFiles:
        """A branch's branch.json and state.json as this process holds them (WorkerHost)."""
        return self.files.branch(name)

    def note_budget_reached(self) -> None:
        """The LLM budget ran out in a branch: no new branch starts (WorkerHost)."""
        self.budget_reached = True

    def path_budget(self) -> int | None:
        """--path-budget N: iterations per root-to-leaf path; None or 0 means off."""
        return self.deps.settings.path_budget or None

    def create_branch(
        self,
        name: str,
        strategy: Strategy,
        *,
        parent: BranchManifest | None,
        parent_iteration: int | None = None,
        max_iter: int | None = None,
        path_total: int | None = None,
        path_before: int = 0,
        polish: bool = False,
    ) -> str | None:
        """Create a branch's directory once; calling it again for the same name does nothing.

        A name in output/trash/ (a deleted branch) is never created again: None.
        """
        b = self.layout.branch(name)
        if b.manifest.exists():
            return name
        if (trash_dir(self.layout) / name).exists():
            return None
        if parent is None:
            path_total = self.path_budget()
            max_iter = path_total if path_total is not None else self.deps.settings.max_iter
        b.root.mkdir(parents=True, exist_ok=True)
        # branch_config.json first: the manifest's existence marks the branch as created.
        if not b.config.exists():
            write_model(b.config, BranchConfig(max_iter=max(1, max_iter or self.deps.settings.max_iter)))
        self.pool.register(name, read_branch_config(b, self.deps.settings.max_iter).max_iter)
        m = BranchManifest(
            name=name,
            title=strategy.title,
            strategy=strategy,
            parent=parent.name if parent else None,
            parent_iteration=parent_iteration,
            depth=0 if parent is None else parent.depth + 1,
            path_before=path_before,
            path_budget_total=path_total,
            polish=polish,
            plan=POLISH_PLAN if polish else None,
        )
        self.files.created(name, m)
        self.announce(name)
        return name

    def child_budget(self, parent: BranchManifest, upcoming: int = 0) -> tuple[int, int | None, int] | None:
        """(max_iter, path total, path used) for a child of ``parent``; None when the path is used up.

        Without a path budget a child gets the parent's max_iter as it stands (raised by the
        user or not). With one, the path's total grows by what the user granted the parent
        above its share, and the child gets what is left of it after the parent's iterations.
        ``upcoming`` counts the parent's iteration still being decided.
        """
        cfg = read_branch_config(self.layout.branch(parent.name), self.deps.settings.max_iter)
        used = parent.path_before + parent.iterations_done + upcoming
        total = parent.path_budget_total
        if total is None:
            return cfg.max_iter, None, used
        allocated = max(total - parent.path_before, 1)
        total += max(cfg.max_iter - allocated, 0)
        if total - used <= 0:
            return None
        return total - used, total, used

    def can_branch(self, m: BranchManifest, upcoming: int = 1) -> tuple[bool, str]:
        """Whether ``m`` may open sub-branches, and if not, why (for prompts and logs)."""
        levels = self.deps.settings.max_depth
        if m.depth + 1 >= levels:
            return False, f": the depth limit of {levels} level(s) is reached"
        if self.child_budget(m, upcoming) is None:
            return False, ": the path budget is used up"
        own = self.pool.branch(m.name)
        if self.pool.left() + (1 if own is not None and own.reserved else 0) <= 0:  # its reservation goes back
            return False, f": the run's iteration pool ({self.pool.total}) is used up"
        return True, ""

    def create_children(self, parent: BranchManifest, iteration: int, subs: list[Strategy]) -> list[str]:
        budget = self.child_budget(parent)
        if budget is None:
            return []
        max_iter, total, used = budget
        names = []
        for k, s in enumerate(subs, start=1):
            if not is_branch_name(child_name(parent.name, k, s)):  # a tree deeper than names can grow
                self.bus.log(f"cannot open sub-branch {k} of {parent.name}: its name is too long", level="warning")
                continue
            if not self.deps.llm.covers(child_name(parent.name, k, s), 1):  # a replay: its recording has none
                self.bus.log(f"not creating {child_name(parent.name, k, s)}: the recording holds none of its calls")
                continue
            name = self.create_branch(
                child_name(parent.name, k, s),
                s,
                parent=parent,
                parent_iteration=iteration,
                max_iter=max_iter,
                path_total=total,
                path_before=used,
            )
            if name is not None:
                names.append(name)
        return names

    async def device_table(self) -> DeviceReport | None:
        """The GPU's table (output/device.json), measured once per run: a resume reads it back.
        None in a dry run (nothing runs on a GPU) or when it cannot be measured (logged)."""
        path = self.layout.device
        try:
            kept = read_model_or_none(path, DeviceReport)
        except StateFileError as exc:
            self.bus.log(f"{exc}; measuring the device again", level="warning")
            kept = None
        if kept is not None or self.deps.settings.dry_run or self.deps.phase == "llm":
            return kept  # the model's phase has no GPU: the first GPU phase measures it
        try:
            async with self.deps.devices.acquire() as device:
                report = await self.deps.tuner.describe_device(device=device)
        except TunerError as exc:
            self.bus.log(f"the device table could not be measured: {exc}", level="warning")
            return None
        write_model(path, report)
        bandwidth = f", {report.copy_bandwidth_gbs:,.0f} GB/s copy bandwidth" if report.copy_bandwidth_gbs else ""
        self.bus.log(f"device table: {report.name} ({report.arch}), {report.sm_count} SMs{bandwidth}")
        return report

    def index_tuned(self) -> None:
        """What earlier steps of this run tuned, by fingerprint (a resume goes on de-duplicating)."""
        for name in self.files.names():
            files = self.files.branch(name)
            for i in files.indices():
                st = files.state(i)
                if st is None or st.run is None or not st.run.ran or st.duplicate_of is not None:
                    continue
                it = self.layout.branch(name).iteration(i)
                fps: list[str | None] = [st.fingerprint, st.binary_fingerprint]
                if st.fingerprint is None:  # a run of an earlier version: from its files
                    with contextlib.suppress(OSError):
                        fps = [source_fingerprint(read_model_file(it.kernel), read_model_file(it.spec))]
                self.deps.tuned.add(fps, Tuned(f"{name} iteration {i}", st.run, it.root, st.profile))

    def polish_due(self) -> bool:
        """Every branch has ended and the polish iteration would start now (the model writes it)."""
        settings = self.deps.settings
        if self._stopping or self.budget_reached or settings.dry_run or self.pool.state.polish is not None:
            return False
        if any(not t.done() for t in self.tasks.values()) or self.waiting() or self.master_waits is not None:
            return False
        best = self.best
        return (
            best is not None
            and self.pool.left() >= 1
            and self.layout.branch(best.branch).manifest.exists()
            and self.deps.llm.covers(f"{best.branch}.polish", 1)  # a replay whose recording has no polish: none
        )

    def start_polish(self) -> bool:
        """Every branch has finished: one polish iteration on the run's best kernel, as a branch
        of its own below the best one, when the pool has an iteration left (once per run)."""
        if not self.polish_due():
            best = self.best
            if best is not None and not self._stopping and not self.deps.llm.covers(f"{best.branch}.polish", 1):
                self.bus.log(f"no polish: the recording holds no call of {best.branch}.polish")
            return False
        best = self.best
        assert best is not None
        parent = self.manifest(best.branch)
        name = self.create_branch(
            f"{best.branch}.polish", POLISH_STRATEGY, parent=parent, parent_iteration=best.iteration,
            max_iter=1, polish=True,
        )  # fmt: skip
        if name is None:
            return False
        self.pool.set_polish(name)
        self.bus.log(f"{self.pool.left()} iteration(s) left in the pool: polishing the run's best kernel in {name}")
        self.spawn(name)
        return True

    def recompute_best(self) -> None:
        """The run's best from the branches there are (after a delete)."""
        self.best = None
        for name in self.layout.branch_names():
            with contextlib.suppress(Exception):
                m = self.manifest(name)
                if m.best is not None:
                    self.offer_best(m.best)

    def announce(self, name: str) -> None:
        m = self.manifest(name)
        cfg = read_branch_config(self.layout.branch(name), self.deps.settings.max_iter)
        self.bus.emit(
            BranchAdded(
                branch=name,
                title=m.title,
                description=m.strategy.description,
                parent=m.parent,
                depth=m.depth,
                max_iter=cfg.max_iter,
                status=m.status,
                iterations_done=m.iterations_done,
                best_ms=m.best.time_ms if m.best else None,
                speedup=m.best.speedup if m.best else None,
            )
        )
        if m.best is not None:
            self.offer_best(m.best)

    def spawn(self, name: str) -> None:
        if self._stopping or self.budget_reached or not self.layout.branch(name).manifest.exists():
            return
        task = self.tasks.get(name)
        if task is not None and not task.done():
            return
        worker = BranchWorker(self, name)
        self.workers[name] = worker
        self.tasks[name] = asyncio.create_task(worker.run(), name=f"branch:{name}")
        self._changed.set()

    def offer_best(self, candidate: BestResult) -> bool:
        if self.best is None or candidate.rank() > self.best.rank():
            self.best = candidate
            return True
        return False

    # -- control (EngineControl) -------------------------------------------------------------
    def _update(self, name: str, **changes: object) -> BranchConfig:
        cfg = update_branch_config(self.layout.branch(name), self.deps.settings.max_iter, **changes)
        worker = self.workers.get(name)
        if worker is not None:
            worker.wake.set()
        return cfg

    def pause_branch(self, name: str) -> None:
        self._update(name, paused=True)
        self.bus.log("pause requested (takes effect at the next step)", branch=name)

    def resume_branch(self, name: str) -> None:
        self._update(name, paused=False)
        self.bus.log("resumed", branch=name)

    def toggle_pause(self, name: str) -> bool:
        paused = not read_branch_config(self.layout.branch(name), self.deps.settings.max_iter).paused
        (self.pause_branch if paused else self.resume_branch)(name)
        return paused

    def pause_all(self) -> None:
        for name in self.layout.branch_names():
            if self.manifest(name).status not in TERMINAL_BRANCH:
                self._update(name, paused=True)
        self.bus.log("pause requested for every branch")

    def resume_all(self) -> None:
        for name in self.layout.branch_names():
            self._update(name, paused=False)
        self.bus.log("resumed every branch")

    def kill_branch(self, name: str) -> None:
        self._update(name, killed=True)
        worker = self.workers.get(name)
        if worker is not None:
            worker.request_kill()
        self.bus.log("kill requested", level="warning", branch=name)

    def change_max_iter(self, name: str, delta: int) -> int:
        cfg = read_branch_config(self.layout.branch(name), self.deps.settings.max_iter)
        new = max(1, cfg.max_iter + delta)
        self._update(name, max_iter=new)
        self.bus.log(f"max_iter set to {new}", branch=name)
        return new

    def retry_branch(self, name: str) -> None:
        m = self.manifest(name)
        if m.status not in TERMINAL_BRANCH or m.status == "killed":
            self.bus.log("retry applies to a branch that has finished (done, stopped or failed)", branch=name)
            return
        cfg = read_branch_config(self.layout.branch(name), self.deps.settings.max_iter)
        changes: dict[str, object] = {"retry_nonce": cfg.retry_nonce + 1}
        if m.iterations_done >= cfg.max_iter:
            changes["max_iter"] = m.iterations_done + 1
        self._update(name, **changes)
        task = self.tasks.get(name)
        if task is not None and not task.done():  # its worker is still winding down
            task.add_done_callback(lambda _: self.spawn(name))
        else:
            self.spawn(name)

    # -- steering (EngineControl): each writes one inbox file; the worker applies it ----------
    def _steered(self, name: str, line: str) -> str:
        worker, task = self.workers.get(name), self.tasks.get(name)
        if worker is not None and task is not None and not task.done():
            worker.wake.set()
        if self.finished is not None:
            line += " (this run has ended: the next --resume applies it)"
        self.bus.log(line, branch=name)
        return line

    def send_message(self, name: str, text: str) -> str:
        return self._steered(name, queue_message(self.layout, name, text, source="app").line)

    def revert_branch(self, name: str, iteration: int) -> str:
        queued = queue_revert(self.layout, name, iteration, default_max_iter=self.deps.settings.max_iter, source="app")
        return self._steered(name, queued.line)

    def change_decision(self, name: str, action: str) -> str:
        queued = queue_decision(self.layout, name, action, default_max_iter=self.deps.settings.max_iter, source="app")
        return self._steered(name, queued.line)

    def delete_branch(self, name: str) -> str:
        return self._steered(name, queue_delete(self.layout, name, source="app").line)

    def is_running(self) -> bool:
        return any(not t.done() for t in self.tasks.values())

    async def stop(self) -> None:
        """Stop cleanly: cancel the master's phase and the workers (their LLM calls and
        children with them; children are killed as groups); --resume continues."""
        self._stopping = True
        self.bus.log("stopping: cancelling branch work (continue later with --resume)", level="warning")
        master = self._master_task
        if master is not None and not master.done():
            master.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await master
        await self._cancel_workers()
        self._changed.set()

    @property
    def stopping(self) -> bool:
        """A stop was asked for: workers take no further step (WorkerHost)."""
        return self._stopping

    async def _cancel_workers(self) -> None:
        """Cancel every worker and wait for all of them. A cancellation can be lost when it
        races with a step that is finishing (asyncio.wait_for on 3.11), so it is repeated until
        each task has ended; a worker also refuses its next step once the run is stopping."""
        while tasks := [t for t in self.tasks.values() if not t.done()]:
            for t in tasks:
                t.cancel()
            await asyncio.wait(tasks, timeout=CANCEL_REPEAT_S)
        for t in self.tasks.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                t.result()

    # -- files -------------------------------------------------------------------------------
    def write_context(self) -> None:
        if self.layout.context.exists():
            return
        p = self.deps.problem
        nbytes, flops = p.floor()
        ctx = Context(
            problem_name=p.name,
            problem_dir=p.directory.name,  # output/ may be copied elsewhere: no absolute path here
            description=p.description,
            boundary_signature=p.boundary_signature(),
            scalars={s.name: s.value for s in p.scalars},
            buffers=[
                BufferInfo(
                    name=b.name,
                    dtype=b.dtype,
                    elements=p.primary.sizes[b.name],
                    bytes=p.primary.bytes_of(b),
                    access=b.access,
                    validate=b.validate,
                )
                for b in p.buffers
            ],
            grid=p.primary.grid.as_tuple(),
            reference_type=p.reference.type,
            reference_file=str(Path(p.reference.file).relative_to(p.directory)),
            reference_function=p.reference.function,
            tolerance=p.tolerance,
            rules_text=p.rules_text,
            forbid=[r.pattern.pattern for r in p.forbid],
            cases=[s.name for s in p.shapes] if p.declared_cases else [],
            floor_bytes=nbytes,
            floor_flops=flops,
            gpu=self.deps.gpu,
            settings=self.deps.settings,
            version=__version__,
        )
        write_model(self.layout.context, ctx)
