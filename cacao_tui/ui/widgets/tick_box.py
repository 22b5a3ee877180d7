"""A checkbox whose mark tells its state without colour.

Textual's draws an X whether ticked or not and tells them apart by colour alone, which NO_COLOR
(greys only) and some palettes lose. This one draws ✓ when ticked and a blank when not.
"""

from __future__ import annotations

from textual.widgets import Checkbox

TICKED, UNTICKED = "✓", " "


class TickBox(Checkbox):
    @property
    def BUTTON_INNER(self) -> str:  # type: ignore[override]  # Textual's name for the mark
        return TICKED if self.value else UNTICKED
