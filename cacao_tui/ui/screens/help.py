"""The ``?`` screen: every key, generated from the keymap."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from cacao_tui.ui import keymap
from cacao_tui.ui.widgets.scroll_pane import ScrollPane

PALETTE_ONLY = "Command palette"  # a section of actions without a key: no key column


def keys_table(sections: list[tuple[str, list[keymap.Key]]], note: str = "") -> Group:
    """Each section's title on a line of its own, then its keys: the key column is as wide as the
    widest key (a title in it made it ~30 columns, and at 80 every description wrapped)."""
    width = max((len(k.shown) for title, keys in sections if not title.startswith(PALETTE_ONLY) for k in keys),
                default=1)  # fmt: skip
    parts: list[RenderableType] = []
    for title, keys in sections:
        if not keys:
            continue
        parts.append(Text(title, style="bold underline"))
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True, width=width)
        table.add_column()
        for key in keys:
            table.add_row("" if title.startswith(PALETTE_ONLY) else key.shown, key.help)
        parts += [table, Text("")]
    if note:
        parts.append(Text(note, style="italic"))
    return Group(*parts)


def help_table() -> Group:
    return keys_table(keymap.help_sections())


class HelpScreen(ModalScreen[None]):
    BINDINGS = keymap.bindings(keymap.CLOSE)

    def compose(self) -> ComposeResult:
        with Vertical(id="help", classes="dialog"):
            yield Static("Keys  (esc closes)", classes="dialog-title")
            with ScrollPane(id="help-scroll"):
                yield Static(help_table(), id="help-table")

    def action_close(self) -> None:
        self.dismiss(None)
