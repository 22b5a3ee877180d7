"""The ``?`` screen: every key, generated from the keymap."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from cacao_tui.ui import keymap
from cacao_tui.ui.widgets.scroll_pane import ScrollPane


def help_table() -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for title, keys in keymap.help_sections():
        table.add_row(Text(title, style="bold underline"), "")
        for key in keys:
            table.add_row("" if title.startswith("Command palette") else key.shown, key.help)
        table.add_row("", "")
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = keymap.bindings(keymap.CLOSE)

    def compose(self) -> ComposeResult:
        with Vertical(id="help", classes="dialog"):
            yield Static("Keys  (esc closes)", classes="dialog-title")
            with ScrollPane(id="help-scroll"):
                yield Static(help_table(), id="help-table")

    def action_close(self) -> None:
        self.dismiss(None)
