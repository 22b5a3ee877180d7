"""A read-only page of text (a --check summary, a launch log); Esc closes it.

Lines keep their layout (tables, aligned columns) and scroll sideways: ← → (and the mouse) move
across a line wider than the page, as ↑ ↓ j k g G move through the lines."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from cacao_tui.ui import keymap
from cacao_tui.ui.formatting import safe_text
from cacao_tui.ui.widgets.scroll_pane import ScrollPane

MAX_CHARS = 200_000


class TextScreen(ModalScreen[None]):
    BINDINGS = keymap.bindings(keymap.CLOSE)
    # The whole screen, not a dialog's 64 columns: a check page's lines are wide (at 80x24 it
    # used 64 columns and clipped them).
    DEFAULT_CSS = """
    TextScreen > #text-page {
        width: 100%; height: 100%; padding: 0 1; border: thick $primary; background: $surface;
    }
    TextScreen #text-title { text-style: bold; }
    TextScreen #text-scroll { overflow-x: auto; }
    TextScreen #text-body { width: auto; text-wrap: nowrap; }
    """

    def __init__(self, title: str, body: str = "", *, style: str = "") -> None:
        super().__init__(classes="dialog-screen")
        self._title, self._body, self._style = title, body, style

    def compose(self) -> ComposeResult:
        with Vertical(id="text-page"):
            title = Text(safe_text(self._title))
            title.append("   esc closes · ← → scroll a wide line", style="dim")
            yield Static(title, id="text-title")
            with ScrollPane(id="text-scroll"):
                yield Static(self._render_body(self._body), id="text-body")

    def _render_body(self, body: str) -> Text:
        return Text(safe_text(body[-MAX_CHARS:], keep_newlines=True), style=self._style)

    def show(self, body: str, *, style: str = "") -> None:
        """Replace the text (a check that finished)."""
        self._style = style
        self.query_one("#text-body", Static).update(self._render_body(body))

    def action_close(self) -> None:
        self.dismiss(None)
