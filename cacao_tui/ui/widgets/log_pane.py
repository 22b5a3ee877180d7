"""The Log tab: a bounded Log widget fed in batches, with a ``/`` filter over the kept history."""

from __future__ import annotations

from collections.abc import Iterable

from rich.highlighter import Highlighter
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Log

from cacao_tui.ui import keymap
from cacao_tui.ui.log_store import LogEntry, LogStore, matches
from cacao_tui.ui.run_view import Selection
from cacao_tui.ui.widgets.text_line import TextLine

LOG_WIDGET_LINES = 5_000
LEVEL_STYLES = {"E": "red", "W": "yellow"}


class LogLineHighlighter(Highlighter):
    """Colours only warnings and errors, one span per line: at thousands of lines a second
    every span shows up in the frame time (bench/ui_event_lag.py), so info lines stay plain."""

    def highlight(self, text: Text) -> None:
        plain = text.plain
        if len(plain) > 10 and plain[8] == " " and plain[10] == " ":
            style = LEVEL_STYLES.get(plain[9])
            if style:
                text.stylize(style, 9)


class ScrollLog(Log):
    BINDINGS = keymap.bindings(keymap.SCROLL + keymap.SIDEWAYS)  # a long line: → ten columns a press
    highlighter = LogLineHighlighter()

    def action_scroll_columns(self, columns: int) -> None:
        self.scroll_relative(x=columns, animate=False)


class LogPane(Vertical):
    """Shows the lines of the selected scope (run, branch or iteration) that pass the filter."""

    class FilterChanged(Message):
        def __init__(self, needle: str) -> None:
            super().__init__()
            self.needle = needle

    BINDINGS = keymap.bindings(keymap.LOG_FILTER)

    def __init__(self, store: LogStore, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._store = store
        self.selection = Selection()
        self.needle = ""

    def compose(self) -> ComposeResult:
        yield TextLine("", id="log-header", classes="pane-header")
        yield ScrollLog(highlight=True, max_lines=LOG_WIDGET_LINES, id="log-lines")
        yield Input(placeholder="filter: text to keep (Enter keeps, Esc clears)", id="log-filter")

    def on_mount(self) -> None:
        self.log_widget = self.query_one("#log-lines", ScrollLog)
        self.query_one("#log-filter").display = False
        self._update_header()

    def _update_header(self) -> None:
        where = self.selection.label
        text = f"Log · {where}"
        if self.needle:
            text += f" · filter “{self.needle}”"
        self.query_one("#log-header", TextLine).update(text)

    def redraw(self) -> None:
        log = self.log_widget
        log.clear()
        log.write_lines(self._store.lines(self.selection, self.needle))
        self._update_header()

    def set_selection(self, selection: Selection) -> None:
        if selection != self.selection:
            self.selection = selection
            self.redraw()

    def append(self, entries: Iterable[LogEntry]) -> int:
        needle = self.needle.lower()
        lines = [e.text for e in entries if e.in_scope(self.selection) and matches(e, needle)]
        if lines:
            self.log_widget.write_lines(lines)
        return len(lines)

    def open_filter(self) -> None:
        box = self.query_one("#log-filter", Input)
        box.display = True
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#log-filter", Input)
        box.value = ""
        box.display = False
        self._set_needle("")
        self.log_widget.focus()

    def _set_needle(self, needle: str) -> None:
        if needle != self.needle:
            self.needle = needle
            self.redraw()
            self.post_message(self.FilterChanged(needle))

    @on(Input.Changed, "#log-filter")
    def _filter_typed(self, event: Input.Changed) -> None:
        event.stop()
        self._set_needle(event.value.strip())

    @on(Input.Submitted, "#log-filter")
    def _filter_kept(self, event: Input.Submitted) -> None:
        event.stop()
        if not event.value.strip():
            event.input.display = False
        self.log_widget.focus()
