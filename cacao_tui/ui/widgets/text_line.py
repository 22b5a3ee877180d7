"""Fixed-height text whose updates repaint only itself.

``Static.update`` asks for a layout of the whole screen on every call; at 200x60 with a
flood of events that was a visible share of each frame. Headers, counters and the status
bar have a fixed height (set in cacao.tcss), so they repaint without a layout.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget


class TextLine(Widget):
    DEFAULT_CSS = """
    TextLine {
        height: 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, text: str | Text = "", **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._text = Text(text) if isinstance(text, str) else text
        self._key = self._text.markup

    @property
    def content(self) -> Text:
        return self._text

    def update(self, text: str | Text) -> None:
        new = Text(text) if isinstance(text, str) else text
        key = new.markup
        if key != self._key:
            self._text, self._key = new, key
            self.refresh()

    def render(self) -> Text:
        return self._text
