"""A scroll area with vi keys, for long read-only content (kernel source, LLM calls, a check page).

← and → move ten columns at a time (a line wider than the pane is read in a few presses, not
one press per character); Home / End go to the first and the last line."""

from __future__ import annotations

from textual.containers import VerticalScroll

from cacao_tui.ui import keymap

COLUMNS_PER_PRESS = 10


class ScrollPane(VerticalScroll):
    BINDINGS = keymap.bindings(keymap.SCROLL + keymap.SIDEWAYS)

    def action_scroll_columns(self, columns: int) -> None:
        self.scroll_relative(x=columns, animate=False)
