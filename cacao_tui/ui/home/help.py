"""A ``?`` screen for any table of keys (the home screen's, an attached run's)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from cacao_tui.ui import keymap
from cacao_tui.ui.keymap import Key
from cacao_tui.ui.screens.help import keys_table
from cacao_tui.ui.widgets.scroll_pane import ScrollPane


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
