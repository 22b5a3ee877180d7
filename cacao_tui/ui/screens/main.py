"""The main screen: branch tree and sparkline on the left, details tabs on the right, the status
bar on top and the footer below. Branch control goes through EngineControl only."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterable

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, TabbedContent

from cacao_tui.engine import events as ev
from cacao_tui.engine.control import EngineControl
from cacao_tui.llm.progress import CallProgress
from cacao_tui.llm.types import CallKey
from cacao_tui.runs.gpu_status import GpuSample
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import TERMINAL_BRANCH
from cacao_tui.ui import keymap
from cacao_tui.ui.disk import load_selection, read_all_branches, read_run_started, seed_from_disk
from cacao_tui.ui.home.editor_hook import new_problem_screen
from cacao_tui.ui.log_store import LogEntry, LogStore
from cacao_tui.ui.run_view import INTERRUPTED, RUN, ProcessEnded, RunView, Selection, touches
from cacao_tui.ui.screens.clone import CloneScreen
from cacao_tui.ui.screens.dialogs import ConfirmScreen
from cacao_tui.ui.screens.help import HelpScreen
from cacao_tui.ui.screens.results import ResultsScreen
from cacao_tui.ui.screens.steering import DecisionScreen, MessageScreen, RevertScreen
from cacao_tui.ui.widgets.best_sparkline import BestSparkline
from cacao_tui.ui.widgets.branch_tree import BranchTree
from cacao_tui.ui.widgets.details import DetailsPane
from cacao_tui.ui.widgets.gpu_panel import GpuPanel
from cacao_tui.ui.widgets.log_pane import LogPane
from cacao_tui.ui.widgets.status_bar import StatusBar

DETAILS_RELOAD_S = 0.5  # live changes to the selection re-read its files at most this often
FAILED = object()  # what _control returns when the engine refused


class MainScreen(Screen[None]):
    BINDINGS = keymap.bindings(keymap.MAIN)

    def __init__(
        self, view: RunView, store: LogStore, engine: EngineControl, clock: Callable[[], float], **kwargs: object
    ) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.view = view
        self.store = store
        self.engine = engine
        self._clock = clock
        self.selection = Selection()
        self._stale = True
        self._progress: dict[tuple[str, int], ev.TuningProgress | ev.TuningFinished] = {}
        self._llm_live: dict[CallKey, CallProgress] = {}  # calls in flight: their latest snapshot
        self.details_loads = 0  # how often the selection's files were read (tests, benchmark)
        self.ready = False  # set once the run's files were read; the app flushes events only then
        self._announced: set[tuple[str, float]] = set()

    @property
    def run_layout(self) -> RunLayout:
        return self.engine.layout

    def compose(self) -> ComposeResult:
        yield StatusBar(self.view, clock=self._clock, id="status")
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield BranchTree(id="tree")
                yield BestSparkline(id="sparkline")
            yield DetailsPane(self.store, id="details")
        yield GpuPanel(on_samples=self._gpu_samples, id="gpus")
        yield Footer()

    def on_mount(self) -> None:
        # Kept, not queried: the flush timer uses them ten times a second.
        self.branch_tree = self.query_one(BranchTree)
        self.details = self.query_one(DetailsPane)
        self.status_bar = self.query_one(StatusBar)
        self.sparkline = self.query_one(BestSparkline)
        self.branch_tree.focus()
        self.seed()

    @work(group="seed")
    async def seed(self) -> None:
        """Events sent before the app subscribed (or all of a resumed run) are on disk: read them first."""
        seed_from_disk(self.view, await asyncio.to_thread(read_all_branches, self.run_layout))
        if self.view.info is None:
            started = await asyncio.to_thread(read_run_started, self.run_layout)
            if started is not None:
                self.view.apply(started)
        if not self.app.is_running or not self.is_attached:
            return  # the app began to close while the run's files were read
        self.branch_tree.sync(self.view, {RUN, *self.view.branches})
        self.details.update_header(self.view, self.selection)
        self.status_bar.update_bar()
        self.ready = True
        # Everything built so far (modules, widgets, styles) lives as long as the app. Moving it
        # out of the collector's generations keeps full collections short: unfrozen, they
        # stalled the loop 50-90 ms at 2,000 log lines a second (bench/ui_event_lag.py).
        gc.freeze()
        self.set_interval(DETAILS_RELOAD_S, self._reload_if_stale)
        self.reload_details()

    # ---- live updates (called by the app's flush timer) ---------------------------
    def apply(self, changed: set[str], logs: list[LogEntry], events: Iterable[object]) -> None:
        self.branch_tree.sync(self.view, changed)
        if changed:
            self.status_bar.update_bar()
        sel = self.selection
        if RUN in changed or sel.branch in changed:
            self.details.update_header(self.view, sel)
        if sel.branch in changed:
            self.sparkline.show(self.view.branches.get(sel.branch))
        if logs:
            self.details.log_pane.append(logs)
        for event in events:
            if isinstance(event, ev.LLMCallProgress):
                self._llm_live[event.progress.key] = event.progress
                if self.details.active_tab == "llm" and self._shows_call(event.branch, event.iteration):
                    self.details.llm.show_live(event.progress)
                continue
            ended = isinstance(event, ev.LLMCallEvent) and self._llm_live.pop(event.call.key, None) is not None
            if ended and self.details.active_tab == "llm":
                self._draw_live()
            if isinstance(event, ev.TuningProgress | ev.TuningFinished):
                self._progress[(event.branch, event.iteration)] = event
                # Drawn only while the Tuning tab shows; activating it draws the latest.
                shown = self._shows_iteration(event.branch, event.iteration)
                if self.details.active_tab == "tuning" and shown and not self._ended(event.branch, event.iteration):
                    self._draw_progress(event)
            if not isinstance(event, ev.LogLine | ev.TuningProgress) and touches(event, sel):
                self._stale = True
            if isinstance(event, ev.RunFinished | ProcessEnded):  # what was on its way reads as ended
                self._stale = True
            if isinstance(event, ev.RunFinished):
                self._announce_finish(event)

    def _draw_progress(self, event: ev.TuningProgress | ev.TuningFinished) -> None:
        if isinstance(event, ev.TuningProgress):
            self.details.tuning.show_progress(event)
        else:
            self.details.tuning.show_finished(event)

    def _shows_call(self, branch: str | None, iteration: int | None) -> bool:
        if self.selection.branch is None:
            return branch is None
        return branch is not None and iteration is not None and self._shows_iteration(branch, iteration)

    def _draw_live(self) -> None:
        """The newest call in flight of what is selected, or none."""
        shown = [p for p in self._llm_live.values() if self._shows_call(p.branch, p.iteration)]
        self.details.llm.show_live(shown[-1] if shown else None)

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "llm":
            self._draw_live()
        if event.pane.id == "tuning":
            shown = [e for (b, i), e in self._progress.items() if self._shows_iteration(b, i) and not self._ended(b, i)]
            if shown and isinstance(shown[-1], ev.TuningProgress):
                self._draw_progress(shown[-1])

    def _shows_iteration(self, branch: str, iteration: int) -> bool:
        sel = self.selection
        if sel.branch != branch:
            return False
        if sel.iteration is not None:
            return sel.iteration == iteration
        current = self.view.branches[branch].current if branch in self.view.branches else None
        return current is None or current == iteration

    def _announce_finish(self, e: ev.RunFinished) -> None:
        key = (e.status, e.ts)  # once per end of the run: a view fed twice (a seed, a re-read log) says it once
        if key in self._announced:
            return
        self._announced.add(key)
        if e.best_ms is not None:
            from cacao_tui.ui.formatting import fmt_ms, fmt_result

            best = f"best {fmt_ms(e.best_ms)} {fmt_result(e.speedup, e.score)} ({e.best_branch})"
        elif self.view.info is not None and self.view.info.dry_run:
            best = "a dry run times nothing, its kernels were compile-checked"
        else:
            best = "no valid kernel"
        self.notify(f"Run finished ({e.status}): {best}. b: results, q: quit.", timeout=10)

    # ---- selection and the file-backed tabs -----------------------------------
    @on(BranchTree.SelectionChanged)
    def _selection_changed(self, message: BranchTree.SelectionChanged) -> None:
        if message.selection == self.selection:
            return
        self.selection = message.selection
        self.details.update_header(self.view, self.selection)
        self.details.log_pane.set_selection(self.selection)
        branch = self.view.branches.get(self.selection.branch) if self.selection.branch else None
        self.sparkline.show(branch)
        self._draw_live()
        self.reload_details()

    def _reload_if_stale(self) -> None:
        if self._stale:
            self.reload_details()

    @work(exclusive=True, group="details")
    async def reload_details(self) -> None:
        self._stale = False
        selection = self.selection
        data = await asyncio.to_thread(load_selection, self.run_layout, selection)
        if selection != self.selection or not self.app.is_running or not self.is_attached:
            return  # another selection since, or the app began to close while the files were read
        self.details_loads += 1
        progress = None
        ended = None
        if data.iteration is not None:
            progress = self._progress.get((data.iteration.branch, data.iteration.index))
            ended = self._ended(data.iteration.branch, data.iteration.index)
        self.details.show(data, progress, ended)

    def _ended(self, branch: str, iteration: int) -> str | None:
        """How the iteration was cut short (interrupted, killed), or None while it may go on."""
        b = self.view.branches.get(branch)
        it = b.iterations.get(iteration) if b is not None else None
        return it.status if it is not None and it.status in (INTERRUPTED, "killed") else None

    # ---- actions (keys and command palette) -----------------------------------------
    def _branch(self) -> str | None:
        name = self.selection.branch
        if name is None:
            self.notify("Select a branch first (j/k or arrows in the tree).", severity="warning")
        return name

    def _control(self, what: str, call: Callable[[], object]) -> object:
        try:
            return call()
        except Exception as exc:  # the engine refuses (finished branch, bad value): say so
            self.notify(f"{what}: {exc}", severity="error")
            return FAILED

    def _branch_over(self, name: str, what: str) -> bool:
        """A branch that has ended (done, stopped, failed, killed) has no step to pause or kill: say so."""
        b = self.view.branches.get(name)
        if b is None or b.status not in TERMINAL_BRANCH:
            return False
        again = "" if b.status == "killed" else " (r gives it one more try)"
        self.notify(f"{name} has ended ({b.status}): nothing to {what}{again}", severity="warning")
        return True

    def action_toggle_pause(self) -> None:
        if (name := self._branch()) is None or self._branch_over(name, "pause"):
            return
        paused = self._control("pause", lambda: self.engine.toggle_pause(name))
        if paused is not FAILED:
            self.notify(f"{name}: {'paused' if paused else 'resumed'}")

    def action_pause_all(self) -> None:
        active = [b for b in self.view.branches.values() if b.active]
        if active and all(b.status == "paused" for b in active):
            if self._control("resume all", self.engine.resume_all) is not FAILED:
                self.notify("All branches resumed")
        elif self._control("pause all", self.engine.pause_all) is not FAILED:
            self.notify("All branches paused (P again resumes)")

    def action_kill(self) -> None:
        if (name := self._branch()) is None or self._branch_over(name, "kill"):
            return
        b = self.view.branches.get(name)
        status = b.status if b is not None else "running"
        detail = {"running": "Its running step is cancelled; its files stay.",
                  INTERRUPTED: "It is not running now; a --resume will not run it again. Its files stay."}.get(
                      status, "It starts no further step; its files stay.")  # fmt: skip

        def answered(yes: bool | None) -> None:
            if yes and self._control("kill", lambda: self.engine.kill_branch(name)) is not FAILED:
                self.notify(f"{name}: kill requested", severity="warning")

        self.app.push_screen(
            ConfirmScreen(f"Kill branch {name}?", detail, yes="Kill"),
            answered,
        )

    def action_max_iter(self, delta: int) -> None:
        if (name := self._branch()) is None:
            return
        new = self._control("max_iter", lambda: self.engine.change_max_iter(name, delta))
        if isinstance(new, int):
            if name in self.view.branches:
                self.view.branches[name].max_iter = new
                self.branch_tree.sync(self.view, {name})
                self.details.update_header(self.view, self.selection)
            self.notify(f"{name}: max_iter {new}")

    def action_retry(self) -> None:
        if (name := self._branch()) is None:
            return
        if self._control("retry", lambda: self.engine.retry_branch(name)) is not FAILED:
            self.notify(f"{name}: retry requested")

    # ---- steering: each answer goes to the engine, which writes the branch's inbox ----------
    def _steer(self, what: str, call: Callable[[], object]) -> None:
        line = self._control(what, call)
        if isinstance(line, str):
            self.notify(line, timeout=6)

    def action_message(self) -> None:
        if (name := self._branch()) is None:
            return

        def answered(text: str | None) -> None:
            if text:
                self._steer("message", lambda: self.engine.send_message(name, text))

        self.app.push_screen(MessageScreen(name), answered)

    def action_revert(self) -> None:
        if (name := self._branch()) is None:
            return
        b = self.view.branches.get(name)
        choices = sorted(i for i, it in (b.iterations.items() if b else []) if it.status == "decided")
        suggested = self.selection.iteration if self.selection.iteration in choices else None

        def answered(iteration: int | None) -> None:
            if iteration is not None:
                self._steer("revert", lambda: self.engine.revert_branch(name, iteration))

        self.app.push_screen(RevertScreen(name, suggested, choices), answered)

    def action_change_decision(self) -> None:
        if (name := self._branch()) is None:
            return
        b = self.view.branches.get(name)
        finished = b is not None and not b.active

        def answered(action: str | None) -> None:
            if action:
                self._steer("decision", lambda: self.engine.change_decision(name, action))

        self.app.push_screen(DecisionScreen(name, finished), answered)

    def action_delete(self) -> None:
        if (name := self._branch()) is None:
            return
        below = [b.name for b in self.view.branches.values() if self._descends(b.name, name)]
        also = f" and its sub-branches {', '.join(below)}" if below else ""

        def answered(yes: bool | None) -> None:
            if yes:
                self._steer("delete", lambda: self.engine.delete_branch(name))

        self.app.push_screen(
            ConfirmScreen(
                f"Delete branch {name}{also}?",
                "Running steps are stopped; the directories move to output/trash/ (nothing is lost).",
                yes="Delete",
            ),
            answered,
        )

    def _descends(self, name: str, ancestor: str) -> bool:
        seen: set[str] = set()
        b = self.view.branches.get(name)
        while b is not None and b.parent is not None and b.parent not in seen:
            if b.parent == ancestor:
                return True
            seen.add(b.parent)
            b = self.view.branches.get(b.parent)
        return False

    def action_filter(self) -> None:
        self.details.show_tab("log")
        self.details.log_pane.open_filter()

    def action_toggle_diff(self) -> None:
        self.details.show_tab("kernel")
        mode = self.details.kernel.toggle_mode()
        self.notify(f"Kernel: {mode}", timeout=2)

    def action_show_tab(self, tab: str) -> None:
        self.details.show_tab(tab)

    def action_results(self) -> None:
        self.app.push_screen(ResultsScreen(self.run_layout))

    def action_new_problem(self) -> None:
        """The problem editor on a new problem beside this one (the run goes on meanwhile)."""
        self.app.push_screen(new_problem_screen(self.run_layout.problem_dir.parent))

    def action_clone_problem(self) -> None:
        self.app.push_screen(CloneScreen(self.run_layout.problem_dir))

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        await self.app.action_quit()

    def _gpu_samples(self, samples: list[GpuSample]) -> None:
        bar = self.query_one(StatusBar)  # the first read may come before this screen's on_mount
        bar.gpu_samples = samples
        bar.update_bar()

    def action_toggle_gpus(self) -> None:
        self.notify(self.query_one(GpuPanel).toggle(), timeout=4)

    def action_toggle_maximize(self) -> None:
        """z: the focused pane (tree, a tab's contents) fills the screen; z or Esc again restores it."""
        if self.maximized is not None:
            self.minimize()
        elif self.focused is None or not self.maximize(self.focused):
            self.notify("Tab to a pane first (the tree, a tab's contents), then z", severity="warning")

    def action_escape(self) -> None:
        if self.maximized is not None:
            self.minimize()
            return
        log = self.details.query_one(LogPane)
        if log.needle:
            log.action_clear_filter()
