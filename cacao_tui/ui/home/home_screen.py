"""The home screen: the problems of a folder with their last run, and what to do with them.

Every action works on the highlighted problem. Runs are started as processes of their own
(``cacao_tui.runs.launcher``); opening a problem with a run leaves this app for the run's
view (``HomeChoice``), and the home screen comes back when that view is closed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from cacao_tui.engine.control import SteeringError
from cacao_tui.llm.usage import ILLUSTRATIVE, is_illustrative
from cacao_tui.runs.catalog import ProblemEntry, scan_problems
from cacao_tui.runs.last_run import NOT_RUN
from cacao_tui.runs.last_settings import options_like_last_run
from cacao_tui.runs.launcher import LAUNCH_LOG, LaunchRefused, RunOptions, Started, log_tail, start_detached
from cacao_tui.runs.problem_trash import TrashError, move_to_trash
from cacao_tui.runs.remote_control import stop_run
from cacao_tui.store.layout import RunLayout
from cacao_tui.ui import keymap
from cacao_tui.ui.formatting import fit_path, safe_text
from cacao_tui.ui.home.editor_hook import edit_problem_screen, new_problem_screen
from cacao_tui.ui.home.help import KeysScreen
from cacao_tui.ui.home.keys import HOME, HOME_FIND, home_sections
from cacao_tui.ui.home.rows import COLUMNS, HISTORY_CELLS, SORTS, WIDE_AT, WIDE_COLUMNS, describe, row_cells, sort_key
from cacao_tui.ui.home.run_dialog import RunDialog
from cacao_tui.ui.home.text_screen import TextScreen
from cacao_tui.ui.screens.clone import CloneScreen
from cacao_tui.ui.screens.dialogs import ConfirmScreen
from cacao_tui.ui.screens.results import ResultsScreen
from cacao_tui.ui.widgets.gpu_panel import GpuPanel
from cacao_tui.ui.widgets.table_sync import KeyTable
from ktt.problem.errors import display_path

REFRESH_S = 2.0  # the list re-reads the folder this often (runs change status by themselves)


@dataclass
class HomeChoice:
    """What the home app exits with: open this problem's run (and the run just started, if any)."""

    problem_dir: Path
    started: Started | None = None


def check_text(problem_dir: Path) -> tuple[bool, str]:
    """``cacao --check``: load, then compile/build/import the reference; (passed, text)."""
    from cacao_tui.problem import ProblemError, load_problem
    from cacao_tui.problem.summary import render_check
    from ktt.problem.preflight import preflight

    try:
        problem = load_problem(problem_dir)
        steps = preflight(problem)
    except ProblemError as exc:
        return False, exc.line() + ("; " + exc.hint if getattr(exc, "hint", None) else "")
    except OSError as exc:
        return False, f"{problem_dir}: {exc.strerror or exc}"
    return True, render_check(problem, steps) + f"\n\nOK: {problem_dir} is a valid problem"


