"""The details pane: a header naming the selection, and the Log/LLM/Kernel/Tuning/Profile tabs."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import TabbedContent, TabPane

from cacao_tui.engine.events import TuningFinished, TuningProgress
from cacao_tui.ui.disk import SelectionDetails
from cacao_tui.ui.formatting import STATUS_STYLES, fmt_ms, fmt_result, fmt_speedup, status_icon
from cacao_tui.ui.log_store import LogStore
from cacao_tui.ui.run_view import RunView, Selection
from cacao_tui.ui.widgets.case_table import CaseRow
from cacao_tui.ui.widgets.kernel_pane import KernelPane
from cacao_tui.ui.widgets.llm_pane import LLMPane
from cacao_tui.ui.widgets.log_pane import LogPane
from cacao_tui.ui.widgets.profile_pane import ProfilePane
from cacao_tui.ui.widgets.text_line import TextLine
from cacao_tui.ui.widgets.tuning_pane import TuningPane

TABS = (("log", "Log"), ("llm", "LLM"), ("kernel", "Kernel"), ("tuning", "Tuning"), ("profile", "Profile"))


def selection_header(view: RunView, selection: Selection) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    if selection.branch is None or selection.branch not in view.branches:
        text.append(view.info.problem if view.info else "run", style="bold")
        text.append(f" · {view.phase}" + (f": {view.phase_message}" if view.phase_message else ""))
        active, n = sum(b.active for b in view.branches.values()), len(view.branches)
        # The phase's own note may count the branches already ("dispatched: 3 branches"): then only how many run.
        counts = f"{active} active" if view.phase_message else f"{n} branch{'es' if n != 1 else ''}, {active} active"
        text.append(f" · {counts}")
        if view.best_ms is not None:
            best = fmt_result(view.best_speedup, view.best_score)
            text.append(f" · best {fmt_ms(view.best_ms)} {best} ({view.best_branch})")
        if view.info is not None:
            text.append(f"\n{view.info.problem_dir}", style="dim")
        return text
    b = view.branches[selection.branch]
    text.append(f"{status_icon(b.status)} {b.status} ", style=STATUS_STYLES.get(b.status, ""))
    text.append(b.name, style="bold")
    if selection.iteration is not None:
        it = b.iterations.get(selection.iteration)
        text.append(f" · iter{selection.iteration} {it.status if it else ''}")
    text.append(f" · {b.iterations_done}/{b.max_iter} iterations")
    best = f" · best {fmt_ms(b.best_ms)} {fmt_result(b.speedup, b.score)}"
    text.append(best if b.best_ms is not None else " · no time yet")
    if b.parent:
        text.append(f" · from {b.parent}", style="dim")
    if b.reason:
        text.append(f" · {b.reason}", style="dim")
    text.append(f"\n{b.title or b.description}", style="italic")
    return text


class DetailsPane(Vertical):
    def __init__(self, store: LogStore, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._store = store
        self._header = ""

    def compose(self) -> ComposeResult:
        yield TextLine("", id="selection-header")
        with TabbedContent(id="tabs", initial="log"):
            with TabPane("Log", id="log"):
                yield LogPane(self._store, id="log-pane")
            with TabPane("LLM", id="llm"):
                yield LLMPane(id="llm-pane")
            with TabPane("Kernel", id="kernel"):
                yield KernelPane(id="kernel-pane")
            with TabPane("Tuning", id="tuning"):
                yield TuningPane(id="tuning-pane")
            with TabPane("Profile", id="profile"):
                yield ProfilePane(id="profile-pane")

    def on_mount(self) -> None:
        self.log_pane = self.query_one(LogPane)
        self.kernel = self.query_one(KernelPane)
        self.tuning = self.query_one(TuningPane)
        self.llm = self.query_one(LLMPane)

    def show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    @property
    def active_tab(self) -> str:
        return self.query_one(TabbedContent).active

    def update_header(self, view: RunView, selection: Selection) -> None:
        text = selection_header(view, selection)
        if text.markup != self._header:
            self._header = text.markup
            self.query_one("#selection-header", TextLine).update(text)

    def _show_cases(self, data: SelectionDetails, where: str) -> None:
        """With several cases: the shown iteration's per-case results and score, and the branch's best."""
        it = data.iteration
        run = it.state.run if it and it.state else None
        summary = it.tuning.summary if it else None
        cases: Sequence[CaseRow] = []
        score = None
        if run is not None and run.cases:
            cases, score = run.cases, run.score
        elif summary is not None and summary.cases:
            cases, score = summary.cases, summary.score
        manifest = data.branch.manifest if data.branch else None
        best = manifest.best if manifest else None
        extra = ""
        if best is not None and (it is None or best.iteration != it.index):
            extra = f"branch best: iter{best.iteration}" + (f", score {fmt_speedup(best.score)}" if best.score else "")
        elif best is not None and it is not None and best.iteration == it.index:
            extra = "this iteration is the branch's best"
        if not cases and best is not None and len(best.cases) > 1:
            cases, score, where, extra = best.cases, best.score, f"{best.branch}/iter{best.iteration} (branch best)", ""
        self.tuning.show_cases(cases, score, f"per case · {where}", extra)

    def show(
        self, data: SelectionDetails, progress: TuningProgress | TuningFinished | None, ended: str | None = None
    ) -> None:
        """Fill the file-backed tabs from what was read for the selection. ``ended``: how the shown
        iteration was cut short (interrupted, killed), so no pane says it is still waiting."""
        sel = data.selection
        it = data.iteration
        where = f"{it.branch}/iter{it.index}" if it else sel.label
        self.query_one(LLMPane).show_calls(data.llm_calls, where)
        self.kernel.show(it)
        state = it.state if it else None
        run = state.run if state else None
        tuning = it.tuning if it else None
        self.tuning.show_files(where, tuning, run.ran if run else None, run.message if run else None, ended)
        self._show_cases(data, where)
        if isinstance(progress, TuningProgress) and (tuning is None or tuning.summary is None) and ended is None:
            self.tuning.show_progress(progress)
        self.query_one(ProfilePane).show(
            where,
            it.profile if it else None,
            it.prev_profile if it else None,
            it.prev_label if it else None,
            state.profile if state else None,
            tuning.summary.floor if tuning is not None and tuning.summary is not None else None,
        )
