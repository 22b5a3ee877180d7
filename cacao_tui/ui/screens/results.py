"""The results view: final_results.json (rebuilt by cacao_tui.store.results when it is missing),
the best configuration, for a problem with cases the best kernel's per-case table, a per-branch
summary, the pictures (history plot, per-case bars) and the best kernel of the selected branch.
On a short terminal the view scrolls to the part that has the focus."""

from __future__ import annotations

import asyncio

from rich.syntax import Syntax
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import HorizontalScroll, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static
from textual.widgets.data_table import ColumnKey

from cacao_tui.llm.usage import ILLUSTRATIVE
from cacao_tui.store.layout import RunLayout, is_branch_name
from cacao_tui.store.results import (
    DRY_RUN_BEST,
    FROM_FILE,
    LoadedResults,
    load_results,
    reference_calls,
    reference_spread_warning,
    verdict_text,
)
from cacao_tui.store.results_export import ExportError, export_results
from cacao_tui.store.state import BranchSummary
from cacao_tui.ui import keymap
from cacao_tui.ui.disk import best_floor_ms, read_text_quietly
from cacao_tui.ui.formatting import (
    NONE,
    STATUS_STYLES,
    fmt_config,
    fmt_cost,
    fmt_count,
    fmt_ms,
    fmt_result,
    fmt_speedup,
    safe_text,
    safe_value,
    status_icon,
)
from cacao_tui.ui.plots.results_pictures import ResultsPictures
from cacao_tui.ui.widgets.case_table import case_table, natural_width, score_line
from cacao_tui.ui.widgets.scroll_pane import ScrollPane
from cacao_tui.ui.widgets.table_sync import KeyTable
from ktt.reference_times import NO_BASELINE

COLUMNS = (
    ("branch", "branch"),
    ("status", "status"),
    ("iters", "iters"),
    ("best", "best"),
    ("speedup", "speedup"),
    ("at", "at"),
    ("why", "stopped because"),
)


def _sort_key(b: BranchSummary) -> tuple[int, float, str]:
    return (b.best_ms is None, b.best_ms if b.best_ms is not None else 0.0, b.name)


def results_header(loaded: LoadedResults, layout: RunLayout) -> Text:
    r = loaded.results
    text = Text()
    if r is None:
        text.append("No results yet", style="bold")
        text.append(f"\n{safe_text(str(layout.output))} has no final_results.json and no branches.", style="dim")
        return text
    text.append(f"Results · {r.problem_name}", style="bold")
    text.append(f"  (from {loaded.source})", style="dim")
    if not r.complete:
        text.append("  incomplete run", style="yellow")
    if r.dry_run:
        text.append("  dry-run", style="yellow")
    text.append("\n")
    verdict = verdict_text(r)
    if verdict is not None:
        text.append(f"run {safe_text(verdict)}\n", style="red" if r.run_status == "failed" else "dim")
    if r.best is not None:
        b = r.best
        text.append("best ", style="bold")
        text.append(f"{fmt_ms(b.time_ms)} {fmt_result(b.speedup, b.score if r.cases else None)}", style="bold green")
        if r.cases:  # the score ranks; the primary case's own speedup is labelled as such
            text.append(f" · primary case {fmt_speedup(b.speedup)}")
        text.append(f" · {b.branch}/iter{b.iteration} · {fmt_config(b.config)}")
        if b.superseded:
            text.append(" · superseded by a revert, still the fastest measured", style="yellow")
        if r.cases:
            text.append("\n")
            text.append_text(score_line(b.score, b.cases))
        text.append(f"\n{safe_text(b.kernel_path)}", style="dim")
    elif r.dry_run:
        text.append(f"no best: {DRY_RUN_BEST}", style="dim")
    elif r.cases:
        text.append("no kernel has a valid result on every case, so none has a score", style="dim")
    else:
        text.append("no valid kernel was timed", style="dim")
    if r.reference_ms is None and r.reference_source == NO_BASELINE:
        ref = f"reference {NO_BASELINE}"
    else:
        ref = f"reference {fmt_ms(r.reference_ms)}" + (f" ({r.reference_source})" if r.reference_source else "")
    calls = reference_calls(r)
    if calls is not None:
        ref += f", {calls.samples_text()}"
    tokens = " ".join(f"{k} {fmt_count(v)}" for k, v in r.tokens.items()) or NONE
    text.append(f"\n{ref} · tokens {tokens} · cost {fmt_cost(r.cost_usd)}", style="dim")
    if r.illustrative_usage and (r.cost_usd or any(r.tokens.values())):
        text.append(f" {ILLUSTRATIVE} (a replay's recorded figures; nothing was spent)", style="italic")
    spread = reference_spread_warning(r)
    if spread is not None:
        text.append(f"\nwarning: {spread}", style="yellow")
    for note in loaded.notes[:3]:
        text.append(f"\n{note}", style="yellow")
    return text


RESULTS_EXTRA: tuple[keymap.Key, ...] = (
    keymap.Key("e", "export", "export", "Export the results to output/results.md and output/results.csv"),
)
LIVE_RELOAD_S = 2.0  # while the run has not finished, the view reloads this often


class BranchTable(KeyTable):
    """The per-branch table: a reason wider than the screen scrolls into view, ten columns a press."""

    BINDINGS = keymap.bindings(keymap.SIDEWAYS)

    def action_scroll_columns(self, columns: int) -> None:
        self.scroll_relative(x=columns, animate=False)