class HomeScreen(Screen[None]):
    BINDINGS: ClassVar = [*keymap.bindings(HOME), *keymap.bindings(HOME_FIND)]
    DEFAULT_CSS = """
    HomeScreen #home-header { height: 1; padding: 0 1; background: $boost; text-style: bold; }
    HomeScreen #home-table { height: 1fr; }
    HomeScreen #home-detail { height: auto; max-height: 8; padding: 0 1; border-top: solid $primary; }
    HomeScreen #home-empty { padding: 1 2; color: $text-muted; height: auto; }
    HomeScreen #home-filter { dock: bottom; height: 3; display: none; }
    """

    def __init__(self, folder: Path, select: Path | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.folder = folder
        self.entries: dict[str, ProblemEntry] = {}
        self._select = select.name if select is not None else None
        self.scans = 0
        self.sort_by = SORTS[0]
        self.needle = ""  # the / filter: rows whose name holds it
        self.wide = False  # the dashboard's columns (WIDE_AT columns and more)
        self._all: list[ProblemEntry] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="home"):
            yield Static("", id="home-header")
            yield KeyTable(COLUMNS, id="home-table")
            yield Static("", id="home-empty")
            yield Static("", id="home-detail")
        yield Input(placeholder="filter: part of a name (Enter keeps it, Esc clears it)", id="home-filter")
        yield GpuPanel(id="home-gpus")
        yield Footer()

    def on_mount(self) -> None:
        self.table = self.query_one("#home-table", KeyTable)
        self.table.focus()
        self._fit_columns()
        self._first_scan()
        self.set_interval(REFRESH_S, self.refresh_list)

    # ---- the list ---------------------------------------------------------------------------
    def _first_scan(self) -> None:
        """The list is there before the first key is handled, so keys typed while the app was starting
        (j j, r) act on it, not on an empty table (a scan of the shipped problems takes ~30 ms)."""
        try:
            entries = scan_problems(self.folder)
        except Exception:  # the worker says why, and tries again every REFRESH_S
            self.refresh_list()
            return
        self.show_entries(entries)

    @work(exclusive=True, group="home-scan")
    async def refresh_list(self) -> None:
        try:  # each problem's trouble is on its row (runs.catalog); this is the folder's own
            entries = await asyncio.to_thread(scan_problems, self.folder)
        except Exception as exc:  # the list tries again at its next refresh
            self.query_one("#home-header", Static).update(Text(safe_text(f"cacao · cannot list {self.folder}: {exc}")))
            return
        self.show_entries(entries)

    def show_entries(self, entries: list[ProblemEntry]) -> None:
        self.scans += 1
        self._all = entries
        self.entries = {e.key: e for e in entries}
        running = sum(1 for e in entries if e.last.live is not None)
        header = f"cacao · {len(entries)} problem{'s' if len(entries) != 1 else ''}"
        if running:
            header += f" · {running} running"
        header += f" · {safe_text(display_path(self.folder))}"
        if self.sort_by != SORTS[0]:
            header += f" · sorted by {self.sort_by}"
        shown = sorted((e for e in entries if self.needle in e.name.lower()), key=lambda e: sort_key(e, self.sort_by))
        if self.needle:
            header += f" · filter “{safe_text(self.needle)}”: {len(shown)} shown"
        if self.wide and any(is_illustrative(e.last.provider) and e.last.cost_usd for e in shown):
            header += f" · * cost of a replay: {ILLUSTRATIVE} (nothing was spent)"
        self.query_one("#home-header", Static).update(Text(header))
        rows = {e.key: row_cells(e, wide=self.wide) for e in shown}
        if self.table.order() != list(rows)[: self.table.row_count] or len(rows) < self.table.row_count:
            keep = self.current().key if self.current() is not None else None
            self.table.clear()  # another order (a sort, a filter): rebuilt, the cursor on its row
            self.table.sync(rows)
            if keep in rows and self._select is None:
                self._select = keep
        else:
            self.table.sync(rows)
        empty = self.query_one("#home-empty", Static)
        empty.display = not shown
        if not entries:
            empty.update(f"No problems in {safe_text(str(self.folder))} yet.\nn creates one; ? lists the keys.")
        elif not shown:
            empty.update(f"No problem's name holds “{safe_text(self.needle)}”: Esc clears the filter.")
        if self._select is not None and self._select in rows:
            self.table.move_cursor(row=self.table.get_row_index(self._select))
            self._select = None
        self._show_detail()

    def on_resize(self) -> None:
        self._fit_columns()

    def _fit_columns(self) -> None:
        """The dashboard's columns from WIDE_AT columns on, the compact ones below; the widths
        spread the table over the screen."""
        wide = self.size.width >= WIDE_AT
        if wide == self.wide and self.table.columns:
            return
        self.wide = wide
        if wide:
            spare = max(0, self.size.width - 150)
            widths = {"name": 22 + spare // 3, "status": 22, "best": 13, "history": HISTORY_CELLS + 10 + spare // 3,
                      "tokens": 8, "cost": 8, "gpu": 9, "when": 6}  # fmt: skip
            self.table.set_columns(WIDE_COLUMNS, widths)
        else:
            self.table.set_columns(COLUMNS)
        if self._all:
            self.show_entries(self._all)

    def current(self) -> ProblemEntry | None:
        if not self.table.row_count:
            return None
        key = self.table.coordinate_to_cell_key(self.table.cursor_coordinate).row_key.value
        return self.entries.get(key) if key is not None else None

    def _show_detail(self) -> None:
        entry = self.current()
        panel = self.query_one("#home-detail", Static)
        panel.update(describe(entry, width=max(20, panel.size.width - 2)) if entry is not None else "")

    @on(DataTable.RowHighlighted, "#home-table")
    def _highlighted(self) -> None:
        self._show_detail()

    @on(DataTable.RowSelected, "#home-table")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def select_after_refresh(self, directory: Path) -> None:
        self._select = directory.name
        self.refresh_list()

    def _need(self) -> ProblemEntry | None:
        entry = self.current()
        if entry is None:
            self.app.notify("No problem here yet: n creates one", severity="warning")
        return entry

    # ---- actions ------------------------------------------------------------------------------
    def action_help(self) -> None:
        self.app.push_screen(KeysScreen(home_sections(), "Runs are processes of their own: q leaves them running."))

    def action_open(self) -> None:
        entry = self._need()
        if entry is None:
            return
        if entry.last.status == NOT_RUN:
            then = "e edits it, c checks it" if entry.error else "r runs it, c checks it"
            self.app.notify(f"{entry.name} has not been run yet: {then}", timeout=6)
            return
        self.app.exit(HomeChoice(entry.directory))

    def action_results(self) -> None:
        entry = self._need()
        if entry is not None:
            self.app.push_screen(ResultsScreen(RunLayout(entry.directory)))

    def action_check(self) -> None:
        entry = self._need()
        if entry is None:
            return
        page = TextScreen(f"Check · {entry.name}", "checking… (loads the problem, builds the reference)")
        self.app.push_screen(page)
        self._run_check(entry.directory, page)

    @work(group="check")
    async def _run_check(self, directory: Path, page: TextScreen) -> None:
        ok, text = await asyncio.to_thread(check_text, directory)
        if page.is_attached:
            page.show(text, style="" if ok else "red")

    def action_new(self) -> None:
        self.app.push_screen(new_problem_screen(self.folder), self._created)

    def _created(self, directory: Path | None) -> None:
        if directory is not None:
            self.select_after_refresh(Path(directory))

    def action_edit(self) -> None:
        entry = self._need()
        if entry is None:
            return
        self.app.push_screen(edit_problem_screen(entry.directory), self._created)

    def action_clone(self) -> None:
        entry = self._need()
        if entry is not None:
            self.app.push_screen(CloneScreen(entry.directory), self._created)

    def action_delete(self) -> None:
        entry = self._need()
        if entry is None:
            return

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            try:
                target = move_to_trash(entry.directory)
            except TrashError as exc:
                self.app.notify(str(exc), severity="error", timeout=8)
                return
            self.app.notify(f"Moved {entry.name} to {target} (nothing is lost)", timeout=8)
            self.refresh_list()

        trash = fit_path(display_path(self.folder / ".trash"), 56)
        detail = f"It moves, with its runs, to\n{trash}/\nNothing is deleted."
        self.app.push_screen(ConfirmScreen(f"Delete {entry.name}?", detail, yes="Delete"), answered)

    def _start_dialog(self, title: str, preset: RunOptions) -> None:
        entry = self._need()
        if entry is None:
            return
        if entry.last.live is not None:
            self.app.notify(f"{entry.name} is running ({entry.last.live.describe()}): enter attaches", timeout=8)
            return
        if entry.error:
            self.app.notify(f"{entry.error} · e edits it", severity="error", timeout=8)
            return

        def chosen(options: RunOptions | None) -> None:
            if options is not None:
                self._launch(entry, options)

        self.app.push_screen(RunDialog(entry.directory, title=title, preset=preset), chosen)

    def action_run(self) -> None:
        self._start_dialog("Run", RunOptions())

    def action_resume(self) -> None:
        entry = self.current()
        if entry is not None and entry.last.status == NOT_RUN:
            self.app.notify(f"{entry.name} has no run to resume: r runs it", severity="warning")
            return
        if entry is not None:
            self._start_dialog("Resume", options_like_last_run(entry.directory, resume=True))

    def action_rerun(self) -> None:
        entry = self.current()
        if entry is not None:
            self._start_dialog("Run again", options_like_last_run(entry.directory))

    @work(exclusive=True, group="launch")
    async def _launch(self, entry: ProblemEntry, options: RunOptions) -> None:
        try:
            started = await asyncio.to_thread(start_detached, entry.directory, options)
        except LaunchRefused as exc:
            self.app.notify(str(exc), severity="error", timeout=10)
            return
        self.app.notify(f"Started {entry.name} (pid {started.pid}); it goes on if the app quits", timeout=6)
        self.app.exit(HomeChoice(entry.directory, started))

    def action_stop_run(self) -> None:
        entry = self._need()
        if entry is None:
            return
        live = entry.last.live
        if live is None:
            self.app.notify(f"{entry.name} has no live run", severity="warning")
            return

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            try:
                pid = stop_run(entry.directory)
            except SteeringError as exc:
                self.app.notify(str(exc), severity="error")
                return
            if pid is not None:
                self.app.notify(f"Asked pid {pid} to stop cleanly; R resumes it later", timeout=8)
            self.refresh_list()

        detail = f"{live.describe()}\nRunning steps are cancelled cleanly; R (resume) continues it later."
        self.app.push_screen(ConfirmScreen(f"Stop the run of {entry.name}?", detail, yes="Stop"), answered)

    def action_launch_log(self) -> None:
        entry = self._need()
        if entry is None:
            return
        path = RunLayout(entry.directory).output / LAUNCH_LOG
        lines = log_tail(path, lines=400, limit=256 * 1024)
        body = "\n".join(lines) if lines else f"{path}: no launch log (runs started from the app write one)"
        self.app.push_screen(TextScreen(f"Launch log · {entry.name}", body))

    def action_toggle_gpus(self) -> None:
        self.app.notify(self.query_one(GpuPanel).toggle(), timeout=4)

    def action_quit(self) -> None:
        """Leave the app; runs started from it are processes of their own and go on."""
        self.app.exit(None)

    def action_cursor_down(self) -> None:
        self.table.action_cursor_down()

    def action_cursor_up(self) -> None:
        self.table.action_cursor_up()

    def action_cursor_last(self) -> None:
        if self.table.row_count:
            self.table.move_cursor(row=self.table.row_count - 1)

    def action_cursor_first(self) -> None:
        if self.table.row_count:
            self.table.move_cursor(row=0)

    def action_sort(self) -> None:
        self.sort_by = SORTS[(SORTS.index(self.sort_by) + 1) % len(SORTS)]
        self.app.notify(f"Sorted by {self.sort_by} (s: next order)", timeout=3)
        self.show_entries(self._all)

    def action_filter(self) -> None:
        box = self.query_one("#home-filter", Input)
        box.display = True
        box.value = self.needle
        box.focus()

    @on(Input.Changed, "#home-filter")
    def _filter_typed(self, event: Input.Changed) -> None:
        self.needle = event.value.strip().lower()
        self.show_entries(self._all)

    @on(Input.Submitted, "#home-filter")
    def _filter_kept(self) -> None:
        self.query_one("#home-filter", Input).display = bool(self.needle)
        self.table.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#home-filter", Input)
        if not box.display and not self.needle:
            return
        self.needle = ""
        box.value = ""
        box.display = False
        self.table.focus()
        self.show_entries(self._all)
