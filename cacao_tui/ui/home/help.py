"""A ``?`` screen for any table of keys (the home screen's, an attached run's)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from cacao_tui.ui import keymap
from cacao_tui.ui.keymap import Key
from cacao_tui.ui.widgets.scroll_pane import ScrollPane


def keys_table(sections: list[tuple[str, list[Key]]], note: str = "") -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for title, keys in sections:
        if not keys:
            continue
        table.add_row(Text(title, style="bold underline"), "")
        for key in keys:
            table.add_row(key.shown, key.help)
        table.add_row("", "")
    if note:
        table.add_row("", Text(note, style="italic"))
    return table


class KeysScreen(ModalScreen[None]):
    BINDINGS = keymap.bindings(keymap.CLOSE)

    def __init__(self, sections: list[tuple[str, list[Key]]], note: str = "") -> None:
        super().__init__()
        self._sections, self._note = sections, note

    def compose(self) -> ComposeResult:
        with Vertical(id="help", classes="dialog"):
            yield Static("Keys  (esc closes)", classes="dialog-title")
            with ScrollPane(id="help-scroll"):
                yield Static(keys_table(self._sections, self._note), id="help-table")

    def action_close(self) -> None:
        self.dismiss(None)