class ResultsScreen(Screen[None]):
    BINDINGS = keymap.bindings(keymap.RESULTS + RESULTS_EXTRA)

    def __init__(self, layout: RunLayout, standalone: bool = False) -> None:
        super().__init__()
        self._layout = layout
        self._standalone = standalone
        self._branches: dict[str, BranchSummary] = {}

    def compose(self) -> ComposeResult:
        # Taller than a small terminal (80x24): the view scrolls, to whichever part has the focus
        # (Tab: the branch table, the pictures, the kernel).
        with VerticalScroll(id="results"):
            yield Static("Loading results…", id="results-header")
            yield BranchTable(COLUMNS, id="results-branches")
            yield Static("", id="results-why")  # the highlighted branch's reason, whole (the table cuts it)
            yield ResultsPictures(id="results-pictures")
            yield Static("", id="results-kernel-header", classes="pane-header")
            with ScrollPane(id="results-kernel-scroll"):
                yield Static("", id="results-kernel")
        yield Footer()

    def on_mount(self) -> None:
        self.load()
        self._live_timer = self.set_interval(LIVE_RELOAD_S, self._reload_while_live)

    def _reload_while_live(self) -> None:
        """A run still going (no final_results.json yet, or one marked incomplete): read it again."""
        loaded = getattr(self, "_loaded", None)
        if loaded is None or loaded.results is None or not loaded.results.complete or loaded.source != FROM_FILE:
            self.load()

    def action_export(self) -> None:
        loaded = getattr(self, "_loaded", None)
        if loaded is None or loaded.results is None:
            self.notify("No results to export yet")
            return
        try:
            paths = [export_results(loaded, self._layout, self._layout.output / f"results{s}") for s in (".md", ".csv")]
        except (OSError, ExportError) as exc:
            self.notify(f"Export failed: {exc}", severity="error")
            return
        self.notify("Exported " + ", ".join(str(p) for p in paths))

    @work(exclusive=True, group="results")
    async def load(self) -> None:
        # Names, reasons and notes come from the run's files: terminal-safe before they are shown.
        loaded = safe_value(await asyncio.to_thread(load_results, self._layout))
        best = loaded.results.best if loaded.results else None
        floor_ms = await asyncio.to_thread(best_floor_ms, self._layout, best) if best is not None else None
        if not self.app.is_running or not self.is_attached:
            return  # closed (Esc, the app quitting) while the files were read
        self._loaded = loaded
        self.query_one(ResultsPictures).show(loaded, floor_ms)
        self.query_one("#results-header", Static).update(results_header(loaded, self._layout))
        best = loaded.results.best if loaded.results else None
        if best is not None and best.cases and loaded.results and loaded.results.cases:
            table = Static(case_table(best.cases), id="results-cases")
            table.styles.width = natural_width(table.content)  # whole: the scroll around it shows the rest
            cases = HorizontalScroll(table, id="results-cases-scroll")
            for stale in self.query("#results-cases-scroll"):
                await stale.remove()
            await self.query_one("#results", VerticalScroll).mount(cases, after="#results-header")
        branches = sorted(loaded.results.branches, key=_sort_key) if loaded.results else []
        self._branches = {b.name: b for b in branches}
        rows = {}
        scored = bool(loaded.results and loaded.results.cases)  # with cases every figure is a score
        for b in branches:
            shown = loaded.shown_status(b.status, b.name)
            status = Text(f"{status_icon(shown)} {shown}", style=STATUS_STYLES.get(shown, ""))
            at = f"iter{b.best_iteration}" if b.best_iteration is not None else NONE
            rows[b.name] = (
                b.name,
                status,
                str(b.iterations),
                fmt_ms(b.best_ms),
                fmt_result(b.speedup, b.score if scored else None),
                at,
                b.stop_reason or "",
            )
        table = self.query_one("#results-branches", KeyTable)
        table.columns[ColumnKey("speedup")].label = Text("score" if scored else "speedup")
        table.sync(rows)
        table.focus()
        if branches:
            self.show_kernel_of(branches[0].name)

    def show_kernel_of(self, name: str) -> None:
        b = self._branches.get(name)
        why = self.query_one("#results-why", Static)
        why.update(Text.assemble((f"{name} stopped because: ", "bold"), b.stop_reason) if b and b.stop_reason else "")
        why.display = bool(b and b.stop_reason)
        header = self.query_one("#results-kernel-header", Static)
        body = self.query_one("#results-kernel", Static)
        if b is None or b.best_iteration is None:
            header.update(Text(f"{name}: no timed kernel"))
            body.update("")
            return
        path = (
            self._layout.within_output(b.kernel_path)  # a run the original CACAO wrote (nested branches)
            if b.kernel_path
            else self._layout.branch(name).iteration(b.best_iteration).kernel
            if is_branch_name(name)
            else None
        )
        source = read_text_quietly(path) if path is not None else None
        header.update(Text(f"best kernel of {name}: {safe_text(str(path or b.kernel_path))}"))
        body.update(
            Syntax(source, "cuda", theme="ansi_dark", line_numbers=True)
            if source is not None
            else Text("(kernel file missing)", style="dim")
        )

    def action_show_kernel(self) -> None:
        table = self.query_one("#results-branches", KeyTable)
        if table.row_count:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            if key is not None:
                self.show_kernel_of(key)
                self.query_one("#results-kernel-scroll").focus()

    @on(DataTable.RowHighlighted, "#results-branches")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.show_kernel_of(event.row_key.value)

    @on(DataTable.RowSelected, "#results-branches")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_show_kernel()

    def action_close(self) -> None:
        if self._standalone:
            self.app.exit(None)
        else:
            self.dismiss(None)


class StandaloneResultsScreen(ResultsScreen):
    """``cacao --dir X --best``: the results view as the whole app (Esc and q quit; the footer says quit)."""

    BINDINGS = keymap.bindings(keymap.RESULTS_STANDALONE)

    def __init__(self, layout: RunLayout) -> None:
        super().__init__(layout, standalone=True)
